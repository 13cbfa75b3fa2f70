package plan

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// rkinds is kinds with the repair state of stored nodes.
func rkinds(actions []Action) []string {
	var out []string
	for _, a := range actions {
		switch a := a.(type) {
		case PutNode:
			s := "PutNode:" + a.Node.Name + "/" + string(a.Node.Phase)
			if a.Node.Repair != model.RepairNone {
				s += "/" + string(a.Node.Repair)
			}
			out = append(out, s)
		default:
			out = append(out, kinds([]Action{a})...)
		}
	}
	return out
}

// reservationBound returns the applied example cluster with its pool made
// one whose hosts Compute Engine repairs: reservation-bound A3 Ultra. The
// example's pool is Flex-Start, whose failed VMs are always replaced.
func reservationBound(t *testing.T) *model.State {
	t.Helper()
	st, _ := applied(t)
	p := st.Pools["a3u"]
	p.ProvisioningModel, p.MachineType = "RESERVATION", "a3-ultragpu-8g"
	return st
}

// fail is a FAIL from the node-side hooks, checked at t0.
func fail(node string, gen int64, job, jobState string, drained bool) *event.Health {
	h := health(node, gen, job, jobState)
	h.Drained, h.CheckedAt = drained, t0
	return h
}

func inconclusiveEv(node string, gen int64) *event.Health {
	h := health(node, gen, "", "")
	h.Verdict, h.Reasons = event.VerdictInconclusive, []string{"dcgmi diag did not finish within 2m"}
	return h
}

// week is far from any termination.
const farEnd = 7 * 24 * time.Hour

// dynRunning makes flexvm-a3u-1 a running dynamic node provisioned for job 7
// (left in state jobState).
func dynRunning(t *testing.T, st *model.State, jobState model.JobState) {
	t.Helper()
	Apply(st, mustJob(t, st, jobEv(event.TypeJobPending, "7", 1)))
	running(st, "flexvm-a3u-1", t0.Add(farEnd))
	st.Jobs["7"].State = jobState
}

// putNode returns the last PutNode of a node among actions.
func lastNode(t *testing.T, actions []Action, name string) model.Node {
	t.Helper()
	var n *model.Node
	for _, a := range actions {
		if p, ok := a.(PutNode); ok && p.Node.Name == name {
			nn := p.Node
			n = &nn
		}
	}
	if n == nil {
		t.Fatalf("no PutNode for %s in %v", name, rkinds(actions))
	}
	return *n
}

func find[T Action](actions []Action) (T, bool) {
	for _, a := range actions {
		if x, ok := a.(T); ok {
			return x, true
		}
	}
	var zero T
	return zero, false
}

// confirmSnapshot is the agent's snapshot taken at at: nodes by Slurm
// state words ("IDLE+CLOUD+DRAIN"), and jobs.
func confirmSnapshot(at time.Time, nodes map[string]string, jobs ...event.SnapshotJob) *event.SlurmSnapshot {
	s := &event.SlurmSnapshot{Header: event.Header{Version: 1, Type: event.TypeSlurmSnapshot, Cluster: "flexvm"}, TakenAt: at, Jobs: jobs}
	for name, words := range nodes {
		s.Nodes = append(s.Nodes, event.SnapshotNode{Name: name, Node: slurmNode(name, "flexslurm: health check failed", strings.Split(words, "+")...)})
	}
	return s
}

// failAndConfirm decides a FAIL at now and applies it, then stores the
// agent's snapshot taken a second later showing the node drained (and
// jobs), which takes the repair step; it returns both decisions' actions,
// applied to st.
func failAndConfirm(t *testing.T, st *model.State, h *event.Health, now time.Time, pol Policy, jobs ...event.SnapshotJob) []Action {
	t.Helper()
	acts, err := Repair(st, h, now, pol)
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, acts)
	more, err := Snapshot(st, confirmSnapshot(now.Add(time.Second), map[string]string{h.Node: "IDLE+CLOUD+DRAIN"}, jobs...), now.Add(2*time.Second), pol)
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, more)
	return append(acts, more...)
}

// TestRepairFail: a FAIL drains the node and, whatever the hook says of
// the drain, waits for Slurm to confirm it: the repair step is taken when
// a snapshot taken after the repair started shows the node drained
// (confirm: the snapshot stored a second after the FAIL, its actions
// following the FAIL's in want).
func TestRepairFail(t *testing.T) {
	drainedView := func(nodes map[string]string) func(st *model.State) {
		return func(st *model.State) { st.Slurm = slurmView(t0.Add(time.Second), nodes) }
	}
	drained0 := map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"}
	drained1 := map[string]string{"flexvm-a3u-1": "IDLE+CLOUD+DRAIN"}
	tests := []struct {
		name    string
		prepare func(st *model.State)
		ev      *event.Health
		pol     Policy
		// confirm, when set, is stored (Snapshot) after the FAIL's
		// decision is applied; its actions are appended to the FAIL's.
		confirm *event.SlurmSnapshot
		want    []string
		check   func(t *testing.T, got []Action)
	}{
		{
			name:    "static node drained per the hook: drained in Slurm, host repaired once Slurm's snapshot confirms the drain",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) },
			ev:      fail("flexvm-a3u-0", 1, "", "", true),
			confirm: confirmSnapshot(t0.Add(time.Second), drained0),
			want: []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain",
				"ReportHost:flexvm-a3u-0-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-0/running/host_repair"},
			check: func(t *testing.T, got []Action) {
				r, _ := find[ReportHostAsFaulty](got)
				want := ReportHostAsFaulty{Pool: "a3u", Node: "flexvm-a3u-0", Generation: 1, VM: "flexvm-a3u-0-g1",
					Behavior: "UNRECOVERABLE_GPU_ERROR", Description: "health check failed: GPU 3: 2 uncorrectable ECC errors",
					RequestID: naming.RequestID("report-host-as-faulty", "us-central1-a/flexvm-a3u-0-g1")}
				r.Reason = ""
				if d := cmp.Diff(want, r); d != "" {
					t.Errorf("host repair (-want +got):\n%s", d)
				}
				n := lastNode(t, got, "flexvm-a3u-0")
				if !n.RepairSince.Equal(t0.Add(2*time.Second)) || n.RepairReason != "health check failed: GPU 3: 2 uncorrectable ECC errors" || n.Generation != 1 {
					t.Errorf("node: since %s reason %q gen %d", n.RepairSince, n.RepairReason, n.Generation)
				}
				d, _ := find[SlurmCommand](got)
				if r := event.RenderReason(d.Command, d.Reason); r != "flexslurm: health check failed: GPU 3: 2 uncorrectable ECC errors (flexvm-a3u-0-g1)" {
					t.Errorf("drain reason %q", r)
				}
			},
		},
		{
			name:    "the hook's drained flag alone deletes nothing: the repair waits for Slurm",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) },
			ev:      fail("flexvm-a3u-0", 1, "", "", true),
			want:    []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain"},
			check: func(t *testing.T, got []Action) {
				if n := lastNode(t, got, "flexvm-a3u-0"); !strings.Contains(n.Reason, "the hook saw the node drained") {
					t.Errorf("the hook's claim is not noted in the record: %q", n.Reason)
				}
			},
		},
		{
			name:    "static node still draining (no snapshot): drained in Slurm, the repair waits for the drain",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) },
			ev:      fail("flexvm-a3u-0", 1, "", "", false),
			want:    []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain"},
		},
		{
			name: "a snapshot taken after the check but before the repair started does not confirm the drain",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
				st.Slurm = slurmView(t0.Add(-time.Second), drained0)
			},
			ev: func() *event.Health {
				h := fail("flexvm-a3u-0", 1, "", "", true)
				h.CheckedAt = t0.Add(-time.Hour) // the node's own clock: not trusted either
				return h
			}(),
			want: []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain"},
		},
		{
			name:    "a snapshot showing the node draining (DRAIN with a job) is not drained",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) },
			ev:      fail("flexvm-a3u-0", 1, "", "", true),
			confirm: confirmSnapshot(t0.Add(time.Second), map[string]string{"flexvm-a3u-0": "MIXED+CLOUD+DRAIN"}),
			want:    []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain"},
		},
		{
			name:    "a snapshot taken at the instant the repair started says nothing of the drain (ties go to the record)",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) },
			ev:      fail("flexvm-a3u-0", 1, "", "", true),
			confirm: confirmSnapshot(t0, drained0),
			want:    []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain"},
		},
		{
			name:    "dynamic node no job waits for: VM deleted once Slurm drained it, not replaced",
			prepare: func(st *model.State) { dynRunning(t, st, model.JobFinished) },
			ev:      fail("flexvm-a3u-1", 1, "", "", true),
			confirm: confirmSnapshot(t0.Add(time.Second), drained1),
			want: []string{"Slurm:drain:flexvm-a3u-1", "PutNode:flexvm-a3u-1/running/await_drain",
				"DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1", "PutNode:flexvm-a3u-1/deleting"},
		},
		{
			name:    "dynamic node whose job runs, not drained yet: nothing deleted before Slurm drained it",
			prepare: func(st *model.State) { dynRunning(t, st, model.JobRunning) },
			ev:      fail("flexvm-a3u-1", 1, "7", "running", false),
			want:    []string{"Slurm:drain:flexvm-a3u-1", "PutNode:flexvm-a3u-1/running/await_drain"},
		},
		{
			name:    "requeued job on a drained dynamic node: Slurm shows it pending, so it is pending again and the repaired VM is its replacement",
			prepare: func(st *model.State) { dynRunning(t, st, model.JobRunning) },
			ev:      fail("flexvm-a3u-1", 1, "7", "requeued", true),
			confirm: confirmSnapshot(t0.Add(time.Second), drained1, event.SnapshotJob{ID: "7", State: "PENDING", Partition: "a3u", NodeCount: 1}),
			want: []string{"Slurm:drain:flexvm-a3u-1", "PutNode:flexvm-a3u-1/running/await_drain",
				"PutJob:7/pending", "ReportHost:flexvm-a3u-1-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-1/running/host_repair"},
			check: func(t *testing.T, got []Action) {
				j, _ := find[PutJob](got)
				if j.Job.Requeues != 1 {
					t.Errorf("requeues %d, want 1", j.Job.Requeues)
				}
				if r, _ := find[ReportHostAsFaulty](got); r.JobID != "7" {
					t.Errorf("host repair for job %q, want 7", r.JobID)
				}
			},
		},
		{
			name:    "host repair disabled: the waiting job gets a new VM at once",
			prepare: func(st *model.State) { dynRunning(t, st, model.JobRunning) },
			ev:      fail("flexvm-a3u-1", 1, "7", "requeued", true),
			pol:     Policy{DisableHostRepair: true},
			confirm: confirmSnapshot(t0.Add(time.Second), drained1, event.SnapshotJob{ID: "7", State: "PENDING", Partition: "a3u", NodeCount: 1}),
			want: []string{"Slurm:drain:flexvm-a3u-1", "PutNode:flexvm-a3u-1/running/await_drain",
				"PutJob:7/pending", "DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1",
				"PutNode:flexvm-a3u-1/released", "PutNode:flexvm-a3u-1/requested", "PutJob:7/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-1-g2"},
		},
		{
			name:    "prolog failure of a job flexslurm never heard of, pending in Slurm: the node is replaced for it",
			prepare: func(st *model.State) { dynRunning(t, st, model.JobFinished) },
			ev:      fail("flexvm-a3u-1", 1, "99", "pending", true),
			pol:     Policy{DisableHostRepair: true},
			confirm: confirmSnapshot(t0.Add(time.Second), drained1, event.SnapshotJob{ID: "99", State: "PENDING", Partition: "a3u", NodeCount: 1}),
			want: []string{"Slurm:drain:flexvm-a3u-1", "PutNode:flexvm-a3u-1/running/await_drain",
				"DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1",
				"PutNode:flexvm-a3u-1/requested", "CreateResizeRequest:rr-flexvm-a3u-1-g2=flexvm-a3u-1-g2"},
		},
		{
			name: "a VM already host-repaired once in this generation is deleted and replaced",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
				st.Nodes["flexvm-a3u-0"].HostRepaired = 1
			},
			ev:      fail("flexvm-a3u-0", 1, "", "", true),
			confirm: confirmSnapshot(t0.Add(time.Second), drained0),
			want: []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain",
				"DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
			check: func(t *testing.T, got []Action) {
				d, _ := find[SlurmCommand](got)
				if d.ID == naming.CommandID("flexvm", string(event.SlurmDrain), "flexvm-a3u-0", "", "flexvm-a3u-0-g1", "health") {
					t.Error("the drain after a host repair has the first drain's id: the agent would skip it")
				}
			},
		},
		{
			name:    "a VM ending within the repair timeout is replaced rather than repaired",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(10*time.Minute)) },
			ev:      fail("flexvm-a3u-0", 1, "", "", true),
			confirm: confirmSnapshot(t0.Add(time.Second), drained0),
			want: []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain",
				"DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name: "another hook reports the fault under host repair: noted, no new action",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
				n := st.Nodes["flexvm-a3u-0"]
				n.Repair, n.RepairSince = model.RepairHost, t0.Add(-time.Minute)
			},
			ev:   fail("flexvm-a3u-0", 1, "", "", true),
			want: []string{"PutNode:flexvm-a3u-0/running/host_repair"},
		},
		{
			name: "another report while awaiting the drain, still draining: noted",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
				n := st.Nodes["flexvm-a3u-0"]
				n.Repair, n.RepairSince = model.RepairAwaitDrain, t0.Add(-time.Minute)
			},
			ev:   fail("flexvm-a3u-0", 1, "", "", false),
			want: []string{"PutNode:flexvm-a3u-0/running/await_drain"},
		},
		{
			name: "another report while awaiting the drain, saying drained: noted, no repair step without Slurm",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
				n := st.Nodes["flexvm-a3u-0"]
				n.Repair, n.RepairSince = model.RepairAwaitDrain, t0.Add(-time.Minute)
			},
			ev:   fail("flexvm-a3u-0", 1, "", "", true),
			want: []string{"PutNode:flexvm-a3u-0/running/await_drain"},
		},
		{
			name: "another report while awaiting the drain, which a snapshot taken since confirms: the repair step, without a second drain",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
				n := st.Nodes["flexvm-a3u-0"]
				n.Repair, n.RepairSince = model.RepairAwaitDrain, t0.Add(-time.Minute)
				drainedView(drained0)(st)
			},
			ev:   fail("flexvm-a3u-0", 1, "", "", false),
			want: []string{"ReportHost:flexvm-a3u-0-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-0/running/host_repair"},
		},
		{
			name: "a FAIL on a node drained for diagnosis starts its repair, once Slurm confirms the drain",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
				n := st.Nodes["flexvm-a3u-0"]
				n.Repair, n.RepairSince = model.RepairDiagnosis, t0.Add(-time.Hour)
			},
			ev:      fail("flexvm-a3u-0", 1, "", "", true),
			confirm: confirmSnapshot(t0.Add(time.Second), drained0),
			want: []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain",
				"ReportHost:flexvm-a3u-0-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-0/running/host_repair"},
		},
		{
			name: "generation 0 is taken from the VM name",
			prepare: func(st *model.State) {
				running(st, "flexvm-a3u-0", t0.Add(farEnd))
			},
			ev: func() *event.Health {
				h := fail("flexvm-a3u-0", 0, "", "", false)
				h.VMName = "flexvm-a3u-0-g1"
				return h
			}(),
			confirm: confirmSnapshot(t0.Add(time.Second), drained0),
			want: []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain",
				"ReportHost:flexvm-a3u-0-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-0/running/host_repair"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := reservationBound(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			got, err := Repair(st, tc.ev, t0, tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			if tc.confirm != nil {
				Apply(st, got)
				more, err := Snapshot(st, tc.confirm, t0.Add(2*time.Second), tc.pol)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, more...)
			}
			if d := cmp.Diff(tc.want, rkinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			for _, a := range got {
				if a.Why() == "" {
					t.Errorf("%s has no reason", a)
				}
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestRepairRejects(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(st *model.State)
		ev      *event.Health
	}{
		{"a stale generation", func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) }, fail("flexvm-a3u-0", 7, "", "", true)},
		{"a stale generation, from the VM name", func(st *model.State) {
			running(st, "flexvm-a3u-0", t0.Add(farEnd))
			st.Nodes["flexvm-a3u-0"].Generation = 2
		},
			func() *event.Health {
				h := fail("flexvm-a3u-0", 0, "", "", true)
				h.VMName = "flexvm-a3u-0-g1"
				return h
			}()},
		{"an unknown node", nil, fail("flexvm-a3u-2", 1, "", "", true)},
		{"a node of another cluster", nil, fail("other-a3u-0", 1, "", "", true)},
		{"a released node", func(st *model.State) { st.Nodes["flexvm-a3u-0"].Phase = model.PhaseReleased }, fail("flexvm-a3u-0", 1, "", "", true)},
		{"an INCONCLUSIVE for a stale generation", func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) }, inconclusiveEv("flexvm-a3u-0", 3)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := reservationBound(t)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			if got, err := Repair(st, tc.ev, t0, Policy{}); !errors.Is(err, ErrRejected) {
				t.Fatalf("err = %v (actions %v), want ErrRejected", err, rkinds(got))
			}
		})
	}
}

// poolOf makes pool a3u a pool of size running static nodes (generation 1,
// VMs flexvm-a3u-<i>-g1), the first `repairing` of them in host repair.
func poolOf(t *testing.T, size, repairing int) *model.State {
	t.Helper()
	st := reservationBound(t)
	p := st.Pools["a3u"]
	p.MinNodes, p.MaxNodes = size, size
	for i := 0; i < size; i++ {
		name := model.NodeName("flexvm", "a3u", i)
		n := &model.Node{Name: name, Pool: "a3u", Index: i, Kind: model.NodeStatic, Generation: 1, Phase: model.PhaseRunning,
			VMName: model.VMName(name, 1), VMID: fmt.Sprint(100 + i), TerminationTime: t0.Add(farEnd), Registered: true}
		if i < repairing {
			n.Repair, n.RepairSince = model.RepairHost, t0.Add(-time.Duration(repairing-i)*time.Minute)
		}
		st.Nodes[name] = n
	}
	return st
}

func TestRepairBudget(t *testing.T) {
	tests := []struct {
		name        string
		size, busy  int
		prepare     func(st *model.State)
		pol         Policy
		node        string
		wantBlocked bool
		wantReason  string
	}{
		{name: "a one-node pool can always repair its node (the floor)", size: 1, node: "flexvm-a3u-0"},
		{name: "a two-node pool with one repair under way: the floor of 1 is used, blocked", size: 2, busy: 1, node: "flexvm-a3u-1",
			wantBlocked: true, wantReason: "1 of pool a3u's 2 serving nodes are under repair, the budget is 1"},
		{name: "a floor of 2 lets a two-node pool repair both", size: 2, busy: 1, node: "flexvm-a3u-1", pol: Policy{RepairMinBudget: 2}},
		{name: "20 nodes, 3 under repair: 20 % allows a 4th", size: 20, busy: 3, node: "flexvm-a3u-10"},
		{name: "20 nodes, 4 under repair: 20 % is used up, blocked", size: 20, busy: 4, node: "flexvm-a3u-10",
			wantBlocked: true, wantReason: "4 of pool a3u's 20 serving nodes are under repair, the budget is 4 (max(1, ⌊0.2 × 20⌋))"},
		{name: "20 nodes, 4 under repair, half may be unhealthy", size: 20, busy: 4, node: "flexvm-a3u-10", pol: Policy{RepairMaxUnhealthy: 0.5}},
		{name: "nodes blocked or drained for diagnosis do not count", size: 20, busy: 3, node: "flexvm-a3u-10",
			prepare: func(st *model.State) {
				st.Nodes["flexvm-a3u-5"].Repair = model.RepairBlocked
				st.Nodes["flexvm-a3u-6"].Repair = model.RepairDiagnosis
			}},
		{name: "nodes awaiting their drain count", size: 20, busy: 3, node: "flexvm-a3u-10", wantBlocked: true,
			prepare:    func(st *model.State) { st.Nodes["flexvm-a3u-5"].Repair = model.RepairAwaitDrain },
			wantReason: "4 of pool a3u's 20 serving nodes are under repair"},
		{name: "a node under repair whose VM is gone does not count", size: 21, busy: 4, node: "flexvm-a3u-10",
			prepare: func(st *model.State) { st.Nodes["flexvm-a3u-0"].Phase = model.PhaseReleased }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := poolOf(t, tc.size, tc.busy)
			if tc.prepare != nil {
				tc.prepare(st)
			}
			gen := st.Nodes[tc.node].Generation
			got, err := Repair(st, fail(tc.node, gen, "", "", true), t0, tc.pol)
			if err != nil {
				t.Fatal(err)
			}
			n := lastNode(t, got, tc.node)
			_, repaired := find[ReportHostAsFaulty](got)
			alert, alerted := find[Alert](got)
			metric, _ := find[Metric](got)
			if !tc.wantBlocked {
				// The repair starts: it waits for Slurm to confirm the drain.
				if n.Repair != model.RepairAwaitDrain || repaired || alerted {
					t.Fatalf("not blocked: repair %q, host repair %v, alert %v; actions %v", n.Repair, repaired, alerted, rkinds(got))
				}
				return
			}
			want := []string{"Slurm:drain:" + tc.node, "PutNode:" + tc.node + "/running/blocked", "Alert:a3u", "Metric:repair_blocked"}
			if d := cmp.Diff(want, rkinds(got)); d != "" {
				t.Fatalf("blocked repair (-want +got):\n%s", d)
			}
			if !strings.Contains(alert.Reason, tc.wantReason) || alert.Node != tc.node {
				t.Errorf("alert %q on %s, want it to say %q", alert.Reason, alert.Node, tc.wantReason)
			}
			if metric.Labels["pool"] != "a3u" || !strings.Contains(metric.Reason, tc.wantReason) {
				t.Errorf("metric %+v", metric)
			}
			if !n.RepairSince.Equal(t0) {
				t.Errorf("blocked since %s, want %s", n.RepairSince, t0)
			}
		})
	}
}

// listed returns the observation of pool a3u listing the nodes' VMs as
// RUNNING, started at t0 - 1h, with overrides by VM name.
func listed(st *model.State, override ...VM) Observed {
	po := ObservedPool{Listed: true, MIGExists: true}
	for _, n := range st.SortedNodes() {
		if n.Pool != "a3u" || !n.Phase.Serving() {
			continue
		}
		vm := VM{Name: n.VMName, ID: n.VMID, Status: "RUNNING", Created: t0.Add(-time.Hour), TerminationTime: n.TerminationTime, LastStart: t0.Add(-time.Hour)}
		for _, o := range override {
			if o.Name == vm.Name {
				vm = o
			}
		}
		po.VMs = append(po.VMs, vm)
	}
	return Observed{Pools: map[string]ObservedPool{"a3u": po}}
}

// about keeps the actions that concern node (records, commands, VMs).
func about(actions []Action, node string) []Action {
	var out []Action
	for _, a := range actions {
		switch x := a.(type) {
		case PutNode:
			if x.Node.Name != node {
				continue
			}
		case SlurmCommand:
			if len(x.Nodes) != 1 || x.Nodes[0] != node {
				continue
			}
		case DeleteVMs:
			if !strings.HasPrefix(x.VMs[0], node+"-g") {
				continue
			}
		case ReportHostAsFaulty:
			if x.Node != node {
				continue
			}
		case CreateResizeRequest:
			if !strings.Contains(strings.Join(x.VMs, ","), node+"-g") {
				continue
			}
		case Alert:
			if x.Node != node {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

func TestReconcileRepair(t *testing.T) {
	vm0 := func(status string, lastStart time.Time) VM {
		return VM{Name: "flexvm-a3u-0-g1", ID: "100", Status: status, Created: t0.Add(-time.Hour), TerminationTime: t0.Add(farEnd), LastStart: lastStart}
	}
	inRepair := func(state model.RepairState, since time.Time) func(st *model.State) {
		return func(st *model.State) {
			n := st.Nodes["flexvm-a3u-0"]
			n.Repair, n.RepairSince, n.RepairReason = state, since, "health check failed: GPU 3: Xid 79"
		}
	}
	tests := []struct {
		name    string
		prepare func(st *model.State)
		vm      VM
		slurm   map[string]string
		reason  string        // the snapshot's reason for flexvm-a3u-0
		taken   time.Duration // the snapshot's age
		at      time.Duration // after t0
		pol     Policy
		want    []string
		check   func(t *testing.T, got []Action)
	}{
		{
			name:    "host repair done: the VM restarted after the request, Slurm resumes the node",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(4*time.Minute)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"},
			at:      5 * time.Minute,
			want:    []string{"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded"},
			check: func(t *testing.T, got []Action) {
				n := lastNode(t, got, "flexvm-a3u-0")
				if n.HostRepaired != 1 || n.Repair != model.RepairNone || !n.RepairSince.IsZero() {
					t.Errorf("after the repair: host repaired %d, repair %q since %s", n.HostRepaired, n.Repair, n.RepairSince)
				}
			},
		},
		{
			name:    "host repair done within the same second as the request (no repair delay)",
			prepare: inRepair(model.RepairHost, t0.Add(123*time.Millisecond)),
			vm:      vm0("RUNNING", t0),
			at:      5 * time.Minute,
			want:    []string{"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded"},
		},
		{
			name:    "host repair done but someone else drained the node meanwhile: left drained",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(4*time.Minute)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"},
			reason:  "bad dimm: alice",
			at:      5 * time.Minute,
			want:    []string{"PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded"},
			check: func(t *testing.T, got []Action) {
				if n := lastNode(t, got, "flexvm-a3u-0"); !strings.Contains(n.Reason, "not flexslurm's") {
					t.Errorf("reason %q", n.Reason)
				}
			},
		},
		{
			name:    "host repair done; another reason in a snapshot older than the repair says nothing: resumed",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(4*time.Minute)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"},
			reason:  "bad dimm: alice",
			taken:   6 * time.Minute,
			at:      5 * time.Minute,
			want:    []string{"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded"},
		},
		{
			name:    "host repair done; another reason in a snapshot taken at the instant of the repair says nothing (ties go to the record): resumed",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(4*time.Minute)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"},
			reason:  "bad dimm: alice",
			taken:   5*time.Minute - time.Second,
			at:      5 * time.Minute,
			want:    []string{"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded"},
		},
		{
			name:    "host repair done; a reason without a drain is no drain: resumed",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(4*time.Minute)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD"},
			reason:  "Not responding",
			at:      5 * time.Minute,
			want:    []string{"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded"},
		},
		{
			name:    "host repair in progress (REPAIRING) before the timeout: nothing",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("REPAIRING", t0.Add(-time.Hour)),
			slurm:   map[string]string{"flexvm-a3u-0": "DOWN+CLOUD+DRAIN+NOT_RESPONDING"},
			at:      19 * time.Minute,
			want:    nil,
		},
		{
			name:    "host repair done, the VM stopped (automaticRestart off): started, the repair goes on",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("TERMINATED", t0.Add(-time.Hour)),
			slurm:   map[string]string{"flexvm-a3u-0": "DOWN+CLOUD+DRAIN+NOT_RESPONDING"},
			at:      12 * time.Minute,
			want:    []string{"StartVM:flexvm-a3u-0-g1"},
			check: func(t *testing.T, got []Action) {
				s, _ := find[StartVM](got)
				want := StartVM{Pool: "a3u", Node: "flexvm-a3u-0", Generation: 1, VM: "flexvm-a3u-0-g1",
					RequestID: naming.RequestID("start-instance", "us-central1-a/flexvm-a3u-0-g1")}
				s.Reason = ""
				if d := cmp.Diff(want, s); d != "" {
					t.Errorf("start (-want +got):\n%s", d)
				}
			},
		},
		{
			name:    "started after its repair: RUNNING since the start, Slurm resumes the node",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(13*time.Minute)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"},
			at:      15 * time.Minute,
			want:    []string{"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded"},
		},
		{
			name:    "still stopped past the timeout (the start did not take): replaced",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("TERMINATED", t0.Add(-time.Hour)),
			at:      20 * time.Minute,
			want: []string{"Alert:a3u", "Metric:repair_fallback", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name:    "host repair past the timeout: alert, VM deleted and replaced (static: new generation)",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("REPAIRING", t0.Add(-time.Hour)),
			at:      20 * time.Minute,
			want: []string{"Alert:a3u", "Metric:repair_fallback", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
			check: func(t *testing.T, got []Action) {
				m, _ := find[Metric](got)
				if m.Labels["reason"] != "timeout" {
					t.Errorf("fallback metric %+v", m)
				}
				if n := lastNode(t, got, "flexvm-a3u-0"); n.Repair != model.RepairNone || n.LastEnd != model.EndHealth || n.Generation != 2 {
					t.Errorf("replacement: repair %q last end %q gen %d", n.Repair, n.LastEnd, n.Generation)
				}
			},
		},
		{
			name:    "a custom repair timeout",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("REPAIRING", t0.Add(-time.Hour)),
			at:      20 * time.Minute,
			pol:     Policy{RepairTimeout: time.Hour},
			want:    nil,
		},
		{
			name:    "RUNNING on its old host after the request grace: asked again, same request id",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			at:      3 * time.Minute,
			want:    []string{"ReportHost:flexvm-a3u-0-g1"},
			check: func(t *testing.T, got []Action) {
				r, _ := find[ReportHostAsFaulty](got)
				if r.RequestID != naming.RequestID("report-host-as-faulty", "us-central1-a/flexvm-a3u-0-g1") {
					t.Errorf("request id %s is not the first request's", r.RequestID)
				}
			},
		},
		{
			name:    "RUNNING on its old host within the request grace: nothing",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			at:      time.Minute,
			want:    nil,
		},
		{
			name:    "RUNNING on its old host past the timeout: replaced",
			prepare: inRepair(model.RepairHost, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			at:      25 * time.Minute,
			want: []string{"Alert:a3u", "Metric:repair_fallback", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name:    "the VM vanished during its host repair: the table ends the generation (once the misses confirm it)",
			prepare: inRepair(model.RepairHost, t0),
			vm:      VM{},
			at:      5 * time.Minute,
			want:    []string{"PutNode:flexvm-a3u-0/running/host_repair"},
		},
		{
			name:    "awaiting the drain, a fresh snapshot shows it drained: the repair step",
			prepare: inRepair(model.RepairAwaitDrain, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"},
			at:      5 * time.Minute,
			want:    []string{"ReportHost:flexvm-a3u-0-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-0/running/host_repair"},
		},
		{
			name:    "awaiting the drain, a snapshot taken at the instant the repair began says nothing (ties go to the record): nothing",
			prepare: inRepair(model.RepairAwaitDrain, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"},
			taken:   5*time.Minute - time.Second,
			at:      5 * time.Minute,
			want:    nil,
		},
		{
			name:    "awaiting the drain, the snapshot shows it still draining: nothing",
			prepare: inRepair(model.RepairAwaitDrain, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			slurm:   map[string]string{"flexvm-a3u-0": "ALLOCATED+CLOUD+DRAIN"},
			at:      5 * time.Minute,
			want:    nil,
		},
		{
			name:    "awaiting the drain, the snapshot shows it completing: nothing",
			prepare: inRepair(model.RepairAwaitDrain, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			slurm:   map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN+COMPLETING"},
			at:      5 * time.Minute,
			want:    nil,
		},
		{
			name:    "awaiting the drain, no snapshot: nothing",
			prepare: inRepair(model.RepairAwaitDrain, t0),
			vm:      vm0("RUNNING", t0.Add(-time.Hour)),
			at:      5 * time.Minute,
			want:    nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := reservationBound(t)
			running(st, "flexvm-a3u-0", t0.Add(farEnd))
			st.Nodes["flexvm-a3u-0"].VMID = "100"
			tc.prepare(st)
			now := t0.Add(tc.at)
			if tc.slurm != nil {
				st.Slurm = slurmView(now.Add(-time.Second-tc.taken), tc.slurm)
				n := st.Slurm.Nodes["flexvm-a3u-0"]
				st.Slurm.Nodes["flexvm-a3u-0"] = slurmNode("flexvm-a3u-0", tc.reason, n.Words()...)
			}
			obs := Observed{Pools: map[string]ObservedPool{"a3u": {Listed: true, MIGExists: true}}}
			if tc.vm.Name != "" {
				obs = listed(st, tc.vm)
			}
			got := about(Reconcile(st, obs, now, tc.pol), "flexvm-a3u-0")
			if d := cmp.Diff(tc.want, rkinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestTableDoesNotFightARepair: a node in host repair whose VM is
// REPAIRING, or still RUNNING on its old host, gets nothing from the
// reconciler before the timeout, whatever Slurm shows.
func TestTableDoesNotFightARepair(t *testing.T) {
	for _, state := range []string{"IDLE+CLOUD+DRAIN", "DOWN+CLOUD+DRAIN+NOT_RESPONDING", "DOWN+CLOUD+NOT_RESPONDING", "IDLE+CLOUD", "IDLE+CLOUD+POWERED_DOWN", "ALLOCATED+CLOUD"} {
		for _, status := range []string{"REPAIRING", "RUNNING", "STAGING"} {
			for _, kind := range []model.NodeKind{model.NodeStatic, model.NodeDynamic} {
				t.Run(state+"/"+status+"/"+string(kind), func(t *testing.T) {
					st := reservationBound(t)
					running(st, "flexvm-a3u-0", t0.Add(farEnd))
					n := st.Nodes["flexvm-a3u-0"]
					n.Kind, n.Repair, n.RepairSince = kind, model.RepairHost, t0
					n.Observed, n.ObservedSince = "", time.Time{}
					now := t0.Add(time.Minute)
					st.Slurm = slurmView(now, map[string]string{"flexvm-a3u-0": state})
					obs := listed(st, VM{Name: "flexvm-a3u-0-g1", ID: "42", Status: status, Created: t0.Add(-time.Hour), TerminationTime: t0.Add(farEnd), LastStart: t0.Add(-time.Hour)})
					for _, passAt := range []time.Duration{time.Minute, 15 * time.Minute} {
						got := about(Reconcile(st, obs, t0.Add(passAt), Policy{RequestGrace: time.Hour}), "flexvm-a3u-0")
						if len(got) != 0 {
							t.Errorf("pass at +%s: %v", passAt, rkinds(got))
						}
					}
				})
			}
		}
	}
}

func TestBlockedRepairsStartAsTheBudgetFrees(t *testing.T) {
	// A two-node pool (budget 1): node 0 in host repair, nodes 1 then 2
	// failed and were blocked (a third node keeps node 2's budget at 1).
	st := poolOf(t, 3, 1)
	st.Nodes["flexvm-a3u-0"].RepairSince = t0
	got, err := Repair(st, fail("flexvm-a3u-2", 1, "", "", true), t0.Add(time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, got)
	got, err = Repair(st, fail("flexvm-a3u-1", 1, "", "", true), t0.Add(2*time.Minute), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, got)
	if st.Nodes["flexvm-a3u-1"].Repair != model.RepairBlocked || st.Nodes["flexvm-a3u-2"].Repair != model.RepairBlocked {
		t.Fatalf("repairs %q %q, want both blocked", st.Nodes["flexvm-a3u-1"].Repair, st.Nodes["flexvm-a3u-2"].Repair)
	}

	// Node 0 still repairing: nothing starts.
	now := t0.Add(5 * time.Minute)
	st.Slurm = slurmView(now, map[string]string{"flexvm-a3u-1": "IDLE+CLOUD+DRAIN", "flexvm-a3u-2": "IDLE+CLOUD+DRAIN", "flexvm-a3u-0": "IDLE+CLOUD+DRAIN"})
	obs := listed(st, VM{Name: "flexvm-a3u-0-g1", ID: "100", Status: "REPAIRING", Created: t0.Add(-time.Hour), TerminationTime: t0.Add(farEnd)})
	if got := Reconcile(st, obs, now, Policy{}); len(got) != 0 {
		t.Fatalf("with the budget used: %v", rkinds(got))
	}

	// Node 0 runs again: its repair ends, and the oldest blocked repair
	// (node 2, blocked first) starts in the same pass; node 1 still waits.
	obs = listed(st, VM{Name: "flexvm-a3u-0-g1", ID: "100", Status: "RUNNING", Created: t0.Add(-time.Hour), TerminationTime: t0.Add(farEnd), LastStart: t0.Add(4 * time.Minute)})
	got = Reconcile(st, obs, now, Policy{})
	want := []string{"Slurm:resume:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running", "Metric:repair_succeeded",
		"ReportHost:flexvm-a3u-2-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-2/running/host_repair"}
	if d := cmp.Diff(want, rkinds(got)); d != "" {
		t.Fatalf("budget freed (-want +got):\n%s", d)
	}
	Apply(st, got)

	// Node 2's repair succeeds later: node 1 starts, waiting for its drain
	// when the snapshot predates its blocking... here it is drained.
	now = t0.Add(10 * time.Minute)
	st.Slurm.TakenAt = now
	obs = listed(st, VM{Name: "flexvm-a3u-2-g1", ID: "102", Status: "RUNNING", Created: t0.Add(-time.Hour), TerminationTime: t0.Add(farEnd), LastStart: t0.Add(7 * time.Minute)})
	got = Reconcile(st, obs, now, Policy{})
	want = []string{"Slurm:resume:flexvm-a3u-2", "PutNode:flexvm-a3u-2/running", "Metric:repair_succeeded",
		"ReportHost:flexvm-a3u-1-g1", "Metric:host_repairs", "PutNode:flexvm-a3u-1/running/host_repair"}
	if d := cmp.Diff(want, rkinds(got)); d != "" {
		t.Fatalf("second release (-want +got):\n%s", d)
	}
}

func TestBlockedRepairWaitsForTheDrain(t *testing.T) {
	st := poolOf(t, 2, 0)
	n := st.Nodes["flexvm-a3u-1"]
	n.Repair, n.RepairSince = model.RepairBlocked, t0
	// A snapshot older than the block says nothing: the repair starts and
	// waits for the drain.
	st.Slurm = slurmView(t0.Add(-time.Minute), map[string]string{"flexvm-a3u-1": "IDLE+CLOUD+DRAIN"})
	got := Reconcile(st, listed(st), t0.Add(2*time.Minute), Policy{})
	if d := cmp.Diff([]string{"PutNode:flexvm-a3u-1/running/await_drain"}, rkinds(got)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if n := lastNode(t, got, "flexvm-a3u-1"); !n.RepairSince.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("await_drain since %s", n.RepairSince)
	}
}

func TestRepairedDynamicNodeWithoutJobIsDeletedAfterTheDrain(t *testing.T) {
	st := reservationBound(t)
	running(st, "flexvm-a3u-0", t0.Add(farEnd))
	dynRunning(t, st, model.JobRunning)
	got, err := Repair(st, fail("flexvm-a3u-1", 1, "7", "running", false), t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	Apply(st, got)
	st.Jobs["7"].State = model.JobFinished
	now := t0.Add(30 * time.Minute)
	st.Slurm = slurmView(now, map[string]string{"flexvm-a3u-1": "IDLE+CLOUD+DRAIN", "flexvm-a3u-0": "IDLE+CLOUD"})
	got = about(Reconcile(st, listed(st), now, Policy{}), "flexvm-a3u-1")
	want := []string{"DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1", "PutNode:flexvm-a3u-1/deleting"}
	if d := cmp.Diff(want, rkinds(got)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestHostRepairFailed(t *testing.T) {
	hostRepair := func(st *model.State, node, job string) {
		n := st.Nodes[node]
		n.Repair, n.RepairSince, n.RepairJob = model.RepairHost, t0, job
	}
	tests := []struct {
		name    string
		prepare func(st *model.State)
		node    string
		gen     int64
		want    []string
		wantErr bool
	}{
		{
			name:    "static node: VM deleted, new generation at once",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)); hostRepair(st, "flexvm-a3u-0", "") },
			node:    "flexvm-a3u-0", gen: 1,
			want: []string{"Alert:a3u", "Metric:repair_fallback", "DeleteVMs:flexvm-a3u-0-g1", "Slurm:reservation_delete:flexvm-a3u-0",
				"PutNode:flexvm-a3u-0/requested", "CreateResizeRequest:rr-flexvm-a3u-0-g2=flexvm-a3u-0-g2"},
		},
		{
			name:    "dynamic node whose job still waits: replaced for it at once",
			prepare: func(st *model.State) { dynRunning(t, st, model.JobPending); hostRepair(st, "flexvm-a3u-1", "7") },
			node:    "flexvm-a3u-1", gen: 1,
			want: []string{"Alert:a3u", "Metric:repair_fallback", "DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1",
				"PutNode:flexvm-a3u-1/released", "PutNode:flexvm-a3u-1/requested", "PutJob:7/pending",
				"CreateResizeRequest:rr-flexvm-a3u-j7-g2=flexvm-a3u-1-g2"},
		},
		{
			name:    "dynamic node whose job got other nodes meanwhile: deleted, not replaced",
			prepare: func(st *model.State) { dynRunning(t, st, model.JobRunning); hostRepair(st, "flexvm-a3u-1", "7") },
			node:    "flexvm-a3u-1", gen: 1,
			want: []string{"Alert:a3u", "Metric:repair_fallback", "DeleteVMs:flexvm-a3u-1-g1", "Slurm:reservation_delete:flexvm-a3u-1",
				"PutNode:flexvm-a3u-1/deleting"},
		},
		{
			name:    "a node whose host repair already ended is left alone",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)) },
			node:    "flexvm-a3u-0", gen: 1, wantErr: true,
		},
		{
			name:    "another generation is left alone",
			prepare: func(st *model.State) { running(st, "flexvm-a3u-0", t0.Add(farEnd)); hostRepair(st, "flexvm-a3u-0", "") },
			node:    "flexvm-a3u-0", gen: 2, wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := reservationBound(t)
			tc.prepare(st)
			got, err := HostRepairFailed(st, tc.node, tc.gen, "UNSUPPORTED_OPERATION", t0.Add(time.Minute), Policy{})
			if tc.wantErr {
				if !errors.Is(err, ErrRejected) {
					t.Fatalf("err = %v, want ErrRejected", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, rkinds(got)); d != "" {
				t.Errorf("actions (-want +got):\n%s", d)
			}
			if a, _ := find[Alert](got); !strings.Contains(a.Reason, "UNSUPPORTED_OPERATION") {
				t.Errorf("alert %q does not name the error", a.Reason)
			}
			if m, _ := find[Metric](got); m.Labels["reason"] != "refused" {
				t.Errorf("metric %+v", m)
			}
		})
	}
}

func TestInconclusive(t *testing.T) {
	type step struct {
		at   time.Duration
		want []string
	}
	drain := []string{"Metric:health_inconclusive", "Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/diagnosis", "Alert:a3u", "Metric:repair_diagnosis"}
	record := []string{"Metric:health_inconclusive", "PutNode:flexvm-a3u-0/running"}
	recordDiag := []string{"Metric:health_inconclusive", "PutNode:flexvm-a3u-0/running/diagnosis"}
	tests := []struct {
		name    string
		pol     Policy
		prepare func(st *model.State)
		steps   []step
	}{
		{name: "once: recorded only", steps: []step{{0, record}}},
		{name: "twice within the window: drained for diagnosis, never deleted", steps: []step{{0, record}, {23 * time.Hour, drain}}},
		{name: "a third in the same window: recorded", steps: []step{{0, record}, {time.Hour, drain}, {2 * time.Hour, recordDiag}}},
		{name: "twice, the second outside the window: counted again from 1", steps: []step{{0, record}, {24 * time.Hour, record}, {25 * time.Hour, drain}}},
		{name: "escalation disabled (negative limit)", pol: Policy{InconclusiveLimit: -1}, steps: []step{{0, record}, {time.Minute, record}, {2 * time.Minute, record}}},
		{name: "a limit of 3 and a window of 1h", pol: Policy{InconclusiveLimit: 3, InconclusiveWindow: time.Hour},
			steps: []step{{0, record}, {30 * time.Minute, record}, {59 * time.Minute, drain}}},
		{name: "a node under FAIL repair: recorded only",
			prepare: func(st *model.State) {
				st.Nodes["flexvm-a3u-0"].Repair, st.Nodes["flexvm-a3u-0"].RepairSince = model.RepairAwaitDrain, t0
			},
			steps: []step{{0, []string{"Metric:health_inconclusive", "PutNode:flexvm-a3u-0/running/await_drain"}},
				{time.Minute, []string{"Metric:health_inconclusive", "PutNode:flexvm-a3u-0/running/await_drain"}}}},
		{name: "after diagnosis, a new window drains again",
			steps: []step{{0, record}, {time.Hour, drain}, {30 * time.Hour, recordDiag}, {31 * time.Hour, drain}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := reservationBound(t)
			running(st, "flexvm-a3u-0", t0.Add(farEnd))
			if tc.prepare != nil {
				tc.prepare(st)
			}
			var drains []string
			for i, s := range tc.steps {
				got, err := Repair(st, inconclusiveEv("flexvm-a3u-0", 1), t0.Add(s.at), tc.pol)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(s.want, rkinds(got)); d != "" {
					t.Fatalf("step %d (+%s) (-want +got):\n%s", i, s.at, d)
				}
				if c, ok := find[SlurmCommand](got); ok {
					drains = append(drains, c.ID)
					if r := event.RenderReason(c.Command, c.Reason); !strings.HasPrefix(r, "flexslurm: health check inconclusive ") || !strings.Contains(r, "drained for diagnosis (flexvm-a3u-0-g1)") {
						t.Errorf("drain reason %q", r)
					}
				}
				Apply(st, got)
			}
			if len(drains) == 2 && drains[0] == drains[1] {
				t.Error("the second diagnosis drain has the first one's id: the agent would skip it")
			}
		})
	}
	// The drain reason says how often and within what.
	st := reservationBound(t)
	running(st, "flexvm-a3u-0", t0.Add(farEnd))
	got, _ := Repair(st, inconclusiveEv("flexvm-a3u-0", 1), t0, Policy{InconclusiveLimit: 1})
	if c, _ := find[SlurmCommand](got); event.RenderReason(c.Command, c.Reason) != "flexslurm: health check inconclusive 1 times within 24h: drained for diagnosis (flexvm-a3u-0-g1)" {
		t.Errorf("drain reason %q", c.Reason)
	}
}

// TestRepairLifecycle walks one static node from its FAIL to a repaired VM,
// then a second FAIL on the same VM to its replacement.
func TestRepairLifecycle(t *testing.T) {
	st := reservationBound(t)
	running(st, "flexvm-a3u-0", t0.Add(farEnd))
	st.Nodes["flexvm-a3u-0"].VMID = "100"
	step := func(acts []Action, err error) []Action {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		Apply(st, acts)
		return acts
	}
	step(Repair(st, fail("flexvm-a3u-0", 1, "", "", false), t0, Policy{}))
	now := t0.Add(5 * time.Minute)
	st.Slurm = slurmView(now, map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"})
	acts := step(Reconcile(st, listed(st), now, Policy{}), nil)
	if _, ok := find[ReportHostAsFaulty](acts); !ok {
		t.Fatalf("drained: no host repair: %v", rkinds(acts))
	}
	now = now.Add(5 * time.Minute)
	st.Slurm.TakenAt = now
	acts = step(Reconcile(st, listed(st, VM{Name: "flexvm-a3u-0-g1", ID: "100", Status: "RUNNING", Created: t0.Add(-time.Hour),
		TerminationTime: t0.Add(farEnd), LastStart: now.Add(-time.Minute)}), now, Policy{}), nil)
	if c, ok := find[SlurmCommand](acts); !ok || c.Command != event.SlurmResume {
		t.Fatalf("repaired: %v", rkinds(acts))
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.HostRepaired != 1 || n.Repair != model.RepairNone || n.Generation != 1 {
		t.Fatalf("after the host repair: %+v", n)
	}
	// A second fault on the same VM: replaced, not repaired again.
	acts = failAndConfirm(t, st, fail("flexvm-a3u-0", 1, "", "", true), now.Add(time.Hour), Policy{})
	if _, ok := find[ReportHostAsFaulty](acts); ok {
		t.Fatalf("a second host repair of one VM: %v", rkinds(acts))
	}
	if n := st.Nodes["flexvm-a3u-0"]; n.Generation != 2 || n.Phase != model.PhaseRequested || n.HostRepaired != 1 || n.Repair != model.RepairNone {
		t.Fatalf("after the second fault: %+v", n)
	}
}

func TestRepairDecisionsDoNotMutateTheirInput(t *testing.T) {
	st := poolOf(t, 3, 1)
	st.Slurm = slurmView(t0, map[string]string{"flexvm-a3u-1": "IDLE+CLOUD+DRAIN"})
	st.Slurm.Jobs = []model.SlurmJob{}
	before := st.Clone()
	if _, err := Repair(st, fail("flexvm-a3u-1", 1, "", "", true), t0, Policy{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Repair(st, inconclusiveEv("flexvm-a3u-2", 1), t0, Policy{InconclusiveLimit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := HostRepairFailed(st, "flexvm-a3u-0", 1, "invalid", t0, Policy{}); err != nil {
		t.Fatal(err)
	}
	Reconcile(st, listed(st), t0.Add(time.Hour), Policy{})
	if d := cmp.Diff(before, st); d != "" {
		t.Errorf("input state changed (-before +after):\n%s", d)
	}
}

func TestSlurmDrained(t *testing.T) {
	for state, want := range map[string]bool{
		"IDLE+CLOUD+DRAIN":                true,
		"DOWN+CLOUD+DRAIN+NOT_RESPONDING": true,
		"IDLE+CLOUD+DRAIN+POWERED_DOWN":   true,
		"ALLOCATED+CLOUD+DRAIN":           false,
		"MIXED+DRAIN":                     false,
		"IDLE+DRAIN+COMPLETING":           false,
		"IDLE+CLOUD":                      false,
		"DRAINED":                         true,
		"DRAINING":                        false,
	} {
		v := slurmView(t0, map[string]string{"n": state})
		if got := v.Nodes["n"].Drained(); got != want {
			t.Errorf("%s: drained %v, want %v", state, got, want)
		}
	}
}

func TestHostRepairSupported(t *testing.T) {
	tests := []struct {
		model, machine string
		want           bool
		whyNot         string
	}{
		{"RESERVATION", "a3-ultragpu-8g", true, ""},
		{"RESERVATION", "a4-highgpu-8g", true, ""},
		{"RESERVATION", "a4x-highgpu-4g", true, ""},
		{"RESERVATION", "a4x-maxgpu-4g-metal", true, ""},
		{"RESERVATION", "A3-UltraGPU-8g", true, ""},
		{"FLEX_START", "a3-ultragpu-8g", false, "provisioning model FLEX_START is not reservation-bound"},
		{"SPOT", "a4-highgpu-8g", false, "provisioning model SPOT is not reservation-bound"},
		{"ON_DEMAND", "a4-highgpu-8g", false, "provisioning model ON_DEMAND is not reservation-bound"},
		{"", "a3-ultragpu-8g", false, "provisioning model unknown is not reservation-bound"},
		{"RESERVATION", "a3-megagpu-8g", true, ""},
		{"RESERVATION", "a3-highgpu-8g", true, ""},
		{"RESERVATION", "A3-HighGPU-8G", true, ""},
		{"RESERVATION", "a3-highgpu-4g", false, `machine type "a3-highgpu-4g" is not of an A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs) type`},
		{"RESERVATION", "a3-highgpu-1g", false, `machine type "a3-highgpu-1g" is not of an A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs) type`},
		{"RESERVATION", "a3-edgegpu-8g", false, `machine type "a3-edgegpu-8g" is not of an A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs) type`},
		{"RESERVATION", "a2-ultragpu-8g", false, `machine type "a2-ultragpu-8g" is not of an A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs) type`},
		{"FLEX_START", "a3-megagpu-8g", false, "provisioning model FLEX_START is not reservation-bound"},
		{"RESERVATION", "a3-ultragpu", false, `machine type "a3-ultragpu" is not of an A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs) type`},
		{"RESERVATION", "a3-highgpu", false, `machine type "a3-highgpu" is not of an A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs) type`},
		{"RESERVATION", "", false, `machine type "" is not of an A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs) type`},
	}
	for _, tc := range tests {
		got, whyNot := HostRepairSupported(tc.model, tc.machine)
		if got != tc.want || whyNot != tc.whyNot {
			t.Errorf("HostRepairSupported(%q, %q) = %v, %q; want %v, %q", tc.model, tc.machine, got, whyNot, tc.want, tc.whyNot)
		}
	}
}

// TestFlexStartFailIsReplacedNotHostRepaired: the example's Flex-Start
// pool (a3-ultragpu-8g, FLEX_START) never asks Compute Engine for a host
// repair, which it refuses for Flex-Start VMs: a failed GPU drains the
// node, deletes its VM and replaces it, within the same repair budget.
func TestFlexStartFailIsReplacedNotHostRepaired(t *testing.T) {
	st, _ := applied(t)
	if p := st.Pools["a3u"]; p.ProvisioningModel != "FLEX_START" || p.MachineType != "a3-ultragpu-8g" {
		t.Fatalf("pool a3u records %q %q, want FLEX_START a3-ultragpu-8g from the spec", p.ProvisioningModel, p.MachineType)
	}
	running(st, "flexvm-a3u-0", t0.Add(farEnd))

	got, err := Repair(st, fail("flexvm-a3u-0", 1, "", "", false), t0, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Slurm:drain:flexvm-a3u-0", "PutNode:flexvm-a3u-0/running/await_drain"}
	if d := cmp.Diff(want, rkinds(got)); d != "" {
		t.Fatalf("FAIL, not drained yet (-want +got):\n%s", d)
	}
	Apply(st, got)

	st.Slurm = slurmView(t0.Add(time.Minute), map[string]string{"flexvm-a3u-0": "IDLE+CLOUD+DRAIN"})
	got = about(Reconcile(st, listed(st), t0.Add(time.Minute), Policy{}), "flexvm-a3u-0")
	if _, ok := find[ReportHostAsFaulty](got); ok {
		t.Fatalf("a Flex-Start VM was host-repaired: %v", rkinds(got))
	}
	// The VM is the only one of its request's MIG: deleted with it.
	del, ok := find[DeleteMIG](got)
	if !ok || len(del.VMs) != 1 || del.VMs[0] != "flexvm-a3u-0-g1" || del.MIG != st.Nodes["flexvm-a3u-0"].MIG {
		t.Fatalf("drained Flex-Start node: want its VM deleted with its MIG, got %v", rkinds(got))
	}
	if !strings.Contains(del.Reason, "no host repair (provisioning model FLEX_START is not reservation-bound)") {
		t.Errorf("delete reason %q does not say why there is no host repair", del.Reason)
	}
	if _, ok := find[CreateResizeRequest](got); !ok {
		t.Errorf("static Flex-Start node not replaced: %v", rkinds(got))
	}
	n := lastNode(t, got, "flexvm-a3u-0")
	if n.Generation != 2 || n.Phase != model.PhaseRequested || n.Repair != model.RepairNone {
		t.Errorf("node after replacement: gen %d phase %s repair %q", n.Generation, n.Phase, n.Repair)
	}
}
