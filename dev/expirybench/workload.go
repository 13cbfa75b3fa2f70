package expirybench

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Streams of the seeded generators: each draws from its own PCG stream, so
// the job workload does not depend on how many capacity waits a strategy
// draws.
const (
	streamWaits = 1
	streamJobs  = 2
)

// jobSpec is one submitted job of the workload: single-node, with a time
// limit (what Slurm schedules by) and a runtime (when it really ends), at
// most the limit.
type jobSpec struct {
	ID      string
	Submit  time.Duration // after the start of the run
	Limit   time.Duration
	Runtime time.Duration
}

// meanLimit is the mean of a log-uniform distribution on [a, b].
func meanLimit(a, b time.Duration) time.Duration {
	if a >= b {
		return a
	}
	return time.Duration(float64(b-a) / math.Log(float64(b)/float64(a)))
}

// Runtimes are a uniform fraction of the time limit in [runtimeLo, 1].
const runtimeLo = 0.5

// workload returns the jobs submitted over [0, horizon): Poisson arrivals at
// the rate that offers cfg.Load × cfg.Nodes busy nodes, time limits
// log-uniform in [MinLimit, MaxLimit] rounded to the minute, runtimes a
// uniform fraction in [0.5, 1] of the limit. cfg has its defaults.
func workload(cfg Config, horizon time.Duration) []jobSpec {
	r := rand.New(rand.NewPCG(cfg.Seed, streamJobs))
	meanRun := float64(meanLimit(cfg.MinLimit, cfg.MaxLimit)) * (1 + runtimeLo) / 2
	gap := meanRun / (cfg.Load * float64(cfg.Nodes)) // mean inter-arrival time
	var jobs []jobSpec
	at := 0.0
	for i := 1; ; i++ {
		at += r.ExpFloat64() * gap
		if at >= float64(horizon) {
			return jobs
		}
		limit := cfg.MinLimit
		if cfg.MaxLimit > cfg.MinLimit {
			limit = time.Duration(float64(cfg.MinLimit) * math.Pow(float64(cfg.MaxLimit)/float64(cfg.MinLimit), r.Float64()))
		}
		limit = max(limit.Round(time.Minute), time.Minute)
		run := time.Duration(float64(limit) * (runtimeLo + (1-runtimeLo)*r.Float64())).Round(time.Second)
		jobs = append(jobs, jobSpec{ID: strconv.Itoa(i), Submit: time.Duration(at).Round(time.Second), Limit: limit, Runtime: run})
	}
}
