// Package expirybench measures what flexslurm's make-before-break does for a
// static Flex-Start pool across the expiries of its VMs, against recreating
// each static node only after Compute Engine ended it
// (plan.Policy.RecreateAfterTermination).
//
// One run (Run) drives the real functions through dev/harness — the
// in-memory store, the Compute simulator behind the real apiv1 adapter and a
// recording publisher, on a manual clock — for a warm-up plus a measured
// period of a pool whose VMs all reach their max run duration. Capacity
// waits are drawn per resize request from a seeded log-normal distribution.
// The package plays the little of Slurm that matters here (slurmModel):
// nodes register a boot time after their VM runs, are idle or allocated,
// honour flexslurm's drain and resume commands and its end-of-life
// reservations, and run a seeded single-node job workload; a job still
// running when its node's VM ends is killed by expiry (and requeued, as
// Slurm does).
//
// Compare runs the same configuration (same seed, so the same job arrivals
// and the same sequence of capacity waits) under several strategies;
// WriteTable prints their metrics side by side and WriteTimeline draws one
// lane per node with its phases coloured (gonum.org/v1/plot).
package expirybench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/flexslurm/flexslurm/shared/plan"
)

// Config is one bench configuration. Zero fields take the defaults noted.
type Config struct {
	// Seed seeds the capacity waits and the job workload. The same seed
	// gives every strategy the same job arrivals and the same sequence of
	// capacity waits (the i-th resize request waits the i-th draw).
	Seed uint64
	// Nodes is the pool's min_node_count, its static nodes. Default 8.
	Nodes int
	// MaxNodes is the pool's max_node_count: room for the successors that
	// make-before-break requests in free slots. Default 2 × Nodes.
	MaxNodes int
	// MaxRunDuration is the pool's flex_start_max_duration: every VM ends
	// this long after it was created. Default 7 days; 600 s to 7 days.
	MaxRunDuration time.Duration
	// WarmUp is simulated before the measured period, so that the pool has
	// filled and the workload is in steady state when measuring starts.
	// Default 24 h.
	WarmUp time.Duration
	// Period is the measured period that follows the warm-up. Default 7 days.
	Period time.Duration
	// Tick is the reconcile period (Cloud Scheduler); a Slurm snapshot is
	// published just before each tick. Default 5 min.
	Tick time.Duration
	// BootTime is how long after its VM runs a node registers in Slurm
	// (boot, then slurmd). Default 5 min.
	BootTime time.Duration
	// Wait is the capacity wait distribution. Default DefaultWait.
	Wait WaitDist
	// Load is the offered job load as a fraction of Nodes busy: job
	// arrivals are a Poisson process whose rate is Load × Nodes divided by
	// the mean job runtime. Default 0.7.
	Load float64
	// MinLimit and MaxLimit bound the job time limits, drawn log-uniformly
	// between them. Defaults min(1 h, MaxLimit / 4) and min(3 days,
	// ¾ × MaxRunDuration): a job that cannot fit a node's life is not
	// submitted to such a pool.
	MinLimit, MaxLimit time.Duration
	// DirectCompute sends every Compute read through the apiv1 adapter.
	// By default a read whose answer cannot have changed since the same
	// read was last made (the simulator's state is the same) is answered
	// from that answer (readCache): the results are identical, and a run
	// takes a fraction of the time.
	DirectCompute bool
}

// Defaults of Config.
const (
	DefaultNodes          = 8
	DefaultMaxRunDuration = 7 * 24 * time.Hour
	DefaultWarmUp         = 24 * time.Hour
	DefaultPeriod         = 7 * 24 * time.Hour
	DefaultTick           = 5 * time.Minute
	DefaultBootTime       = 5 * time.Minute
	DefaultLoad           = 0.7
	DefaultMinLimit       = time.Hour
	// DefaultMaxLimit caps job time limits (further capped at ¾ of the
	// pool's max run duration).
	DefaultMaxLimit = 3 * 24 * time.Hour
)

// DefaultWait is the default capacity wait: log-normal with a median of
// 20 min and σ = 1 (mean 33 min, 90th percentile 72 min, 99th percentile
// 3.4 h).
var DefaultWait = WaitDist{Median: 20 * time.Minute, Sigma: 1}

// Compute Engine's bounds on a VM's max run duration.
const (
	minRunDuration = 600 * time.Second
	maxRunDuration = 7 * 24 * time.Hour
)

func (c Config) withDefaults() Config {
	if c.Nodes <= 0 {
		c.Nodes = DefaultNodes
	}
	if c.MaxNodes <= 0 {
		c.MaxNodes = 2 * c.Nodes
	}
	if c.MaxRunDuration <= 0 {
		c.MaxRunDuration = DefaultMaxRunDuration
	}
	if c.WarmUp <= 0 {
		c.WarmUp = DefaultWarmUp
	}
	if c.Period <= 0 {
		c.Period = DefaultPeriod
	}
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.BootTime <= 0 {
		c.BootTime = DefaultBootTime
	}
	if c.Wait == (WaitDist{}) {
		c.Wait = DefaultWait
	}
	if c.Load <= 0 {
		c.Load = DefaultLoad
	}
	if c.MaxLimit <= 0 {
		c.MaxLimit = min(DefaultMaxLimit, c.MaxRunDuration*3/4)
	}
	if c.MinLimit <= 0 {
		c.MinLimit = min(DefaultMinLimit, c.MaxLimit/4)
	}
	return c
}

// Validate reports a configuration the bench cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Nodes > 1000:
		return fmt.Errorf("nodes %d: at most 1000", c.Nodes)
	case c.MaxNodes < c.Nodes:
		return fmt.Errorf("max nodes %d is below nodes %d", c.MaxNodes, c.Nodes)
	case c.MaxNodes > 1000:
		return fmt.Errorf("max nodes %d: at most 1000", c.MaxNodes)
	case c.MaxRunDuration < minRunDuration || c.MaxRunDuration > maxRunDuration:
		return fmt.Errorf("max run duration %s is outside Compute's 600s–168h", c.MaxRunDuration)
	case c.MaxRunDuration%time.Second != 0:
		return fmt.Errorf("max run duration %s is not whole seconds", c.MaxRunDuration)
	case c.Period > 60*24*time.Hour || c.WarmUp > 60*24*time.Hour:
		return fmt.Errorf("warm-up %s and period %s: each at most 60 days", c.WarmUp, c.Period)
	case c.Tick > 10*time.Minute:
		return fmt.Errorf("tick %s: at most 10m (flexslurm ignores Slurm snapshots older than 10 min)", c.Tick)
	case c.Tick < time.Minute:
		return fmt.Errorf("tick %s: at least 1m", c.Tick)
	case c.Load > 10:
		return fmt.Errorf("load %g: at most 10", c.Load)
	case c.MinLimit > c.MaxLimit:
		return fmt.Errorf("job time limits: min %s is above max %s", c.MinLimit, c.MaxLimit)
	}
	return c.Wait.validate()
}

// WaitDist is a capacity wait distribution: log-normal with the given
// median and shape σ (the standard deviation of the wait's logarithm), or,
// with Sigma 0, uniform between Median − Spread and Median + Spread.
type WaitDist struct {
	Median time.Duration
	Sigma  float64
	// Spread is the half-width of the uniform distribution (Sigma 0 only).
	Spread time.Duration
}

func (w WaitDist) validate() error {
	switch {
	case w.Median < 0 || w.Sigma < 0 || w.Spread < 0:
		return fmt.Errorf("capacity wait %+v: negative parameter", w)
	case w.Sigma > 4:
		return fmt.Errorf("capacity wait σ %g: at most 4", w.Sigma)
	case w.Sigma == 0 && w.Spread > w.Median:
		return fmt.Errorf("capacity wait: spread %s is above the median %s", w.Spread, w.Median)
	}
	return nil
}

// Draw returns one wait, rounded to the second.
func (w WaitDist) Draw(r *rand.Rand) time.Duration {
	var d float64
	if w.Sigma > 0 {
		d = float64(w.Median) * math.Exp(w.Sigma*r.NormFloat64())
	} else {
		d = float64(w.Median-w.Spread) + r.Float64()*float64(2*w.Spread)
	}
	return time.Duration(d).Round(time.Second)
}

// Mean returns the distribution's mean.
func (w WaitDist) Mean() time.Duration {
	if w.Sigma > 0 {
		return time.Duration(float64(w.Median) * math.Exp(w.Sigma*w.Sigma/2))
	}
	return w.Median
}

// Quantile returns the distribution's q-quantile (0 < q < 1).
func (w WaitDist) Quantile(q float64) time.Duration {
	if w.Sigma > 0 {
		return time.Duration(float64(w.Median) * math.Exp(w.Sigma*normQuantile(q)))
	}
	return w.Median - w.Spread + time.Duration(q*float64(2*w.Spread))
}

// String describes the distribution.
func (w WaitDist) String() string {
	if w.Sigma > 0 {
		return fmt.Sprintf("log-normal, median %s, σ %g (mean %s, p90 %s, p99 %s)", fmtDur(w.Median), w.Sigma,
			fmtDur(w.Mean()), fmtDur(w.Quantile(0.9)), fmtDur(w.Quantile(0.99)))
	}
	return fmt.Sprintf("uniform %s–%s", fmtDur(w.Median-w.Spread), fmtDur(w.Median+w.Spread))
}

// normQuantile is the standard normal quantile, by bisection on the CDF
// (|error| < 1e-12).
func normQuantile(p float64) float64 {
	lo, hi := -10.0, 10.0
	for range 100 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(-mid/math.Sqrt2) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Strategy is one way of handling static nodes across expiries.
type Strategy struct {
	// Name labels the strategy's column and timeline panel.
	Name string
	// Policy is flexslurm's decision policy for the run.
	Policy plan.Policy
	// IgnoreReservations makes the Slurm model start jobs regardless of
	// flexslurm's end-of-life reservations: a system that neither replaces
	// nodes ahead nor reserves their end.
	IgnoreReservations bool
}

// The strategies Compare runs by default.
var (
	// MakeBeforeBreak is flexslurm's default policy.
	MakeBeforeBreak = Strategy{Name: "make-before-break"}
	// RecreateAfterTermination recreates a static node only after Compute
	// ended its VM; flexslurm's end-of-life reservations still keep jobs
	// off dying nodes.
	RecreateAfterTermination = Strategy{Name: "recreate-after-termination", Policy: plan.Policy{RecreateAfterTermination: true}}
	// RecreateNoReservations is RecreateAfterTermination with Slurm
	// ignoring the end-of-life reservations: the baseline of a system that
	// does neither.
	RecreateNoReservations = Strategy{Name: "recreate, no EOL reservation", Policy: plan.Policy{RecreateAfterTermination: true}, IgnoreReservations: true}
)

// Strategies returns the default strategies, make-before-break first.
func Strategies() []Strategy {
	return []Strategy{MakeBeforeBreak, RecreateAfterTermination, RecreateNoReservations}
}
