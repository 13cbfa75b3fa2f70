package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// demoPool picks the demo's pool — a Flex-Start pool with a static node
// and at least two dynamic ones — and names its first static node and the
// two dynamic nodes the demo uses.
func (s *System) demoPool() (pool *spec.NodePool, static string, dyn []string, err error) {
	for _, p := range s.Spec.FlexPools() {
		if p.MinNodeCount >= 1 && p.MaxNodeCount >= p.MinNodeCount+2 {
			node := func(i int) string { return model.NodeName(s.Spec.ID, p.ID, i) }
			return &p, node(0), []string{node(p.MinNodeCount), node(p.MinNodeCount + 1)}, nil
		}
	}
	return nil, "", nil, fmt.Errorf("the demo needs a flex-start pool with min_node_count ≥ 1 and max_node_count ≥ min + 2 (examples/cluster_config.json has one)")
}

// sbatch submits a batch job as a user would (sbatch --parsable ARGS --wrap
// SCRIPT) and returns its id.
func (ss *slurmSide) sbatch(ctx context.Context, script string, args ...string) (string, error) {
	a := append([]string{"--parsable", "-o", filepath.Join(ss.lc.Root, "log", "job-%j.out")}, args...)
	a = append(a, "--wrap", script)
	r := *ss.r
	r.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := r.Run(cctx, "sbatch", a...)
	if err != nil {
		return "", fmt.Errorf("sbatch: %w", err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	return id, nil
}

func (ss *slurmSide) job(ctx context.Context, id string) (slurm.JobInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return ss.r.ShowJob(cctx, id)
}

func (ss *slurmSide) node(ctx context.Context, name string) (slurm.NodeInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return ss.r.ShowNode(cctx, name)
}

func (ss *slurmSide) scontrol(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := ss.r.Scontrol(cctx, args...)
	return err
}

// jobIs and nodeIs are waitFor conditions on Slurm's view; last keeps the
// last state seen, for the timeline.
func (ss *slurmSide) jobIs(ctx context.Context, id string, last *slurm.JobInfo, cond func(slurm.JobInfo) bool) func() bool {
	return func() bool {
		j, err := ss.job(ctx, id)
		if err != nil {
			return false
		}
		*last = j
		return cond(j)
	}
}

func (ss *slurmSide) nodeIs(ctx context.Context, name string, last *slurm.NodeInfo, cond func(slurm.NodeInfo) bool) func() bool {
	return func() bool {
		n, err := ss.node(ctx, name)
		if err != nil {
			return false
		}
		*last = n
		return cond(n)
	}
}

// scancel cancels jobs (scancel), logging a failure.
func (ss *slurmSide) scancel(ctx context.Context, ids ...string) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := ss.r.Run(cctx, "scancel", ids...); err != nil {
		ss.tl.Say("scancel: " + err.Error())
	}
}

func running(j slurm.JobInfo) bool { return j.State == slurmstate.JobRunning }

// demoSlurm drives the node lifecycle README.md describes with real Slurm jobs and checks each
// outcome: the static node comes up and registers; jobs submitted with
// sbatch on powered-down nodes make Slurm call ResumeProgram, whose
// job-pending reports become resize requests, VMs and registered slurmds,
// and the jobs run; a GPU fault found by the prolog drains the node,
// requeues the job held and gets the VM repaired or replaced, after which
// the released job runs; the static node reaches its max run duration and
// is recreated; the idle dynamic node that expires stays powered down, and
// the one under a running job expires, Slurm requeues the job and
// flexslurm provisions the node for it again.
func (s *System) demoSlurm(ctx context.Context, ss *slurmSide) error {
	pool, static, dyn, err := s.demoPool()
	if err != nil {
		return err
	}
	cl := s.Spec.ID
	var others []string // nodes of the pool the demo's jobs must not use
	part := ""
	for _, n := range ss.lc.Nodes() {
		if n.Pool != pool.ID {
			continue
		}
		part = n.Partition
		if !slices.Contains(dyn, n.Name) {
			others = append(others, n.Name)
		}
	}
	exclude := slurm.CompressHostlist(others)
	week := pool.FlexStartMaxDuration
	stepWait := 30*time.Second + s.Clock.WallDuration(s.Opts.CapacityDelay)*4
	expiryWait := s.Clock.WallDuration(week) + 45*time.Second
	ok := true
	check := func(cond bool, what string) { ok = s.TL.Check(cond, what) && ok }
	started := time.Now()
	var jl slurm.JobInfo
	var nl slurm.NodeInfo

	s.TL.Step(1, fmt.Sprintf("cluster created: static node %s comes up (min_node_count %d) and its slurmd registers", static, pool.MinNodeCount))
	check(s.waitFor(ctx, stepWait, s.nodeIs(static, 1, model.PhaseRunning)), static+" generation 1 is running")
	check(s.waitFor(ctx, stepWait, ss.nodeIs(ctx, static, &nl, slurm.NodeInfo.Ready)),
		fmt.Sprintf("Slurm shows %s registered (%s)", static, nl.StateString()))

	s.TL.Step(2, fmt.Sprintf("two jobs are submitted with sbatch to partition %s, on powered-down nodes: ResumeProgram → job-pending → resize request → VM → slurmd", part))
	long, err := ss.sbatch(ctx, "sleep 3600", "-p", part, "-N", "1", "-x", exclude, "--time", "60", "-J", "demo-long")
	if err != nil {
		return err
	}
	// The short job prints what a job sees of its node, as on a VM: the
	// node's host name, and the GPUs Slurm gave it.
	short, err := ss.sbatch(ctx, `hostname; echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"; sleep 2`, "-p", part, "-N", "1", "-x", exclude,
		"--gpus-per-node", "2", "--time", "60", "-J", "demo-short")
	if err != nil {
		return err
	}
	s.TL.Say(fmt.Sprintf("sbatch: job %s (sleep 3600) and job %s (hostname, its GPUs, sleep 2; 2 GPUs), one node each, excluding %s", long, short, exclude))
	check(s.waitFor(ctx, stepWait, ss.jobIs(ctx, long, &jl, running)),
		fmt.Sprintf("job %s runs (%s on %s)", long, jl.State, jl.NodeList))
	busy := ""
	if len(jl.Nodes) == 1 {
		busy = jl.Nodes[0]
	}
	idle := dyn[0]
	if busy == dyn[0] {
		idle = dyn[1]
	}
	check(slices.Contains(dyn, busy), fmt.Sprintf("job %s runs on dynamic node %s", long, busy))
	check(s.waitFor(ctx, stepWait, ss.jobIs(ctx, short, &jl, func(j slurm.JobInfo) bool { return j.State == slurmstate.JobCompleted })),
		fmt.Sprintf("job %s ran on %s and completed (%s)", short, idle, jl.State))
	seen, _ := os.ReadFile(filepath.Join(ss.lc.Root, "log", "job-"+short+".out"))
	check(string(seen) == idle+"\nCUDA_VISIBLE_DEVICES=0,1\n",
		fmt.Sprintf("job %s saw host name %s and CUDA_VISIBLE_DEVICES=0,1, as on a VM (its output: %q)", short, idle, seen))
	for _, id := range []string{long, short} {
		rr := fmt.Sprintf("rr-%s-%s-j%s-g1", cl, pool.ID, id)
		check(s.requestState(rr) == "SUCCEEDED", fmt.Sprintf("resize request %s for job %s succeeded", rr, id))
	}
	check(s.waitFor(ctx, 20*time.Second, func() bool { j, ok := s.TL.Job(long); return ok && j.State == model.JobRunning }),
		fmt.Sprintf("flexslurm records job %s running (the agent's snapshot)", long))
	check(s.waitFor(ctx, 10*time.Second, ss.nodeIs(ctx, idle, &nl, slurm.NodeInfo.Ready)),
		fmt.Sprintf("%s is idle in Slurm after job %s (%s)", idle, short, nl.StateString()))

	s.TL.Step(3, fmt.Sprintf("a GPU of %s falls off the bus: the prolog of the next job there fails, drains the node and requeues the job held; the VM is repaired on a healthy host or replaced", busy))
	ss.scancel(ctx, long)
	s.waitFor(ctx, 20*time.Second, func() bool {
		return ss.jobIs(ctx, long, &jl, slurm.JobInfo.Finished)() &&
			ss.nodeIs(ctx, busy, &nl, func(n slurm.NodeInfo) bool {
				return n.State == slurmstate.NodeIdle && !n.Has(slurmstate.FlagCompleting)
			})()
	})
	n, _ := s.TL.Node(busy)
	faulty := s.vm(n.VMName)
	if err := s.InjectGPUFault(busy); err != nil {
		return err
	}
	pinned, err := ss.sbatch(ctx, "sleep 3600", "-p", part, "-N", "1", "-w", busy, "--time", "60", "-J", "demo-gpu")
	if err != nil {
		return err
	}
	s.TL.Say(fmt.Sprintf("job %s cancelled; Xid 79 in the kernel log of %s's host (%s); sbatch -w %s: job %s", long, busy, faulty.PhysicalHost, busy, pinned))
	check(s.waitFor(ctx, stepWait, ss.nodeIs(ctx, busy, &nl, func(n slurm.NodeInfo) bool {
		return n.DrainSet() && strings.Contains(n.Reason, "Xid 79")
	})), fmt.Sprintf("the prolog drained %s (reason %q)", busy, nl.Reason))
	check(s.waitFor(ctx, stepWait, ss.jobIs(ctx, pinned, &jl, slurm.JobInfo.Held)),
		fmt.Sprintf("job %s is pending and held after the prolog failure (%s)", pinned, jl.Reason))
	check(s.waitFor(ctx, stepWait, func() bool {
		n, ok := s.TL.Node(busy)
		if !ok || n.Phase != model.PhaseRunning {
			return false
		}
		vm := s.vm(n.VMName)
		return vm.Status == "RUNNING" && (vm.Name != faulty.Name || vm.PhysicalHost != faulty.PhysicalHost)
	}), fmt.Sprintf("the faulty VM %s was repaired on a healthy host or replaced", faulty.Name))
	check(s.waitFor(ctx, stepWait, ss.nodeIs(ctx, busy, &nl, func(n slurm.NodeInfo) bool { return n.Ready() && !n.DrainSet() })),
		fmt.Sprintf("%s is back in Slurm, no longer drained (%s)", busy, nl.StateString()))
	if err := ss.scontrol(ctx, "release", pinned); err != nil {
		s.TL.Say("scontrol release: " + err.Error())
	}
	s.TL.Say(fmt.Sprintf("scontrol release %s (the held job, as its user would)", pinned))
	check(s.waitFor(ctx, stepWait, ss.jobIs(ctx, pinned, &jl, running)),
		fmt.Sprintf("job %s runs on %s (%s)", pinned, jl.NodeList, jl.State))

	s.TL.Step(4, fmt.Sprintf("static node %s reaches its max run duration (%s): recreated, and its new slurmd registers", static, days(week)))
	check(s.waitFor(ctx, expiryWait, s.nodeIs(static, 2, model.PhaseRunning)), static+" generation 2 is running")
	check(s.vmStatus(model.VMName(static, 1)) == "", "the expired VM "+model.VMName(static, 1)+" is gone")
	check(s.waitFor(ctx, stepWait, ss.nodeIs(ctx, static, &nl, slurm.NodeInfo.Ready)),
		fmt.Sprintf("Slurm shows %s registered again (%s)", static, nl.StateString()))

	s.TL.Step(5, fmt.Sprintf("dynamic nodes expire: idle %s stays powered down; %s expires under running job %s, Slurm requeues it and a node is provisioned for it again", idle, busy, pinned))
	check(s.waitFor(ctx, expiryWait, func() bool {
		n, ok := s.TL.Node(idle)
		return ok && n.Phase == model.PhaseReleased && n.LastEnd == model.EndExpired
	}), fmt.Sprintf("%s expired with no job pending for it: released, not recreated", idle))
	check(s.waitFor(ctx, stepWait, ss.nodeIs(ctx, idle, &nl, slurm.NodeInfo.PoweredOff)),
		fmt.Sprintf("Slurm shows %s powered down (%s)", idle, nl.StateString()))
	check(!s.nodeHasVM(idle), idle+" has no VM")
	restarts := jl.Restarts
	check(s.waitFor(ctx, expiryWait, ss.jobIs(ctx, pinned, &jl, func(j slurm.JobInfo) bool { return j.Restarts > restarts })),
		fmt.Sprintf("Slurm requeued job %s when %s expired (restarts %d)", pinned, busy, jl.Restarts))
	check(s.waitFor(ctx, stepWait+20*time.Second, ss.jobIs(ctx, pinned, &jl, running)),
		fmt.Sprintf("job %s runs again (%s on %s)", pinned, jl.State, jl.NodeList))
	n, _ = s.TL.Node(busy)
	check(n.Phase == model.PhaseRunning && n.JobID == pinned && n.VMName != faulty.Name,
		fmt.Sprintf("%s was provisioned again for job %s (VM %s, %s)", busy, pinned, n.VMName, n.Phase))
	ss.scancel(ctx, pinned)

	s.TL.Step(6, fmt.Sprintf("no user job becomes root of the cluster: on %s, booted by flexslurm node boot, a job of nobody reads neither the munge key nor the node service account's token; root's does", static))
	ok = s.demoNoRootJobs(ctx, ss, static, part, stepWait) && ok

	s.TL.Step(7, "invariants")
	return s.invariants(ctx, pool.ID, true, started, ok, check, "demo finished: every outcome is the one README.md describes, with real Slurm jobs")
}
