// Package tracebench replays a production GPU trace through flexslurm's
// real functions and reports what the GPUs cost against the work they did
// (`flexslurm bench trace FILE`).
//
// A run drives the four functions through dev/harness — the in-memory
// store, the Compute simulator behind the real apiv1 adapter and a
// recording publisher, on a manual clock — with the Slurm model of
// dev/scenario/slurmmodel playing slurmctld, its hooks and the agent: it
// packs each job onto the pool's 8-GPU nodes through gres/gpu, calls
// ResumeProgram for the nodes it powers up (job.pending), reports jobs
// started and finished, publishes a snapshot before every reconcile tick,
// and applies the commands flexslurm publishes. Capacity for each resize
// request arrives after a wait drawn from a seeded distribution; a node
// registers a boot time after its VM runs.
//
// What the trace lacks is derived, and the report says how: a job's time
// limit (LimitFor), a node's boot time (Config.BootTime) and the capacity
// waits (Config.Wait, Config.Seed). Compare runs the same jobs under
// several strategies — flexslurm's default policy and a baseline
// configured as Cluster Toolkit's defaults — and adds the oracle lower
// bound.
package tracebench

import (
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/dev/expirybench"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Config is one replay. Zero fields take the defaults noted.
type Config struct {
	// Seed seeds the capacity waits: the i-th resize request of a run
	// waits the i-th draw, in every strategy.
	Seed uint64
	// From and Length select the window of the trace replayed: the tasks
	// created in [From, From+Length) (since the trace's start). Length
	// default: to the end of the trace.
	From, Length time.Duration
	// MaxNodes is the pool's max_node_count (its min_node_count is 0).
	// Default 64 (512 GPUs).
	MaxNodes int
	// MaxRunDuration is the pool's flex_start_max_duration. Default 7 days,
	// Compute's maximum (https://cloud.google.com/compute/docs/instances/flex-start-vms).
	MaxRunDuration time.Duration
	// Tick is the reconcile period (Cloud Scheduler); a Slurm snapshot is
	// published just before each tick. Default 5 min.
	Tick time.Duration
	// BootTime is how long after its VM runs a node registers in Slurm.
	// Default 5 min.
	BootTime time.Duration
	// Wait is the capacity wait distribution. Default
	// expirybench.DefaultWait (log-normal, median 20 min, σ 1).
	Wait expirybench.WaitDist
	// Drain bounds how long the replay runs past the window's end for the
	// jobs still queued or running to end and idle VMs to be released.
	// Default MaxRunDuration + 1 day.
	Drain time.Duration
}

// Defaults of Config.
const (
	DefaultMaxNodes       = 64
	DefaultMaxRunDuration = 7 * 24 * time.Hour
	DefaultTick           = 5 * time.Minute
	DefaultBootTime       = 5 * time.Minute
	// GPUsPerNode is the pool's accelerator_count (a3-ultragpu-8g).
	GPUsPerNode = 8
)

func (c Config) withDefaults() Config {
	if c.MaxNodes <= 0 {
		c.MaxNodes = DefaultMaxNodes
	}
	if c.MaxRunDuration <= 0 {
		c.MaxRunDuration = DefaultMaxRunDuration
	}
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.BootTime <= 0 {
		c.BootTime = DefaultBootTime
	}
	if c.Wait == (expirybench.WaitDist{}) {
		c.Wait = expirybench.DefaultWait
	}
	if c.Drain <= 0 {
		c.Drain = c.MaxRunDuration + 24*time.Hour
	}
	return c
}

// Validate reports a configuration the replay cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.From < 0 || c.Length < 0:
		return fmt.Errorf("window from %s, length %s: negative", c.From, c.Length)
	case c.MaxNodes > 1000:
		return fmt.Errorf("max nodes %d: at most 1000", c.MaxNodes)
	case c.MaxRunDuration < 600*time.Second || c.MaxRunDuration > 7*24*time.Hour || c.MaxRunDuration%time.Second != 0:
		return fmt.Errorf("max run duration %s: whole seconds within Compute's 600s–168h", c.MaxRunDuration)
	case c.Tick < time.Minute || c.Tick > 10*time.Minute:
		return fmt.Errorf("tick %s: 1m to 10m (flexslurm ignores Slurm snapshots older than 10 min)", c.Tick)
	case c.BootTime > time.Hour:
		return fmt.Errorf("boot time %s: at most 1h", c.BootTime)
	}
	w := c.Wait
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

// Strategy is one way of running the pool.
type Strategy struct {
	// Name labels the strategy's column.
	Name string
	// Policy is flexslurm's decision policy.
	Policy plan.Policy
	// SuspendTime, when set, models slurm.conf without flexslurm's
	// SuspendExcNodes: Slurm powers a node down after this long idle and
	// SuspendProgram releases its VM. Zero: flexslurm's slurm.conf, where
	// flexslurm releases idle nodes (plan.Policy.IdleTimeout).
	SuspendTime time.Duration
	// IgnoreReservations makes Slurm start jobs regardless of flexslurm's
	// end-of-life reservations: a system that does not reserve a node's
	// end, so a job may outlive its VM.
	IgnoreReservations bool
	// UseJobDuration sets the pool's "use_job_duration" extension
	// (docs/extensions.md): each job's resize request asks for the job's
	// time limit plus the boot allowance (plan.Policy.BootAllowance)
	// instead of the pool's max run duration.
	UseJobDuration bool
	// Pending, when set, says why the strategy cannot run yet: its column
	// reads "not run" with this reason.
	Pending string
}

// The strategies Compare runs by default.
var (
	// Default is flexslurm's default policy with its own slurm.conf.
	Default = Strategy{Name: "flexslurm default"}
	// CapacityAsLongAsJob is flexslurm's default policy on a pool with
	// "use_job_duration": each job's capacity is requested for the job's
	// time limit plus the boot allowance rather than the pool's maximum.
	CapacityAsLongAsJob = Strategy{Name: "flexslurm, capacity as long as the job", UseJobDuration: true}
	// ToolkitBaseline is a pool run as Cluster Toolkit's slurm-gcp defaults
	// run it: SuspendTime 300 s (the controller module's
	// cloud_parameters.suspend_time,
	// https://github.com/GoogleCloudPlatform/cluster-toolkit/tree/main/community/modules/scheduler/schedmd-slurm-gcp-v6-controller),
	// every VM for the pool's maximum run duration, no replacement ahead
	// of expiry and no end-of-life reservation.
	ToolkitBaseline = Strategy{Name: "Cluster Toolkit defaults", Policy: plan.Policy{RecreateAfterTermination: true},
		SuspendTime: 300 * time.Second, IgnoreReservations: true}
)

// Strategies returns the default strategies, flexslurm's default first.
func Strategies() []Strategy { return []Strategy{Default, CapacityAsLongAsJob, ToolkitBaseline} }
