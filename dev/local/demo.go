package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Apply publishes a cluster.applied event for c, as `flexslurm apply` does.
func (s *System) Apply(ctx context.Context, c *spec.Cluster) error {
	eff, err := c.EffectiveJSON()
	if err != nil {
		return err
	}
	node, err := s.NodeSettings(c)
	if err != nil {
		return err
	}
	data, err := json.Marshal(event.Cluster{
		Header: event.Header{Version: event.SchemaVersion, Type: event.TypeClusterApply, Cluster: c.ID},
		Spec:   eff, Node: &node, AppliedAt: s.Clock.Now(),
	})
	if err != nil {
		return err
	}
	s.TL.Say(fmt.Sprintf("apply cluster spec %s (%s)", c.ID, s.Opts.SpecPath))
	return s.publish(ctx, config.TopicClusterSpec, data, "")
}

// NodeSettings are the node settings of the local system: the simulator's
// default Slurm GPU image, slurmd's conf server on this machine, the
// cluster's munge-key secret in the local project, and homes bind-mounted
// from a stand-in directory under the run directory (created here).
func (s *System) NodeSettings(c *spec.Cluster) (nodeconfig.Settings, error) {
	home, err := filepath.Abs(filepath.Join(s.Opts.RunDir, "home"))
	if err != nil {
		return nodeconfig.Settings{}, err
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nodeconfig.Settings{}, fmt.Errorf("home stand-in: %w", err)
	}
	return nodeconfig.Settings{
		Image:          s.nodeImage(),
		ServiceAccount: "flexslurm-node@" + s.Opts.Project + ".iam.gserviceaccount.com",
		ConfServer:     "localhost",
		MungeKeySecret: "projects/" + s.Opts.Project + "/secrets/" + c.ID + "-munge-key/versions/latest",
		Home:           nodeconfig.Mount{Storage: c.Slurm.HomeDirectoryStorage, Type: nodeconfig.MountBind, Source: home, Dir: "/home"},
		Topics:         nodeconfig.Topics{Jobs: config.TopicJobs, Health: config.TopicHealthFailure},
	}, nil
}

// nodeImage is the local VMs' boot image: an image of the local project
// that, like an operator's own node image, carries flexslurm (the local
// guests run this machine's binary), added to the simulator on first use.
func (s *System) nodeImage() string {
	const name, family = "flexslurm-node-v1", "flexslurm-node"
	s.Sim.AddImage(s.Opts.Project, name, family)
	return "projects/" + s.Opts.Project + "/global/images/" + name
}

// writeNodeSettings writes the node settings of the local system's spec to
// the run directory, for `flexslurm apply --node-settings` against it.
func (s *System) writeNodeSettings() (string, error) {
	c, err := spec.Load(s.Opts.SpecPath)
	if err != nil {
		return "", err
	}
	ns, err := s.NodeSettings(c)
	if err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(ns, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Opts.RunDir, "node-settings.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("writing the local node settings: %w", err)
	}
	return path, nil
}

// publish publishes a message; a report is signed with the identity
// token of the metadata server at metadataHost, as the hooks sign theirs
// ("" publishes unsigned: the operator's cluster.applied).
func (s *System) publish(ctx context.Context, topic string, data []byte, metadataHost string) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var attrs map[string]string
	if metadataHost != "" {
		var err error
		if attrs, err = (identity.Signer{Host: metadataHost}).Sign(pctx, s.Spec.ID, data, nil); err != nil {
			return fmt.Errorf("signing a report for %s: %w", topic, err)
		}
	}
	_, err := s.PubSub.Publish(pctx, topic, data, attrs)
	if err != nil {
		return fmt.Errorf("publishing to %s: %w", topic, err)
	}
	return nil
}

// Job publishes a job lifecycle report, as the Slurm hooks do.
func (s *System) Job(ctx context.Context, typ, id string, count int, requeued bool) error {
	ev := event.Job{
		Header: event.Header{Version: event.SchemaVersion, Type: typ, Cluster: s.Spec.ID},
		JobID:  id, NodeCount: count, Requeued: requeued, ReportedAt: s.Clock.Now(),
	}
	if typ == event.TypeJobPending {
		ev.Partition = s.flexPartition()
	}
	data, _ := json.Marshal(ev)
	s.TL.Say(fmt.Sprintf("slurm reports %s for job %s", typ, id))
	return s.publish(ctx, config.TopicJobs, data, s.Controller.Addr())
}

// Health publishes a failed health check, as the node-side hooks do.
func (s *System) Health(ctx context.Context, n model.Node, jobID, jobState, reason string) error {
	ev := event.Health{
		Header: event.Header{Version: event.SchemaVersion, Type: event.TypeHealthFailure, Cluster: s.Spec.ID},
		Node:   n.Name, Generation: n.Generation, VMName: n.VMName, JobID: jobID, JobState: jobState,
		Verdict: "FAIL", Reasons: []string{reason}, CheckedAt: s.Clock.Now(),
		// Slurm requeued the job: the hook finds the node drained. Only
		// logged: flexslurm waits for the agent's snapshot to confirm it.
		Drained: jobState == "requeued" || jobState == "pending",
	}
	data, _ := json.Marshal(ev)
	s.TL.Say(fmt.Sprintf("health check on %s (%s) fails: %s", n.Name, n.VMName, reason))
	// Signed by the VM itself, through a metadata server of its own.
	pool, _ := s.Spec.Pool(n.Pool)
	if pool == nil {
		return fmt.Errorf("node %s: pool %s is not in the spec", n.Name, n.Pool)
	}
	ms, err := s.Sim.StartMetadataServer(pool.Zone, n.VMName, "127.0.0.1:0", nil)
	if err != nil {
		return err
	}
	defer ms.Close()
	return s.publish(ctx, config.TopicHealthFailure, data, ms.Addr())
}

// DrainedSnapshot publishes what the Slurm agent would once Slurm has
// drained node after a failed health check on vm: a snapshot showing the
// node IDLE+CLOUD+DRAIN with flexslurm's reason, the job it requeued
// pending, and the other active jobs as flexslurm records them. Without
// Slurm the demo stands in for the agent, as it does for the hooks.
func (s *System) DrainedSnapshot(ctx context.Context, node, vm, reason, requeued string) error {
	st, err := s.Store.Read(ctx, store.Scope{Cluster: s.Spec.ID, AllPools: true})
	if err != nil {
		return fmt.Errorf("reading the records for the snapshot: %w", err)
	}
	drainReason := slurmstate.ReasonPrefix + " health check failed: " + reason + " (" + vm + ")"
	snap := event.SlurmSnapshot{Header: event.Header{Version: event.SchemaVersion, Type: event.TypeSlurmSnapshot, Cluster: s.Spec.ID},
		TakenAt: s.Clock.Now(),
		Nodes:   []event.SnapshotNode{{Name: node, Node: slurmstate.ParseNode(node, []string{"IDLE", "CLOUD", "DRAIN"}, drainReason)}}}
	for _, j := range st.SortedJobs() {
		switch {
		case j.ID == requeued:
			snap.Jobs = append(snap.Jobs, event.SnapshotJob{ID: j.ID, State: slurmstate.JobPending, Partition: j.Partition,
				NodeCount: max(j.NodesWanted, 1), Reason: "launch failed requeued held"})
		case j.State == model.JobPending:
			snap.Jobs = append(snap.Jobs, event.SnapshotJob{ID: j.ID, State: slurmstate.JobPending, Partition: j.Partition,
				NodeCount: max(j.NodesWanted, 1), Reason: "Resources"})
		case j.State == model.JobRunning:
			snap.Jobs = append(snap.Jobs, event.SnapshotJob{ID: j.ID, State: slurmstate.JobRunning, Partition: j.Partition,
				Nodes: j.Nodes, NodeCount: max(len(j.Nodes), 1)})
		}
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	s.TL.Say(fmt.Sprintf("the Slurm agent's snapshot shows %s drained and job %s pending", node, requeued))
	return s.publish(ctx, config.TopicSlurmSnapshot, data, "")
}

func (s *System) flexPartition() string {
	for _, p := range s.Spec.Slurm.Partitions {
		for _, id := range p.NodePoolIDs {
			if sp, ok := s.Spec.Pool(id); ok && sp.IsFlexStart() {
				return p.ID
			}
		}
	}
	return ""
}

// waitFor polls cond until it holds or the wall-clock timeout passes.
func (s *System) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *System) nodeIs(name string, gen int64, phase model.Phase) func() bool {
	return func() bool {
		n, ok := s.TL.Node(name)
		return ok && n.Generation == gen && n.Phase == phase
	}
}

func (s *System) vmStatus(name string) string { return s.vm(name).Status }

// vm returns the simulator's VM name; its Status is "" when there is none.
func (s *System) vm(name string) computesim.Instance {
	for _, vm := range s.Sim.Instances() {
		if vm.Name == name {
			return vm
		}
	}
	return computesim.Instance{}
}

// nodeHasVM reports whether any VM of node exists, whatever its state.
func (s *System) nodeHasVM(node string) bool {
	for _, vm := range s.Sim.Instances() {
		if n, _, _, _, ok := naming.ParseVMName(vm.Name); ok && n == node {
			return true
		}
	}
	return false
}

// orphanVM waits (up to 5 s, for deletions in flight) until every VM of
// pool that is not being deleted is the current generation of a serving
// node, and returns the first that is not ("" when none). A VM of a
// dynamic node the demo left to other jobs counts only when strict.
func (s *System) orphanVM(ctx context.Context, pool string, strict bool) string {
	orphan := ""
	s.waitFor(ctx, 5*time.Second, func() bool {
		orphan = ""
		for _, vm := range s.Sim.Instances() {
			node, _, p, _, ok := naming.ParseVMName(vm.Name)
			if vm.Status == "STOPPING" || !ok || p != pool {
				continue
			}
			if n, ok := s.TL.Node(node); ok && n.VMName == vm.Name && n.Phase.Serving() {
				continue
			}
			if strict {
				orphan = vm.Name
				return false
			}
		}
		return true
	})
	return orphan
}

// resizeRequestsCreated counts the resize requests Compute accepted.
func (s *System) resizeRequestsCreated() int {
	creates := 0
	for _, c := range s.Sim.Calls() {
		if c.Method == "POST" && strings.HasSuffix(c.Path, "/resizeRequests") && c.Status < 300 {
			creates++
		}
	}
	return creates
}

func (s *System) requestState(name string) string {
	for _, rr := range s.Sim.ResizeRequestHistory() {
		if rr.Name == name {
			return rr.State
		}
	}
	return ""
}

// Demo drives the node lifecycle README.md describes on the running system and checks each
// outcome. With the local Slurm it submits real jobs (demoSlurm). With
// Options.NoSlurm it publishes the reports the hooks would: static nodes
// come up; a pending job gets dynamic nodes through one resize request; a
// static node expires and is recreated; a dynamic node expires with no
// pending job and is not recreated, and with a pending job it is; a GPU
// health failure has the Flex-Start VM deleted and replaced for the
// requeued job. It returns an error if any outcome differs.
func (s *System) Demo(ctx context.Context) error {
	defer s.TL.Flush()
	if ss := s.slurm.Load(); ss != nil {
		return s.demoSlurm(ctx, ss)
	}
	pool, static, dyn, err := s.demoPool()
	if err != nil {
		return err
	}
	cl := s.Spec.ID
	extra := pool.MaxNodeCount - pool.MinNodeCount - 2 // dynamic slots beyond the two the demo uses
	week := pool.FlexStartMaxDuration
	wallWeek := s.Clock.WallDuration(week)
	stepWait := 30*time.Second + s.Clock.WallDuration(s.Opts.CapacityDelay)*4
	expiryWait := wallWeek + 45*time.Second
	ok := true
	check := func(cond bool, what string) { ok = s.TL.Check(cond, what) && ok }
	started := time.Now()

	s.TL.Step(1, fmt.Sprintf("cluster created: static node %s comes up (min_node_count %d)", static, pool.MinNodeCount))
	check(s.waitFor(ctx, stepWait, s.nodeIs(static, 1, model.PhaseRunning)), static+" generation 1 is running")
	check(s.vmStatus(model.VMName(static, 1)) == "RUNNING", "its VM "+model.VMName(static, 1)+" runs in Compute")

	s.TL.Step(2, "job 101 goes PENDING for 2 nodes: one Flex-Start resize request, two dynamic VMs")
	want := 2
	if err := s.Job(ctx, event.TypeJobPending, "101", want, false); err != nil {
		return err
	}
	rr101 := fmt.Sprintf("rr-%s-%s-j101-g1", cl, pool.ID)
	check(s.waitFor(ctx, stepWait, func() bool {
		return s.nodeIs(dyn[0], 1, model.PhaseRunning)() && s.nodeIs(dyn[1], 1, model.PhaseRunning)()
	}), fmt.Sprintf("%s and %s generation 1 are running", dyn[0], dyn[1]))
	check(s.requestState(rr101) == "SUCCEEDED", "resize request "+rr101+" succeeded")
	if err := s.Job(ctx, event.TypeJobStarted, "101", 0, false); err != nil {
		return err
	}

	// Fill any further dynamic slots so that the next job must wait.
	for i := 0; i < extra; i++ {
		if err := s.Job(ctx, event.TypeJobPending, fmt.Sprintf("%d", 201+i), 1, false); err != nil {
			return err
		}
	}

	s.TL.Step(3, fmt.Sprintf("job 102 goes PENDING while pool %s is at max_node_count %d: it waits", pool.ID, pool.MaxNodeCount))
	if err := s.Job(ctx, event.TypeJobPending, "102", 1, false); err != nil {
		return err
	}
	check(s.waitFor(ctx, stepWait, func() bool {
		j, ok := s.TL.Job("102")
		return ok && j.State == model.JobPending && j.Stage == model.JobStageWaiting
	}), "job 102 is pending and waits for room, no capacity requested")
	if err := s.Job(ctx, event.TypeJobFinished, "101", 0, false); err != nil {
		return err
	}

	s.TL.Step(4, fmt.Sprintf("static node %s reaches its max run duration (%s): recreated, whether or not a job waits", static, days(week)))
	check(s.waitFor(ctx, expiryWait, s.nodeIs(static, 2, model.PhaseRunning)), static+" generation 2 is running")
	check(s.vmStatus(model.VMName(static, 1)) == "", "the expired VM "+model.VMName(static, 1)+" is gone")

	s.TL.Step(5, "dynamic nodes expire: one is recreated for pending job 102, the other is not (no job pending for it)")
	var served, idle string
	check(s.waitFor(ctx, stepWait+10*time.Second, func() bool {
		a, _ := s.TL.Node(dyn[0])
		b, _ := s.TL.Node(dyn[1])
		switch {
		case a.Generation == 2 && a.Phase == model.PhaseRunning && b.Phase == model.PhaseReleased:
			served, idle = dyn[0], dyn[1]
		case b.Generation == 2 && b.Phase == model.PhaseRunning && a.Phase == model.PhaseReleased:
			served, idle = dyn[1], dyn[0]
		default:
			return false
		}
		return true
	}), "one dynamic node runs again (generation 2) and one stays released")
	if served != "" {
		n, _ := s.TL.Node(served)
		check(n.JobID == "102", fmt.Sprintf("%s was recreated for job 102", served))
		check(s.vmStatus(model.VMName(idle, 2)) == "" && s.vmStatus(model.VMName(idle, 1)) == "", idle+" has no VM")
	}

	s.TL.Step(6, "job 102 starts; a GPU health check fails on its node; Slurm requeues the job: once the agent's snapshot confirms the drain, the Flex-Start VM (no host repair for Flex-Start) is deleted and replaced for the job")
	if served != "" {
		if err := s.Job(ctx, event.TypeJobStarted, "102", 0, false); err != nil {
			return err
		}
		check(s.waitFor(ctx, stepWait, func() bool { j, ok := s.TL.Job("102"); return ok && j.State == model.JobRunning }), "job 102 is running")
		n, _ := s.TL.Node(served)
		faulty := s.vm(n.VMName)
		if err := s.Health(ctx, n, "102", "requeued", "GPU 3: 2 uncorrectable ECC errors (nvidia-smi)"); err != nil {
			return err
		}
		check(s.waitFor(ctx, 10*time.Second, func() bool {
			for _, c := range s.TL.Commands() {
				if c.Command == event.SlurmDrain && len(c.Nodes) == 1 && c.Nodes[0] == served {
					return true
				}
			}
			return false
		}), "Slurm was asked to drain "+served)
		check(s.waitFor(ctx, 5*time.Second, func() bool {
			n, ok := s.TL.Node(served)
			return ok && n.Repair == model.RepairAwaitDrain && s.vmStatus(faulty.Name) != ""
		}), fmt.Sprintf("%s awaits Slurm's word that it is drained: the hook's word deletes no VM", faulty.Name))
		if err := s.DrainedSnapshot(ctx, served, faulty.Name, "GPU 3: 2 uncorrectable ECC errors (nvidia-smi)", "102"); err != nil {
			return err
		}
		check(s.waitFor(ctx, stepWait, func() bool { return s.vmStatus(faulty.Name) == "" }),
			fmt.Sprintf("%s was deleted: Compute Engine repairs hosts of reservation-bound VMs only, never of Flex-Start VMs", faulty.Name))
		check(s.waitFor(ctx, stepWait, func() bool {
			n, ok := s.TL.Node(served)
			j, jok := s.TL.Job("102")
			return ok && n.VMName != faulty.Name && n.Repair == model.RepairNone && jok && j.State == model.JobPending
		}), fmt.Sprintf("%s left its failed VM and job 102 waits for its replacement", served))
	} else {
		check(false, "skipped: no node serves job 102")
	}

	s.TL.Step(7, "invariants")
	return s.invariants(ctx, pool.ID, extra == 0, started, ok, check, "demo finished: every outcome is the one README.md describes")
}

// invariants checks what must hold at the end of either demo — never two
// VMs for one node, every VM of pool the current generation of a node
// (strict: counting VMs of dynamic slots the demo left alone) — prints
// the totals, and returns errDemo if any check failed (ok false).
func (s *System) invariants(ctx context.Context, pool string, strict bool, started time.Time, ok bool,
	check func(bool, string), done string) error {
	v := s.TL.Violations()
	check(len(v) == 0, fmt.Sprintf("never two VMs for one node (%d violations)", len(v)))
	orphan := s.orphanVM(ctx, pool, strict)
	check(orphan == "", "every VM is the current generation of a node record")
	migs, problems := s.migsThroughGcloud(ctx)
	for _, l := range migs {
		s.TL.Say("gcloud compute instance-groups managed list: " + l)
	}
	for _, p := range problems {
		s.TL.Say(p)
	}
	check(len(problems) == 0, fmt.Sprintf("gcloud lists one MIG per resize request, each holding its one request (%d MIGs)", len(migs)))
	ok = ok && len(problems) == 0
	s.TL.Say(fmt.Sprintf("resize requests created in Compute: %d; wall time %s", s.resizeRequestsCreated(), time.Since(started).Round(time.Second)))
	decisions, resent := s.TL.CommandCounts()
	s.TL.Say(fmt.Sprintf("Slurm commands: %d decisions, %d sent again under a new id", decisions, resent))
	if !ok || len(v) > 0 || orphan != "" {
		return errDemo
	}
	s.TL.Say(done)
	return nil
}
