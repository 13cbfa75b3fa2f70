// Package chaos generates random flexslurm workloads from a seed, runs them
// as scenarios (dev/scenario) with every message at risk of being
// duplicated, delayed, reordered and crashed at a side-effect boundary, and
// checks the convergence invariants after every event and at the end.
//
// A seed's scenario is a plain scenario file: Generate returns it, Marshal
// prints it, `flexslurm scenario run` replays it. A failing seed is shrunk
// (Shrink: delta debugging over its steps, then over its faults and
// options) to a minimal scenario that still fails the same way.
//
// The workload of a seed, over Options.Horizon of simulated time:
//   - jobs submitted to the Slurm model (slurm.simulate) on two flex-start
//     pools, some cancelled while pending or running;
//   - VMs reaching their max run duration early (expire), VMs deleted out
//     of band, GPU health failures on nodes that run (some on two nodes of
//     a pool at once, beyond its repair budget), inconclusive health
//     verdicts repeated on one node, host repairs that take a while or
//     that Compute refuses or fails for a while;
//   - capacity delays changing, Compute stock-outs and quota shortages
//     (requests queue and report them in status.lastAttempt.error), and
//     transient 500s, for a while;
//   - every message duplicated, delayed or crashed at random
//     (scenario.RandomFaults), scheduler ticks and Slurm snapshots every
//     reconcile period, Slurm suspending idle dynamic nodes after
//     SuspendTime;
//   - two foreign VMs named like the cluster's (one unlabelled, one
//     labelled for another cluster) that must survive untouched;
//   - a pool shrunk (max_node_count lowered) while its nodes power up,
//     and grown back; a job whose time limit exceeds the pools' max run
//     duration; Compute listings that succeed but omit a VM or a field.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/scenario"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Options shapes the generated workloads.
type Options struct {
	// Horizon is the simulated time over which events are generated;
	// default 30h.
	Horizon time.Duration
	// Tail is how long the run goes on after the horizon, with no new
	// events, so that everything settles; default 6h.
	Tail time.Duration
	// Policy sets flexslurm's decision knobs in every generated scenario
	// (scenario.Policy: snake_case plan.Policy field names).
	Policy scenario.Policy
	// Classes adds the workload of these convergence classes (classes.go)
	// to every seed's.
	Classes []Class
	// ComputeReadings is written into every generated scenario's
	// simulator.compute_readings (computesim.ParseReadings form); "" or
	// "lenient" writes nothing. A seed's scenario replays with them.
	ComputeReadings string
}

func (o Options) withDefaults() Options {
	if o.Horizon <= 0 {
		o.Horizon = 30 * time.Hour
	}
	if o.Tail <= 0 {
		o.Tail = 6 * time.Hour
	}
	return o
}

// Timing of the generated scenarios.
const (
	reconcileEvery = 5 * time.Minute
	maxDelay       = 10 * time.Minute
	suspendTime    = 10 * time.Minute
)

// pool describes a generated pool.
type pool struct {
	id, zone, machine, accel string
	min, max                 int
}

var pools = []pool{
	{id: "a3u", zone: "us-central1-a", machine: "a3-ultragpu-8g", accel: "NVIDIA_H200_141GB", min: 1, max: 4},
	{id: "a3h", zone: "us-central1-b", machine: "a3-highgpu-8g", accel: "NVIDIA_H100_80GB", min: 0, max: 2},
}

// clusterSpec is the generated cluster_config.json.
func clusterSpec(runDuration string) json.RawMessage {
	return clusterSpecOf(runDuration, pools)
}

// clusterSpecOf is the cluster_config.json with the given pools.
func clusterSpecOf(runDuration string, pools []pool) json.RawMessage {
	type m = map[string]any
	var nps []any
	nps = append(nps, m{"id": "login", "machine_spec": m{"machine_type": "n2-standard-8"},
		"scaling_spec": m{"min_node_count": 1, "max_node_count": 1}, "enable_public_ips": "true", "zone": "us-central1-a",
		"boot_disk": m{"boot_disk_type": "pd-standard", "boot_disk_size_gb": 120}})
	var parts []any
	for _, p := range pools {
		nps = append(nps, m{"id": p.id,
			"machine_spec":            m{"machine_type": p.machine, "accelerator_type": p.accel, "accelerator_count": 8},
			"provisioning_model":      "FLEX_START",
			"flex_start_max_duration": runDuration,
			"scaling_spec":            m{"min_node_count": p.min, "max_node_count": p.max},
			"zone":                    p.zone, "enable_public_ips": "true",
			"boot_disk": m{"boot_disk_type": "hyperdisk-balanced", "boot_disk_size_gb": 400}})
		parts = append(parts, m{"id": p.id, "node_pool_ids": []string{p.id}})
	}
	spec := m{
		"display_name": "flexvm",
		"name":         "projects/flexslurm-chaos/locations/us-central1/modelDevelopmentClusters/",
		"network": m{"network": "projects/flexslurm-chaos/global/networks/default",
			"subnetwork": "projects/flexslurm-chaos/regions/us-central1/subnetworks/default"},
		"node_pools": nps,
		"orchestrator_spec": m{"slurm_spec": m{
			"home_directory_storage": "projects/flexslurm-chaos/locations/us-central1-a/instances/home",
			"partitions":             parts, "login_node_pool_id": "login"}},
	}
	data, _ := json.Marshal(spec)
	return data
}

func dur(d time.Duration) scenario.Duration { return scenario.Duration(d) }

func at(d time.Duration) *scenario.At { return &scenario.At{Offset: d.Round(time.Second)} }

// Generate returns the scenario of a seed.
func Generate(seed uint64, o Options) *scenario.File {
	o = o.withDefaults()
	rng := rand.New(rand.NewPCG(seed, 0x5eed_c4a0_5c0a_11e5))
	// between draws uniformly from [lo, hi]; a short horizon can make hi
	// fall below lo, which gives lo.
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	runDuration := []string{"43200s", "86400s", "604800s"}[rng.IntN(3)]
	f := &scenario.File{
		Name:        fmt.Sprintf("chaos seed %d", seed),
		Description: fmt.Sprintf("Generated by `flexslurm chaos --seed %d`.", seed),
		Cluster:     scenario.ClusterRef{Inline: clusterSpec(runDuration)},
		Simulator: scenario.Simulator{
			Seed:           seed,
			CapacityDelay:  dur(between(0, 40*time.Minute).Round(time.Minute)),
			DeleteDelay:    dur([]time.Duration{0, time.Minute, 3 * time.Minute}[rng.IntN(3)]),
			ExpiryLogStyle: []string{"deferredDelete", "migDelete"}[rng.IntN(2)],
		},
		Policy:    o.Policy,
		Delivery:  scenario.Delivery{MaxAttempts: 20},
		Reconcile: scenario.Reconcile{Every: dur(reconcileEvery)},
		Slurm: scenario.Slurm{Simulate: true, SuspendTime: dur(suspendTime), BootTime: dur(between(30*time.Second, 3*time.Minute).Round(time.Second)),
			SnapshotEvery: dur(reconcileEvery)},
		RandomFaults: &scenario.RandomFaults{Seed: seed, Duplicate: 0.3, DuplicateWithin: dur(15 * time.Minute),
			Delay: 0.3, MaxDelay: dur(maxDelay), Crash: 0.2, CrashAttempts: 2, Until: dur(o.Horizon)},
		Initial: scenario.Initial{Apply: true, ForeignVMs: []scenario.ForeignVM{
			{Name: "flexvm-a3u-9-g1"},
			{Name: "flexvm-a3u-8-g1", Labels: map[string]string{"managed-by": "flexslurm", "flexslurm-cluster": "other", "flexslurm-pool": "a3u"}},
		}},
	}
	if rng.IntN(3) == 0 {
		f.Slurm.ResumeTimeout = dur(65535 * time.Second) // what flex partitions set
	}
	if r, err := computesim.ParseReadings(o.ComputeReadings); err == nil && r != computesim.LenientReadings() {
		f.Simulator.ComputeReadings = r.String()
	}

	var steps []scenario.Step
	add := func(t time.Duration, s scenario.Step) {
		s.At = at(t)
		steps = append(steps, s)
	}
	nodeName := func() string {
		p := pools[rng.IntN(len(pools))]
		return fmt.Sprintf("flexvm-%s-%d", p.id, rng.IntN(p.max))
	}
	// Jobs.
	jobs := 5 + rng.IntN(8)
	for i := 0; i < jobs; i++ {
		p := pools[0]
		if rng.IntN(10) < 3 {
			p = pools[1]
		}
		id := fmt.Sprint(100 + i)
		t := between(10*time.Minute, o.Horizon-2*time.Hour)
		add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: id, Nodes: 1 + rng.IntN(p.max-p.min), Partition: p.id,
			Runtime: dur(between(15*time.Minute, 4*time.Hour).Round(time.Minute))}})
		if rng.IntN(10) < 3 {
			add(t+between(time.Minute, 90*time.Minute), scenario.Step{Cancel: &scenario.CancelStep{ID: id}})
		}
	}
	// Expiries, out-of-band deletions, health failures.
	for i, n := 0, rng.IntN(4); i < n; i++ {
		add(between(time.Hour, o.Horizon), scenario.Step{Expire: &scenario.VMRef{Node: nodeName(), Optional: true}})
	}
	if rng.IntN(3) == 0 {
		add(between(time.Hour, o.Horizon), scenario.Step{DeleteVM: &scenario.VMRef{Node: nodeName(), Optional: true}})
	}
	for i, n := 0, rng.IntN(3); i < n; i++ {
		add(between(time.Hour, o.Horizon), scenario.Step{Health: &scenario.HealthStep{Node: nodeName(), Reasons: []string{"GPU 2: Xid 79, fallen off the bus"}}})
	}
	// Capacity and Compute faults.
	for i, n := 0, 1+rng.IntN(2); i < n; i++ {
		p := pools[rng.IntN(len(pools))]
		add(between(30*time.Minute, o.Horizon), scenario.Step{Capacity: &scenario.CapacityDelay{Zone: p.zone, MachineType: p.machine,
			Delay: dur(between(0, time.Hour).Round(time.Minute))}})
	}
	afterFault := time.Duration(0)
	if rng.IntN(10) < 3 {
		// A stock-out does not fail the insert: requests queue and report
		// it in status.lastAttempt.error (docs/design/convergence.md, "Capacity").
		add(between(time.Hour, o.Horizon-3*time.Hour), scenario.Step{Shortage: &scenario.ShortageStep{Name: "stockout",
			Code: "ZONE_RESOURCE_POOL_EXHAUSTED", For: dur(between(30*time.Minute, 3*time.Hour).Round(time.Minute))}})
		afterFault = max(afterFault, plan.DefaultPolicy().BackoffCap)
	}
	if rng.IntN(10) < 2 {
		// Nor does a quota shortage: the request stays pending until there
		// is enough quota.
		add(between(time.Hour, o.Horizon-3*time.Hour), scenario.Step{Shortage: &scenario.ShortageStep{Name: "quota",
			Code: "QUOTA_EXCEEDED", Limit: 8, For: dur(between(time.Hour, 2*time.Hour).Round(time.Minute))}})
		afterFault = max(afterFault, plan.DefaultPolicy().QuotaBackoffCap)
	}
	if rng.IntN(10) < 3 {
		add(between(time.Hour, o.Horizon), scenario.Step{ComputeError: &scenario.ComputeErrorStep{Name: "backend", Method: "POST",
			Status: 500, Reason: "backendError", For: dur(between(5*time.Minute, 30*time.Minute).Round(time.Minute))}})
		afterFault = max(afterFault, 10*time.Minute)
	}
	// Health repair: how long host repairs take, more failures (some on two
	// nodes of a pool at once, beyond its repair budget), inconclusive
	// verdicts repeated on one node (drained for diagnosis), and Compute
	// refusing or failing host repairs for a while. Drawn after everything
	// above, so that the rest of a seed's workload does not change.
	f.Simulator.RepairDelay = dur([]time.Duration{0, 2 * time.Minute, 6 * time.Minute}[rng.IntN(3)])
	for i, n := 0, rng.IntN(3); i < n; i++ {
		p := pools[rng.IntN(len(pools))]
		t := between(time.Hour, o.Horizon)
		a := rng.IntN(p.max)
		add(t, scenario.Step{Health: &scenario.HealthStep{Node: fmt.Sprintf("flexvm-%s-%d", p.id, a), Reasons: []string{"GPU 5: Xid 48, double-bit ECC error"}}})
		if rng.IntN(2) == 0 {
			b := (a + 1 + rng.IntN(p.max-1)) % p.max
			add(t+between(0, 10*time.Minute), scenario.Step{Health: &scenario.HealthStep{Node: fmt.Sprintf("flexvm-%s-%d", p.id, b), Reasons: []string{"GPU 1: NVLink down"}}})
		}
	}
	if rng.IntN(3) == 0 {
		node, t := nodeName(), between(time.Hour, o.Horizon-4*time.Hour)
		for i, n := 0, 2+rng.IntN(2); i < n; i++ {
			add(t+time.Duration(i)*between(10*time.Minute, 90*time.Minute), scenario.Step{Health: &scenario.HealthStep{Node: node, Verdict: "INCONCLUSIVE",
				Reasons: []string{"check command /usr/bin/dcgmi did not finish within 2m0s"}}})
		}
	}
	if rng.IntN(5) == 0 {
		ce := scenario.ComputeErrorStep{Name: "repair-refused", Method: "POST", Path: "/reportHostAsFaulty$", Status: 400, Code: "UNSUPPORTED_OPERATION",
			For: dur(between(time.Hour, 6*time.Hour).Round(time.Minute))}
		if rng.IntN(2) == 0 {
			ce = scenario.ComputeErrorStep{Name: "repair-unavailable", Method: "POST", Path: "/reportHostAsFaulty$", Status: 503, Reason: "backendError",
				For: dur(between(5*time.Minute, 30*time.Minute).Round(time.Minute))}
		}
		add(between(time.Hour, o.Horizon-2*time.Hour), scenario.Step{ComputeError: &ce})
	}

	// Convergence when the spec or the job cannot be served. Drawn after
	// everything above, so that the rest of a seed's workload does not
	// change.
	//   - A pool shrunk while its nodes power up (max_node_count lowered),
	//     and grown back later.
	if rng.IntN(4) == 0 {
		i := rng.IntN(len(pools))
		shrunk := append([]pool(nil), pools...)
		shrunk[i].max = max(shrunk[i].min, 1, shrunk[i].max-1-rng.IntN(2))
		t := between(time.Hour, o.Horizon-4*time.Hour)
		add(t, scenario.Step{Apply: &scenario.ApplyStep{Cluster: &scenario.ClusterRef{Inline: clusterSpecOf(runDuration, shrunk)}}})
		add(t+between(time.Hour, 3*time.Hour), scenario.Step{Apply: &scenario.ApplyStep{Cluster: &scenario.ClusterRef{Inline: clusterSpecOf(runDuration, pools)}}})
	}
	//   - A job whose time limit exceeds the pools' max run duration: never
	//     provisioned, told in Slurm, cancelled by its user later.
	if rng.IntN(4) == 0 {
		limit, _ := time.ParseDuration(runDuration)
		t := between(10*time.Minute, o.Horizon-4*time.Hour)
		add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: "900", Nodes: 1, Partition: pools[0].id, Runtime: dur(time.Hour), TimeLimit: dur(limit + time.Hour)}})
		add(t+between(20*time.Minute, 3*time.Hour), scenario.Step{Cancel: &scenario.CancelStep{ID: "900"}})
	}
	//   - Compute listings that succeed but omit a VM (one listing) or a
	//     VM's status or creation time (for a few minutes).
	if rng.IntN(4) == 0 {
		vm := fmt.Sprintf("^flexvm-%s-", pools[rng.IntN(len(pools))].id)
		lo := scenario.ListOmitStep{Name: "omit-vm", VM: vm, Times: 1}
		if rng.IntN(2) == 0 {
			lo = scenario.ListOmitStep{Name: "omit-field", VM: vm, Field: []string{"status", "creationTimestamp"}[rng.IntN(2)],
				For: dur(between(time.Minute, 10*time.Minute).Round(time.Minute))}
		}
		add(between(time.Hour, o.Horizon), scenario.Step{ListOmit: &lo})
	}

	steps = append(steps, classSteps(f, seed, o)...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].At.Offset < steps[j].At.Offset })
	f.Steps = steps

	// Invariants. Bounds: a reconcile period to notice (MissThreshold
	// passes for a VM that vanished silently), the longest message delay,
	// redelivery backoffs, and Slurm's boot, delete and suspend times.
	slack := 2*reconcileEvery + maxDelay + 5*time.Minute
	f.Invariants = scenario.Invariants{
		OneVMPerNode:        true,
		OneRequestPerNode:   true,
		NoUnrecordedVM:      &scenario.Within{Within: dur(5*time.Minute + slack), AfterFault: dur(afterFault)},
		StaticAtMin:         &scenario.Within{Within: dur(slack + reconcileEvery), AfterFault: dur(afterFault)},
		IdleDynamicReleased: &scenario.Within{Within: dur(slack + f.Slurm.BootTime.D() + f.Simulator.DeleteDelay.D()), AfterFault: dur(afterFault)},
		// A repair state waits at most the repair timeout (a host repair
		// that does not finish is replaced), a pass to notice and the
		// usual slack.
		RepairProgress:               &scenario.Within{Within: dur(plan.DefaultPolicy().RepairTimeout + slack + reconcileEvery), AfterFault: dur(afterFault)},
		ForeignUntouched:             true,
		ForeignReservationsUntouched: &scenario.Prefix{Prefix: "flexslurm-"},
		// A VM beyond a shrunk pool's maximum with no job running on it:
		// released in the apply's own pass, or by the next reconcile pass.
		WithinMax: &scenario.Within{Within: dur(slack + f.Simulator.DeleteDelay.D()), AfterFault: dur(afterFault)},
		// Capacity that came while its request was being cancelled
		// serves a pending job that can use it.
		ArrivedCapacityKept: true,
	}
	classInvariants(f, o)
	// At the end of the tail (off the tick schedule, so that no crashed
	// tick is waiting for its redelivery), nothing is left in flight.
	end := dur(o.Horizon + o.Tail + 2*time.Minute + 30*time.Second)
	f.End = &end
	f.Final = []scenario.Check{{Name: "at quiescence", Invariant: scenario.StringList{"quiet", "no_dead_letters",
		"one_vm_per_node", "one_request_per_node", "repair_progress", "foreign_untouched", "foreign_reservations_untouched", "no_mig_left"}}}
	return f
}

// Outcome is the result of one seed.
type Outcome struct {
	Seed   uint64
	File   *scenario.File
	Report scenario.Report
	// Err is a run that could not proceed (a bug in the generator or the
	// runner, or a livelock).
	Err error
	// Minimal is the shrunk scenario of a failing seed (RunOptions.Shrink),
	// MinimalReport its run.
	Minimal       *scenario.File
	MinimalReport scenario.Report
	// ShrinkRuns counts the runs shrinking took.
	ShrinkRuns int
}

// Failed reports whether the seed failed.
func (o Outcome) Failed() bool { return o.Err != nil || o.Report.Failed() }

// Signature names what failed: the first failed check, without its time.
func (o Outcome) Signature() string {
	if o.Err != nil {
		return "error: " + firstLine(o.Err.Error())
	}
	if f := o.Report.Failures(); len(f) > 0 {
		return f[0].Name
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// RunOptions tunes RunSeed and Run.
type RunOptions struct {
	Options
	// Shrink shrinks failing seeds' scenarios. Run shrinks the first seed of
	// each failure signature only, unless ShrinkAll is set.
	Shrink, ShrinkAll bool
	// MaxShrinkRuns bounds the runs spent shrinking one seed; default 300.
	MaxShrinkRuns int
	// Parallel is how many seeds Run runs at once; default GOMAXPROCS.
	Parallel int
}

// RunSeed generates and runs one seed, stopping at the first violated
// invariant, and shrinks it if it fails and o.Shrink is set.
func RunSeed(ctx context.Context, seed uint64, o RunOptions) Outcome {
	f := Generate(seed, o.Options)
	out := Outcome{Seed: seed, File: f}
	out.Report, out.Err = scenario.RunFile(ctx, f, scenario.RunOptions{StopOnFailure: true})
	if !out.Failed() || !o.Shrink || ctx.Err() != nil {
		return out
	}
	return shrinkOutcome(ctx, out, o)
}

// shrinkOutcome shrinks a failing seed's scenario.
func shrinkOutcome(ctx context.Context, out Outcome, o RunOptions) Outcome {
	f := out.File
	sig := out.Signature()
	limit := o.MaxShrinkRuns
	if limit <= 0 {
		limit = 300
	}
	fails := func(g *scenario.File) bool {
		if out.ShrinkRuns >= limit || ctx.Err() != nil {
			return false
		}
		out.ShrinkRuns++
		rep, err := scenario.RunFile(ctx, g, scenario.RunOptions{StopOnFailure: true})
		return (Outcome{Report: rep, Err: err}).Signature() == sig
	}
	out.Minimal = Shrink(f, failAt(out), fails)
	out.MinimalReport, _ = scenario.RunFile(ctx, out.Minimal, scenario.RunOptions{StopOnFailure: true, Trace: true})
	return out
}

// failAt is when the seed failed (the first failed check), or the end.
func failAt(o Outcome) time.Duration {
	if f := o.Report.Failures(); len(f) > 0 {
		return f[0].At
	}
	return o.Report.Simulated
}

// Shrink returns a smaller scenario that still fails, per fails: steps
// after the failure are dropped and the run ends shortly after it; then
// steps are removed by delta debugging (ddmin); then faults and options
// are turned off one at a time. f is not modified.
func Shrink(f *scenario.File, failedAt time.Duration, fails func(*scenario.File) bool) *scenario.File {
	cur := clone(f)
	// 1. Nothing after the failure matters.
	end := scenario.Duration(failedAt + time.Minute)
	var kept []scenario.Step
	for _, s := range cur.Steps {
		if s.At == nil || s.At.Offset <= failedAt {
			kept = append(kept, s)
		}
	}
	if g := withSteps(cur, kept); true {
		g.End = &end
		if fails(g) {
			cur = g
		}
	}
	// 2. ddmin over the steps.
	steps := cur.Steps
	n := 2
	for len(steps) >= 2 {
		chunk := (len(steps) + n - 1) / n
		reduced := false
		for i := 0; i < len(steps); i += chunk {
			rest := append(append([]scenario.Step(nil), steps[:i]...), steps[min(i+chunk, len(steps)):]...)
			if g := withSteps(cur, rest); fails(g) {
				steps, cur, reduced = rest, g, true
				n = max(n-1, 2)
				break
			}
		}
		if !reduced {
			if n >= len(steps) {
				break
			}
			n = min(n*2, len(steps))
		}
	}
	if len(steps) == 1 {
		if g := withSteps(cur, nil); fails(g) {
			cur = g
		}
	}
	// 3. Simpler options, one at a time.
	for _, simplify := range []func(*scenario.File){
		func(g *scenario.File) { g.RandomFaults = nil },
		func(g *scenario.File) { g.RandomFaults.Crash = 0 },
		func(g *scenario.File) { g.RandomFaults.Duplicate = 0 },
		func(g *scenario.File) { g.RandomFaults.Delay = 0 },
		func(g *scenario.File) { g.Initial.ForeignVMs = nil },
		func(g *scenario.File) { g.Slurm.ResumeTimeout = 0 },
		func(g *scenario.File) { g.Simulator.DeleteDelay = 0 },
	} {
		g := clone(cur)
		if simplifyOK(g, simplify) && fails(g) {
			cur = g
		}
	}
	return cur
}

// simplifyOK applies a simplification unless it does not apply (a nil
// RandomFaults).
func simplifyOK(g *scenario.File, f func(*scenario.File)) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	f(g)
	return true
}

func withSteps(f *scenario.File, steps []scenario.Step) *scenario.File {
	g := clone(f)
	g.Steps = append([]scenario.Step(nil), steps...)
	return g
}

// clone deep-copies the parts Shrink edits.
func clone(f *scenario.File) *scenario.File {
	g := *f
	g.Steps = append([]scenario.Step(nil), f.Steps...)
	if f.RandomFaults != nil {
		rf := *f.RandomFaults
		g.RandomFaults = &rf
	}
	g.Initial.ForeignVMs = append([]scenario.ForeignVM(nil), f.Initial.ForeignVMs...)
	if f.End != nil {
		e := *f.End
		g.End = &e
	}
	return &g
}

// GCPercent is the garbage collector setting (debug.SetGCPercent) for a
// process that runs many seeds, as `flexslurm chaos` does: a seed's live
// heap is a few MiB of short-lived requests and copies of the state, so
// collecting less often saves CPU (docs/chaos.md) for little memory.
const GCPercent = 400

// Summary aggregates seeds.
type Summary struct {
	// Seeds counts the seeds run; Failed are the failing ones.
	Seeds  int
	Failed []Outcome
	// Wall is the wall time of the run.
	Wall time.Duration
	// Events, Crashes and Messages add up the seeds' runner events,
	// injected crashes and delivery attempts.
	Events, Crashes, Messages int
}

// Signatures counts the failing seeds per failure signature.
func (s Summary) Signatures() map[string][]uint64 {
	out := map[string][]uint64{}
	for _, o := range s.Failed {
		out[o.Signature()] = append(out[o.Signature()], o.Seed)
	}
	return out
}

// SeedsPerSecond is the throughput.
func (s Summary) SeedsPerSecond() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Seeds) / s.Wall.Seconds()
}

// Run runs seeds first, first+1, …, first+n-1 and collects the failures;
// with o.Shrink it shrinks the first failing seed of each signature (every
// failing seed with o.ShrinkAll). progress, if set, is called after each
// seed, in seed order.
//
// Seeds run on o.Parallel goroutines (default GOMAXPROCS): each seed's run
// is independent of the others (its own simulator, store, clock and random
// sources), so its outcome is the same as when run alone. Outcomes are
// collected, shrunk and reported in seed order, so the summary, the choice
// of which seed of a signature is shrunk and the output do not depend on
// the parallelism.
func Run(ctx context.Context, first uint64, n int, o RunOptions, progress func(Outcome)) (Summary, error) {
	start := time.Now()
	var s Summary
	shrunk := map[string]bool{}
	workers := o.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, n))
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before wg.Wait: stops the workers on an early return
	// results[i] receives seed first+i's outcome; next hands out indices.
	results := make([]chan Outcome, n)
	for i := range results {
		results[i] = make(chan Outcome, 1)
	}
	var next atomic.Int64
	// A worker runs at most window seeds ahead of the collector, so that
	// a slow seed (or a long shrink) does not pile up finished outcomes.
	window := make(chan struct{}, 4*workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case window <- struct{}{}:
				case <-ctx.Done():
					return
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					<-window
					return
				}
				results[i] <- RunSeed(ctx, first+uint64(i), RunOptions{Options: o.Options})
			}
		}()
	}
	for i := 0; i < n; i++ {
		var out Outcome
		select {
		case out = <-results[i]:
			<-window
		case <-ctx.Done():
			return s, fmt.Errorf("chaos run interrupted after %d seeds: %w", s.Seeds, ctx.Err())
		}
		if err := ctx.Err(); err != nil {
			return s, fmt.Errorf("chaos run interrupted after %d seeds: %w", s.Seeds, err)
		}
		if out.Failed() && o.Shrink && (o.ShrinkAll || !shrunk[out.Signature()]) && ctx.Err() == nil {
			shrunk[out.Signature()] = true
			out = shrinkOutcome(ctx, out, o)
		}
		if errors.Is(out.Err, context.Canceled) || errors.Is(out.Err, context.DeadlineExceeded) {
			return s, fmt.Errorf("chaos run interrupted at seed %d: %w", out.Seed, out.Err)
		}
		s.Seeds++
		s.Events += out.Report.Stats.Events
		s.Crashes += out.Report.Stats.Crashes
		s.Messages += out.Report.Stats.Deliveries
		if out.Failed() {
			s.Failed = append(s.Failed, out)
		}
		if progress != nil {
			progress(out)
		}
	}
	s.Wall = time.Since(start)
	return s, nil
}
