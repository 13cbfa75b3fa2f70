package chaos

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Class names a convergence class: a situation where Slurm's and Compute's
// views disagree, which a generator adds to a seed's workload on request
// (Options.Classes, `flexslurm chaos --class`).
type Class string

// Convergence classes.
const (
	// ClassStaleSnapshot: for a while every Slurm snapshot is delivered
	// minutes after it was taken (still within the reconciler's
	// snapshot_max_age), while jobs are submitted, VMs come up for them and
	// some are cancelled while their capacity is queued: snapshots older
	// than flexslurm's own changes (slurm-gcp issues #54/#70).
	ClassStaleSnapshot Class = "stale-snapshot"
	// ClassGoingVM: Compute takes 15–40 minutes to delete a VM, and VMs of
	// the static node and of busy nodes expire early or are deleted out of
	// band: nodes re-created while their old VM is still going away
	// (cluster-toolkit PR #6301).
	ClassGoingVM Class = "going-vm"
	// ClassResumeTimeout: Slurm's ResumeTimeout is 15–40 minutes, and
	// capacity, for a while, takes longer: nodes that miss ResumeTimeout,
	// their jobs requeued and placed again (cyclecloud-slurm #51).
	ClassResumeTimeout Class = "resume-timeout"
	// ClassRequeuedElsewhere: a two-node job's node fails its health check
	// while other two-node jobs queue for the pool's nodes: the requeued
	// job waits, then may run elsewhere, while its replaced node is idle
	// (chaos seed 831).
	ClassRequeuedElsewhere Class = "requeued-elsewhere"
	// ClassLateDecision: for a while, reconcile passes decide 3–30
	// minutes after they listed Compute (a loaded instance), while what
	// is due meanwhile happens — jobs submitted and cancelled, a static
	// node's VM expiring, the a3u MIG deleted out of band and recreated:
	// Compute lists older than the decision and than the records it
	// changes (the local demo's two VMs for one node: a MIG listed before
	// it was created, taken for deleted by a decision made after).
	ClassLateDecision Class = "late-decision"
	// ClassStartAtIdleTimeout: for a while, short one-node jobs are
	// submitted every 8–13 minutes, so that Slurm gives a node that has
	// been idle for about the idle timeout (10 minutes) a new job, while
	// every Slurm snapshot is delivered 2–5 minutes late: the only news of
	// the start is PrologSlurmctld's job.started, newer than the snapshot
	// that shows the node idle (karpenter-provider-aws #2468,
	// aws-parallelcluster-node #10).
	ClassStartAtIdleTimeout Class = "start-at-idle-timeout"
	// ClassPrologReplaced: a two-node job's node fails its health check
	// (the prolog's) while capacity is slow, so that its replacement
	// queues for the requeued job, and Slurm places the job on other
	// free nodes meanwhile (aws-parallelcluster-node #555,
	// aws-parallelcluster #5578).
	ClassPrologReplaced Class = "prolog-replaced"
	// ClassFulfilledAsCancelled: a queue timeout of 70–100 minutes and, on
	// the a3h pool (no static node), capacity that takes about as long,
	// with jobs submitted there: requests fulfilled around the pass that
	// cancels them past the queue timeout, the cancellation (crashed,
	// redelivered, or decided late) meeting a request Compute already
	// fulfilled while its job still waits; and jobs cancelled about when
	// their capacity comes, with another job submitted at once that Slurm
	// gives the node: a job's end meeting a fulfilled request, raced by
	// the next job's job.pending (kubernetes-sigs/karpenter #2920).
	ClassFulfilledAsCancelled Class = "fulfilled-as-cancelled"
	// ClassLostHealthReport: GPU health checks fail on nodes that run
	// (the static node, or a node busy with a job), the node-side hook
	// drains each node for its VM, and its health.failure report is lost
	// for 20 minutes to 3 hours (the Repair function down, a dead-lettered
	// message), then delivered — late, or past the events' maximum age:
	// flexslurm must finish what its hook started (nomad-autoscaler #628,
	// soperator #1316).
	ClassLostHealthReport Class = "lost-health-report"
	// ClassJobIDReused: Slurm gives a job id again (a controller rebuilt
	// without its StateSaveLocation counts from the start; ids wrap at
	// MaxJobId): a job is cancelled while it waits or runs, its end report
	// is delayed up to half an hour, and a new job with the same id is
	// submitted minutes later. The new job must run: it is provisioned like
	// any other, and the late end report of the earlier one never ends it
	// (submitit #1660, cyclecloud-slurm #296).
	ClassJobIDReused Class = "job-id-reused"
)

// Classes lists every class.
var Classes = []Class{ClassStaleSnapshot, ClassGoingVM, ClassResumeTimeout, ClassRequeuedElsewhere, ClassLateDecision,
	ClassStartAtIdleTimeout, ClassPrologReplaced, ClassFulfilledAsCancelled, ClassLostHealthReport, ClassJobIDReused}

// ParseClass returns the class named s.
func ParseClass(s string) (Class, error) {
	for _, c := range Classes {
		if string(c) == s {
			return c, nil
		}
	}
	names := make([]string, len(Classes))
	for i, c := range Classes {
		names[i] = string(c)
	}
	return "", fmt.Errorf("unknown convergence class %q (known: %s)", s, strings.Join(names, ", "))
}

// classSteps adds the workload of each of o.Classes to f (its simulator and
// Slurm options) and returns the steps to add. Each class draws from a
// random stream of its own (seed, class), after the seed's base workload,
// so that the base workload of a seed is the same with or without classes.
func classSteps(f *scenario.File, seed uint64, o Options) []scenario.Step {
	var steps []scenario.Step
	for _, c := range o.Classes {
		var h uint64 = 0xc1a5_5e5
		for _, r := range string(c) {
			h = h*131 + uint64(r)
		}
		rng := rand.New(rand.NewPCG(seed, h))
		between := func(lo, hi time.Duration) time.Duration {
			if hi <= lo {
				return lo
			}
			return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		}
		add := func(t time.Duration, s scenario.Step) {
			s.At = at(t)
			steps = append(steps, s)
		}
		// Job ids of their own: 3xx for the first class, 4xx for the
		// next, … (the base workload's are 1xx).
		ci := 0
		for i, k := range Classes {
			if k == c {
				ci = i
			}
		}
		// 9xx is skipped: the base workload's job 900 (a time limit
		// beyond the pools' max run duration) is there.
		prefix := 3 + ci
		if prefix >= 9 {
			prefix++
		}
		jobID := func(i int) string { return fmt.Sprintf("%d%02d", prefix, i) }
		switch c {
		case ClassStaleSnapshot:
			for w, n := 0, 1+rng.IntN(2); w < n; w++ {
				start := between(time.Hour, o.Horizon-4*time.Hour)
				length := between(time.Hour, 3*time.Hour).Round(time.Minute)
				add(start, scenario.Step{Deliveries: &scenario.DeliveryRule{Topic: "slurm-snapshot", For: dur(length),
					DeliveryFaults: scenario.DeliveryFaults{Delay: dur(between(3*time.Minute, 9*time.Minute).Round(time.Second))}}})
				for i, k := 0, 2+rng.IntN(3); i < k; i++ {
					t := start + between(0, length)
					id := jobID(i + 10*w)
					add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: id, Nodes: 1 + rng.IntN(2), Partition: "a3u",
						Runtime: dur(between(10*time.Minute, 2*time.Hour).Round(time.Minute))}})
					if rng.IntN(2) == 0 {
						add(t+between(time.Minute, 8*time.Minute), scenario.Step{Cancel: &scenario.CancelStep{ID: id}})
					}
				}
			}
		case ClassGoingVM:
			f.Simulator.DeleteDelay = dur(between(15*time.Minute, 40*time.Minute).Round(time.Minute))
			for i, n := 0, 1+rng.IntN(3); i < n; i++ {
				t := between(time.Hour, o.Horizon-2*time.Hour)
				node := "flexvm-a3u-0"
				if rng.IntN(3) == 0 {
					node = fmt.Sprintf("flexvm-a3u-%d", 1+rng.IntN(3))
				}
				if rng.IntN(2) == 0 {
					add(t, scenario.Step{Expire: &scenario.VMRef{Node: node, Optional: true}})
				} else {
					add(t, scenario.Step{DeleteVM: &scenario.VMRef{Node: node, Optional: true}})
				}
			}
			// Busy nodes to lose.
			for i, n := 0, 1+rng.IntN(2); i < n; i++ {
				add(between(30*time.Minute, o.Horizon-3*time.Hour), scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(i), Nodes: 1 + rng.IntN(3),
					Partition: "a3u", Runtime: dur(between(time.Hour, 4*time.Hour).Round(time.Minute))}})
			}
		case ClassResumeTimeout:
			timeout := between(15*time.Minute, 40*time.Minute).Round(time.Minute)
			f.Slurm.ResumeTimeout = dur(timeout)
			for w, n := 0, 1+rng.IntN(2); w < n; w++ {
				p := pools[rng.IntN(len(pools))]
				start := between(time.Hour, o.Horizon-4*time.Hour)
				length := between(time.Hour, 3*time.Hour).Round(time.Minute)
				add(start, scenario.Step{Capacity: &scenario.CapacityDelay{Zone: p.zone, MachineType: p.machine,
					Delay: dur(timeout + between(5*time.Minute, time.Hour).Round(time.Minute))}})
				add(start+length, scenario.Step{Capacity: &scenario.CapacityDelay{Zone: p.zone, MachineType: p.machine,
					Delay: dur(between(0, timeout/2).Round(time.Minute))}})
				for i, k := 0, 1+rng.IntN(3); i < k; i++ {
					add(start+between(0, length), scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(i + 10*w), Nodes: 1 + rng.IntN(p.max-p.min),
						Partition: p.id, Runtime: dur(between(15*time.Minute, 2*time.Hour).Round(time.Minute))}})
				}
			}
		case ClassRequeuedElsewhere:
			t := between(time.Hour, o.Horizon-6*time.Hour)
			runtime := between(2*time.Hour, 4*time.Hour).Round(time.Minute)
			add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(0), Nodes: 2, Partition: "a3u", Runtime: dur(runtime)}})
			for i, k := 1, 1+rng.IntN(2); i <= k; i++ {
				add(t+between(time.Minute, 30*time.Minute), scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(i), Nodes: 2, Partition: "a3u",
					Runtime: dur(between(time.Hour, 3*time.Hour).Round(time.Minute))}})
			}
			fail := t + between(time.Hour, runtime-10*time.Minute)
			add(fail, scenario.Step{Health: &scenario.HealthStep{Node: fmt.Sprintf("flexvm-a3u-%d", 1+rng.IntN(3)),
				Reasons: []string{"GPU 2: Xid 79, fallen off the bus"}}})
		case ClassStartAtIdleTimeout:
			for w, n := 0, 1+rng.IntN(2); w < n; w++ {
				start := between(time.Hour, o.Horizon-5*time.Hour)
				length := between(time.Hour, 3*time.Hour).Round(time.Minute)
				add(start, scenario.Step{Deliveries: &scenario.DeliveryRule{Topic: "slurm-snapshot", For: dur(length),
					DeliveryFaults: scenario.DeliveryFaults{Delay: dur(between(2*time.Minute, 5*time.Minute).Round(time.Second))}}})
				t := start
				for i := 0; t < start+length && i < 20; i++ {
					add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(i + 20*w), Nodes: 1, Partition: "a3u",
						Runtime: dur(between(time.Minute, 5*time.Minute).Round(time.Second))}})
					t += between(8*time.Minute, 13*time.Minute).Round(time.Second)
				}
			}
		case ClassPrologReplaced:
			for w, n := 0, 1+rng.IntN(2); w < n; w++ {
				t := between(time.Hour, o.Horizon-6*time.Hour)
				add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(10 * w), Nodes: 2, Partition: "a3u",
					Runtime: dur(between(2*time.Hour, 4*time.Hour).Round(time.Minute))}})
				slow := t + between(30*time.Minute, 50*time.Minute)
				add(slow, scenario.Step{Capacity: &scenario.CapacityDelay{Zone: pools[0].zone, MachineType: pools[0].machine,
					Delay: dur(between(30*time.Minute, 90*time.Minute).Round(time.Minute))}})
				fail := slow + between(time.Minute, 40*time.Minute)
				add(fail, scenario.Step{Health: &scenario.HealthStep{Node: fmt.Sprintf("flexvm-a3u-%d", 1+rng.IntN(3)),
					Reasons: []string{"GPU 3: Xid 79, fallen off the bus (prolog)"}}})
				add(fail+between(time.Hour, 2*time.Hour), scenario.Step{Capacity: &scenario.CapacityDelay{Zone: pools[0].zone, MachineType: pools[0].machine,
					Delay: dur(between(0, 10*time.Minute).Round(time.Minute))}})
			}
		case ClassFulfilledAsCancelled:
			timeout := between(70*time.Minute, 100*time.Minute).Round(time.Minute)
			pol := scenario.Policy{}
			for k, v := range f.Policy {
				pol[k] = v
			}
			if _, set := pol["queue_timeout"]; !set {
				pol["queue_timeout"] = timeout.String()
				f.Policy = pol
			} else if d, err := time.ParseDuration(pol["queue_timeout"]); err == nil {
				timeout = d
			}
			p := pools[1]
			for w, n := 0, 1+rng.IntN(2); w < n; w++ {
				start := between(time.Hour, o.Horizon-6*time.Hour)
				add(start, scenario.Step{Capacity: &scenario.CapacityDelay{Zone: p.zone, MachineType: p.machine,
					Delay: dur(timeout + between(-2*time.Minute, 8*time.Minute).Round(time.Second))}})
				for i, k := 0, 1+rng.IntN(2); i < k; i++ {
					add(start+between(time.Minute, 20*time.Minute), scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(i + 10*w), Nodes: 1 + rng.IntN(p.max),
						Partition: p.id, Runtime: dur(between(30*time.Minute, 2*time.Hour).Round(time.Minute))}})
				}
				if rng.IntN(2) == 0 {
					add(start+timeout, scenario.Step{LateDecision: &scenario.LateDecisionStep{Lag: dur(between(time.Minute, 6*time.Minute).Round(time.Second)), For: dur(30 * time.Minute)}})
				}
				add(start+3*time.Hour, scenario.Step{Capacity: &scenario.CapacityDelay{Zone: p.zone, MachineType: p.machine,
					Delay: dur(between(0, 10*time.Minute).Round(time.Minute))}})
			}
			// A job's end racing its capacity: a one-node job on the pool,
			// cancelled about when its capacity comes, and another job
			// submitted at once, to which Slurm gives the node that is
			// powering up; its job.pending may come before the listing
			// that shows the VM.
			for w, n := 0, 1+rng.IntN(2); w < n; w++ {
				start := between(time.Hour, o.Horizon-6*time.Hour)
				delay := between(20*time.Minute, time.Hour).Round(time.Second)
				add(start, scenario.Step{Capacity: &scenario.CapacityDelay{Zone: p.zone, MachineType: p.machine, Delay: dur(delay)}})
				first, next := jobID(50+2*w), jobID(51+2*w)
				add(start+time.Minute, scenario.Step{Submit: &scenario.SubmitStep{ID: first, Nodes: 1, Partition: p.id,
					Runtime: dur(between(30*time.Minute, 2*time.Hour).Round(time.Minute))}})
				end := start + time.Minute + delay + between(-3*time.Minute, 3*time.Minute).Round(time.Second)
				add(end, scenario.Step{Cancel: &scenario.CancelStep{ID: first}})
				add(end+between(time.Second, 2*time.Minute).Round(time.Second), scenario.Step{Submit: &scenario.SubmitStep{ID: next, Nodes: 1, Partition: p.id,
					Runtime: dur(between(30*time.Minute, 2*time.Hour).Round(time.Minute))}})
				add(start+3*time.Hour, scenario.Step{Capacity: &scenario.CapacityDelay{Zone: p.zone, MachineType: p.machine,
					Delay: dur(between(0, 10*time.Minute).Round(time.Minute))}})
			}
		case ClassLostHealthReport:
			// Jobs to run on dynamic nodes, some of which fail their check.
			for i, n := 0, 1+rng.IntN(2); i < n; i++ {
				add(between(30*time.Minute, o.Horizon-5*time.Hour), scenario.Step{Submit: &scenario.SubmitStep{ID: jobID(i), Nodes: 1 + rng.IntN(2),
					Partition: "a3u", Runtime: dur(between(time.Hour, 3*time.Hour).Round(time.Minute))}})
			}
			for i, n := 0, 1+rng.IntN(2); i < n; i++ {
				t := between(time.Hour, o.Horizon-4*time.Hour)
				node := "flexvm-a3u-0"
				if rng.IntN(2) == 0 {
					node = fmt.Sprintf("flexvm-a3u-%d", 1+rng.IntN(3))
				}
				hold := fmt.Sprintf("lost-health-%d", i)
				add(t, scenario.Step{Health: &scenario.HealthStep{Node: node, Reasons: []string{"GPU 2: Xid 79, fallen off the bus"}},
					Delivery: &scenario.DeliveryFaults{Hold: hold}})
				add(t+between(20*time.Minute, 3*time.Hour).Round(time.Second), scenario.Step{Release: &scenario.ReleaseStep{Hold: hold}})
			}
		case ClassJobIDReused:
			for i, n := 0, 1+rng.IntN(2); i < n; i++ {
				// One node of a3u, which a resize in the base workload
				// never shrinks below that: the new job can always run.
				p := pools[0]
				// Ids of their own (the base workload's unfit job is 900).
				id := fmt.Sprintf("77%02d", i)
				t := between(time.Hour, o.Horizon-8*time.Hour)
				add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: id, Nodes: 1, Partition: p.id,
					Runtime: dur(between(20*time.Minute, 2*time.Hour).Round(time.Minute))}})
				end := t + between(5*time.Minute, 2*time.Hour).Round(time.Second)
				// The earlier job's end report (EpilogSlurmctld) is late.
				add(end-time.Second, scenario.Step{Deliveries: &scenario.DeliveryRule{Topic: "job-pending", Job: id, Times: 1, For: dur(2 * time.Second),
					DeliveryFaults: scenario.DeliveryFaults{Delay: dur(between(time.Minute, 30*time.Minute).Round(time.Second))}}})
				add(end, scenario.Step{Cancel: &scenario.CancelStep{ID: id}})
				again := end + between(10*time.Second, 10*time.Minute).Round(time.Second)
				add(again, scenario.Step{Submit: &scenario.SubmitStep{ID: id, Nodes: 1, Partition: p.id,
					Runtime: dur(between(20*time.Minute, time.Hour).Round(time.Minute))}})
			}
		case ClassLateDecision:
			for w, n := 0, 1+rng.IntN(2); w < n; w++ {
				start := between(time.Hour, o.Horizon-4*time.Hour)
				length := between(time.Hour, 3*time.Hour).Round(time.Minute)
				lag := between(3*time.Minute, 30*time.Minute).Round(time.Second)
				add(start, scenario.Step{LateDecision: &scenario.LateDecisionStep{Lag: dur(lag), For: dur(length)}})
				for i, k := 0, 1+rng.IntN(3); i < k; i++ {
					p := pools[rng.IntN(len(pools))]
					t := start + between(0, length)
					id := jobID(i + 10*w)
					add(t, scenario.Step{Submit: &scenario.SubmitStep{ID: id, Nodes: 1 + rng.IntN(p.max-p.min), Partition: p.id,
						Runtime: dur(between(10*time.Minute, 2*time.Hour).Round(time.Minute))}})
					if rng.IntN(3) == 0 {
						add(t+between(time.Minute, 20*time.Minute), scenario.Step{Cancel: &scenario.CancelStep{ID: id}})
					}
				}
				if rng.IntN(2) == 0 {
					add(start+between(0, length), scenario.Step{Expire: &scenario.VMRef{Node: "flexvm-a3u-0", Optional: true}})
				}
				// The MIG recreated while passes decide late (once a
				// seed: a second deletion could find it gone).
				if w == 0 && rng.IntN(2) == 0 {
					add(start+between(0, length/2), scenario.Step{DeleteMIG: &scenario.PoolRef{Pool: "a3u"}})
				}
			}
		}
	}
	return steps
}

// classInvariants widens the bounds a class's workload needs. The going-vm
// and resume-timeout classes request capacity while it is slow (a static
// node re-created at once, a static node keeping its queued request): the
// simulator fixes a request's capacity delay when it accepts the request,
// while static_at_min counts from the delay configured when it checks, so
// its bound takes the longest delay any step sets.
//
// A late reconcile pass acts on lists a lag old: what it decides is
// corrected by the passes after it, so the late-decision class adds its
// longest lag to every time-bounded invariant.
func classInvariants(f *scenario.File, o Options) {
	if len(o.Classes) == 0 || f.Invariants.StaticAtMin == nil {
		return
	}
	longest, lag := time.Duration(0), time.Duration(0)
	for _, s := range f.Steps {
		if s.Capacity != nil && s.Capacity.Delay.D() > longest {
			longest = s.Capacity.Delay.D()
		}
		if s.LateDecision != nil && s.LateDecision.Lag.D() > lag {
			lag = s.LateDecision.Lag.D()
		}
	}
	widen := func(w **scenario.Within, d time.Duration) {
		if *w == nil || d == 0 {
			return
		}
		c := **w
		c.Within = dur(c.Within.D() + d)
		*w = &c
	}
	// A queue timeout shorter than a capacity delay (the
	// fulfilled-as-cancelled class shortens it) cancels and resubmits a
	// static node's request up to MaxResubmits times, each waiting anew.
	resubmits := time.Duration(0)
	if d, err := time.ParseDuration(f.Policy["queue_timeout"]); err == nil && d < longest {
		resubmits = time.Duration(plan.DefaultPolicy().MaxResubmits+1) * d
	}
	widen(&f.Invariants.StaticAtMin, longest+lag+resubmits)
	widen(&f.Invariants.NoUnrecordedVM, lag)
	widen(&f.Invariants.IdleDynamicReleased, lag)
	widen(&f.Invariants.RepairProgress, lag)
	widen(&f.Invariants.WithinMax, lag)
	if slices.Contains(o.Classes, ClassJobIDReused) && f.Slurm.ResumeTimeout.D() == 0 {
		// The job that took an id again runs to its end: it was
		// provisioned, and no report of the earlier one ended it. (With a
		// ResumeTimeout shorter than the capacity delays another class
		// sets, a job may be requeued for as long as they last: then
		// nothing is asserted of it.)
		seen := map[string]int{}
		for _, st := range f.Steps {
			if st.Submit != nil && strings.HasPrefix(st.Submit.ID, "77") {
				seen[st.Submit.ID]++
			}
		}
		for _, id := range slices.Sorted(maps.Keys(seen)) {
			if seen[id] < 2 {
				continue
			}
			f.Steps = append(f.Steps, scenario.Step{At: at(o.Horizon + o.Tail), Assert: []scenario.Check{{Name: "the job that took id " + id + " again ran to its end",
				SlurmJobs: []scenario.SlurmJobCheck{{ID: id, State: "COMPLETED"}}}}})
		}
	}
	if slices.Contains(o.Classes, ClassLostHealthReport) {
		// Within the hour: the grace for the report, a pass to notice and
		// one to act, the snapshot that confirms the drain, and the
		// longest lag of a late pass.
		f.Invariants.OwnDrainFollowed = &scenario.Within{Within: dur(time.Hour + lag), AfterFault: f.Invariants.RepairProgress.AfterFault}
	}
}
