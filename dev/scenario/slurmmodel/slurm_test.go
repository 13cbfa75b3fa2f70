package slurmmodel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// The example cluster: flex-start pool a3u of min 1, max 3 (flexvm-a3u-0
// static, -1 and -2 dynamic), partition a3u, 7-day maximum run duration.
const (
	static = "flexvm-a3u-0"
	node1  = "flexvm-a3u-1"
	node2  = "flexvm-a3u-2"
)

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

func exampleCluster(t *testing.T) *spec.Cluster {
	t.Helper()
	c, err := spec.Load("../../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder keeps what the model published, as "topic type nodes|job".
type recorder struct{ events []string }

func (r *recorder) publish(topic string, payload any) {
	switch p := payload.(type) {
	case event.Node:
		r.events = append(r.events, fmt.Sprintf("%s %s %s", topic, p.Type, strings.Join(p.Nodes, ",")))
	case event.Job:
		e := fmt.Sprintf("%s %s job %s %s", topic, p.Type, p.JobID, strings.Join(p.Nodes, ","))
		if p.NodesUp {
			e += " (up)"
		}
		r.events = append(r.events, e)
	default:
		r.events = append(r.events, fmt.Sprintf("%s %T", topic, payload))
	}
}

func (r *recorder) take() []string {
	out := r.events
	r.events = nil
	return out
}

func newModel(t *testing.T, cfg lang.Slurm) (*Model, *recorder) {
	t.Helper()
	rec := &recorder{}
	return New(cfg, exampleCluster(t), t0, rec.publish, func(string, ...any) {}), rec
}

func state(t *testing.T, m *Model, name string) string {
	t.Helper()
	n, ok := m.Node(name)
	if !ok {
		return "unknown"
	}
	if n.Reason() != "" {
		return n.State() + " (" + n.Reason() + ")"
	}
	return n.State()
}

// running is a VM that has run long enough for slurmd to have registered.
func running(name string) VM {
	return VM{Name: name + "-g1", Zone: "us-central1-a", Status: "RUNNING", Created: t0.Add(-time.Hour)}
}

// TestApply: each Slurm command flexslurm publishes moves a node as
// scontrol would.
func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name     string
		simulate bool
		from     string // node1's state before the command
		cmd      Command
		known    bool
		want     string   // node1's state after, with its reason
		events   []string // what the model published
	}{
		{name: "drain", from: "IDLE+CLOUD", cmd: Command{Command: event.SlurmDrain, Reason: "flexslurm: end of life"}, known: true,
			want: "IDLE+CLOUD+DRAIN (flexslurm: end of life)"},
		{name: "down", from: "IDLE+CLOUD", cmd: Command{Command: event.SlurmDown, Reason: "flexslurm: VM gone"}, known: true,
			want: "DOWN+CLOUD (flexslurm: VM gone)"},
		{name: "resume takes down~ to idle~", from: "DOWN+CLOUD+DRAIN+NOT_RESPONDING+POWERED_DOWN", cmd: Command{Command: event.SlurmResume}, known: true,
			want: "IDLE+CLOUD+POWERED_DOWN"},
		{name: "resume takes DOWN to IDLE", from: "DOWN+CLOUD", cmd: Command{Command: event.SlurmResume}, known: true,
			want: "IDLE+CLOUD"},
		{name: "resume lifts DRAIN and FAIL", from: "IDLE+CLOUD+DRAIN+FAIL", cmd: Command{Command: event.SlurmResume}, known: true,
			want: "IDLE+CLOUD"},
		{name: "power_up starts a resume", from: "IDLE+CLOUD+POWERED_DOWN", cmd: Command{Command: event.SlurmPowerUp}, known: true,
			want: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP"},
		{name: "power_up of a node up changes nothing", from: "IDLE+CLOUD", cmd: Command{Command: event.SlurmPowerUp}, known: true,
			want: "IDLE+CLOUD"},
		{name: "power_down runs SuspendProgram", simulate: true, from: "IDLE+CLOUD", cmd: Command{Command: event.SlurmPowerDown}, known: true,
			want: "IDLE+CLOUD+POWERED_DOWN", events: []string{config.TopicJobs + " node.suspend " + node1}},
		{name: "power_down_force of a node powering up", simulate: true, from: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP", cmd: Command{Command: event.SlurmPowerDownForce}, known: true,
			want: "IDLE+CLOUD+POWERED_DOWN", events: []string{config.TopicJobs + " node.suspend " + node1}},
		{name: "power_down without simulate publishes nothing", from: "IDLE+CLOUD", cmd: Command{Command: event.SlurmPowerDown}, known: true,
			want: "IDLE+CLOUD+POWERED_DOWN"},
		{name: "update_address changes no state", from: "IDLE+CLOUD", cmd: Command{Command: event.SlurmUpdateAddress}, known: true,
			want: "IDLE+CLOUD"},
		{name: "unknown command", from: "IDLE+CLOUD", cmd: Command{Command: "reboot"}, known: false,
			want: "IDLE+CLOUD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rec := newModel(t, lang.Slurm{Simulate: tc.simulate})
			if err := m.SetNode(t0, lang.SnapshotNode{Name: node1, State: tc.from}); err != nil {
				t.Fatal(err)
			}
			rec.take()
			cmd := tc.cmd
			cmd.Nodes = []string{node1}
			if got := m.Apply(t0, cmd); got != tc.known {
				t.Errorf("Apply(%s) = %t, want %t", cmd.Command, got, tc.known)
			}
			if got := state(t, m, node1); got != tc.want {
				t.Errorf("%s after %s = %q, want %q", tc.from, cmd.Command, got, tc.want)
			}
			if d := cmp.Diff(tc.events, rec.take()); d != "" {
				t.Errorf("published (-want +got):\n%s", d)
			}
		})
	}
}

// TestApplyToUnknownNode: a command naming a node Slurm does not have
// changes nothing and creates no node.
func TestApplyToUnknownNode(t *testing.T) {
	m, _ := newModel(t, lang.Slurm{})
	if !m.Apply(t0, Command{Command: event.SlurmDrain, Nodes: []string{"flexvm-zz-9"}}) {
		t.Error("drain of an unknown node reported as an unknown command")
	}
	if _, ok := m.Node("flexvm-zz-9"); ok {
		t.Error("the command created the node")
	}
}

// TestUpdate: how the model reacts to time and VMs.
func TestUpdate(t *testing.T) {
	cfg := lang.Slurm{Simulate: true, BootTime: lang.Duration(2 * time.Minute), ResumeTimeout: lang.Duration(30 * time.Minute),
		SlurmdTimeout: lang.Duration(5 * time.Minute)}
	for _, tc := range []struct {
		name   string
		from   string
		reason string
		vm     *VM           // node1's VM, if any
		at     time.Duration // the updates, after t0
		want   string
		events []string
	}{
		{name: "registers once its VM has run for BootTime", from: "ALLOCATED+CLOUD+NOT_RESPONDING+POWERING_UP",
			vm: &VM{Name: node1 + "-g1", Status: "RUNNING", Created: t0.Add(-2 * time.Minute)}, want: "ALLOCATED+CLOUD"},
		{name: "not before BootTime", from: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP",
			vm: &VM{Name: node1 + "-g1", Status: "RUNNING", Created: t0.Add(-time.Minute)}, want: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP"},
		{name: "not while its VM is provisioning", from: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP",
			vm: &VM{Name: node1 + "-g1", Status: "PROVISIONING", Created: t0.Add(-time.Hour)}, want: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP"},
		{name: "ResumeTimeout reached", from: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP", at: 30 * time.Minute,
			want:   "DOWN+CLOUD+NOT_RESPONDING+POWERED_DOWN (ResumeTimeout reached)",
			events: []string{config.TopicJobs + " node.resume_failed " + node1}},
		{name: "still within ResumeTimeout", from: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP", at: 29 * time.Minute,
			want: "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP"},
		{name: "a node up without a VM stops responding after SlurmdTimeout", from: "IDLE+CLOUD", at: 5 * time.Minute,
			want: "DOWN+CLOUD+NOT_RESPONDING (Not responding)"},
		{name: "a drain's reason is kept when it stops responding", from: "IDLE+CLOUD+DRAIN", reason: "flexslurm: end of life", at: 5 * time.Minute,
			want: "DOWN+CLOUD+DRAIN+NOT_RESPONDING (flexslurm: end of life)"},
		{name: "returns to service when a VM registers", from: "DOWN+CLOUD+NOT_RESPONDING", reason: "Not responding", vm: ptr(running(node1)),
			want: "IDLE+CLOUD"},
		{name: "a powered-down node without a VM is left alone", from: "IDLE+CLOUD+POWERED_DOWN", at: time.Hour,
			want: "IDLE+CLOUD+POWERED_DOWN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rec := newModel(t, cfg)
			if err := m.SetNode(t0, lang.SnapshotNode{Name: node1, State: tc.from, Reason: tc.reason}); err != nil {
				t.Fatal(err)
			}
			vms := map[string]VM{static: running(static)}
			if tc.vm != nil {
				vms[node1] = *tc.vm
			}
			m.Update(t0, vms)
			if tc.at > 0 {
				m.Update(t0.Add(tc.at), vms)
			}
			if got := state(t, m, node1); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.from, got, tc.want)
			}
			var got []string
			for _, e := range rec.take() {
				if strings.Contains(e, node1) {
					got = append(got, e)
				}
			}
			if d := cmp.Diff(tc.events, got); d != "" {
				t.Errorf("published about %s (-want +got):\n%s", node1, d)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestJobLifecycle: a job is allocated nodes (ResumeProgram for those
// powered down), runs once they all registered, ends after its runtime, and
// a job running on a node set DOWN is requeued, eligible 121 s later.
func TestJobLifecycle(t *testing.T) {
	m, rec := newModel(t, lang.Slurm{Simulate: true})
	if got := state(t, m, static); got != "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP" {
		t.Errorf("a static node at start = %q, want it resumed, waiting for its VM", got)
	}
	if err := m.Submit(t0, lang.SubmitStep{ID: "7", Nodes: 2, Runtime: lang.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	m.Update(t0, nil)
	// The static node powering up is taken before a powered-down one.
	if d := cmp.Diff([]string{config.TopicJobs + " job.pending job 7 " + static + "," + node1}, rec.take()); d != "" {
		t.Errorf("allocation (-want +got):\n%s", d)
	}
	j, _ := m.Job("7")
	if j.State() != "CONFIGURING" {
		t.Errorf("job 7 = %s, want CONFIGURING", j.State())
	}
	vms := map[string]VM{static: running(static), node1: running(node1)}
	at := t0.Add(10 * time.Minute)
	m.Update(at, vms)
	if d := cmp.Diff([]string{config.TopicJobs + " job.started job 7 " + static + "," + node1}, rec.take()); d != "" {
		t.Errorf("start (-want +got):\n%s", d)
	}
	if got := state(t, m, node1); got != "ALLOCATED+CLOUD" {
		t.Errorf("node1 running job 7 = %q", got)
	}
	if due, ok := m.NextDue(at, vms); !ok || !due.Equal(at.Add(time.Hour)) {
		t.Errorf("NextDue = %s, %t; want the job's end %s", due, ok, at.Add(time.Hour))
	}
	m.Apply(at.Add(time.Minute), Command{Command: event.SlurmDown, Nodes: []string{node1}, Reason: "test"})
	if j.State() != "PENDING" || j.Restarts() != 1 {
		t.Errorf("job 7 after its node went DOWN = %s, %d restarts; want PENDING, 1", j.State(), j.Restarts())
	}
	if got := state(t, m, static); got != "IDLE+CLOUD" {
		t.Errorf("the job's other node = %q, want freed", got)
	}
	if due, _ := m.NextDue(at.Add(time.Minute), vms); !due.Equal(at.Add(time.Minute + 121*time.Second)) {
		t.Errorf("NextDue = %s, want the requeued job eligible 121 s later", due)
	}
	rec.take()
	m.Update(at.Add(time.Minute+121*time.Second), vms)
	// node1 is DOWN: the job takes the static node and powers up node2.
	if d := cmp.Diff([]string{config.TopicJobs + " job.pending job 7 " + static + "," + node2}, rec.take()); d != "" {
		t.Errorf("reallocation (-want +got):\n%s", d)
	}
	m.Cancel(at.Add(time.Hour), "7")
	if j.State() != "CANCELLED" {
		t.Errorf("cancelled while configuring = %s, want CANCELLED", j.State())
	}
	// EpilogSlurmctld names the nodes; the job never ran there.
	if d := cmp.Diff([]string{config.TopicJobs + " job.cancelled job 7 " + static + "," + node2}, rec.take()); d != "" {
		t.Errorf("cancel (-want +got):\n%s", d)
	}
}

// TestPowerDownWaitsForTheJob: power_down of a node running a job takes
// effect when the job ends; power_down_force requeues the job first.
func TestPowerDownWaitsForTheJob(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%t", force), func(t *testing.T) {
			m, rec := newModel(t, lang.Slurm{Simulate: true})
			if err := m.Submit(t0, lang.SubmitStep{ID: "7", Nodes: 1, Runtime: lang.Duration(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			vms := map[string]VM{static: running(static)}
			m.Update(t0, vms) // allocated
			m.Update(t0, vms) // started
			rec.take()
			cmd := event.SlurmPowerDown
			if force {
				cmd = event.SlurmPowerDownForce
			}
			m.Apply(t0.Add(time.Minute), Command{Command: cmd, Nodes: []string{static}})
			j, _ := m.Job("7")
			if force {
				if j.State() != "PENDING" || state(t, m, static) != "IDLE+CLOUD+POWERED_DOWN" {
					t.Errorf("after power_down_force: job %s, node %s; want PENDING, IDLE+CLOUD+POWERED_DOWN", j.State(), state(t, m, static))
				}
				return
			}
			if j.State() != "RUNNING" || state(t, m, static) != "ALLOCATED+CLOUD" {
				t.Errorf("after power_down: job %s, node %s; want the job still RUNNING on ALLOCATED+CLOUD", j.State(), state(t, m, static))
			}
			m.Update(t0.Add(time.Hour), vms)
			if j.State() != "COMPLETED" || state(t, m, static) != "IDLE+CLOUD+POWERED_DOWN" {
				t.Errorf("at the job's end: job %s, node %s; want COMPLETED, IDLE+CLOUD+POWERED_DOWN", j.State(), state(t, m, static))
			}
			// The node is powered down as the job frees it, before the
			// job's end is reported (on its node, which was up).
			if d := cmp.Diff([]string{config.TopicJobs + " node.suspend " + static, config.TopicJobs + " job.finished job 7 " + static + " (up)"}, rec.take()); d != "" {
				t.Errorf("published (-want +got):\n%s", d)
			}
		})
	}
}

// TestSubmitRefusals: what sbatch refuses.
func TestSubmitRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    lang.Slurm
		submit lang.SubmitStep
		want   string // the job's state, or the error
	}{
		{name: "within the limits", cfg: lang.Slurm{Simulate: true, PartitionLimits: true},
			submit: lang.SubmitStep{ID: "1", Nodes: 3, TimeLimit: lang.Duration(7 * 24 * time.Hour)}, want: "PENDING"},
		{name: "beyond MaxTime", cfg: lang.Slurm{Simulate: true, PartitionLimits: true},
			submit: lang.SubmitStep{ID: "1", Nodes: 1, TimeLimit: lang.Duration(7*24*time.Hour + time.Minute)}, want: "REFUSED"},
		{name: "beyond MaxNodes", cfg: lang.Slurm{PartitionLimits: true},
			submit: lang.SubmitStep{ID: "1", Nodes: 4}, want: "REFUSED"},
		{name: "no time limit check without partition limits", cfg: lang.Slurm{Simulate: true},
			submit: lang.SubmitStep{ID: "1", Nodes: 1, TimeLimit: lang.Duration(30 * 24 * time.Hour)}, want: "PENDING"},
		{name: "more nodes than the partition has", cfg: lang.Slurm{Simulate: true},
			submit: lang.SubmitStep{ID: "1", Nodes: 4}, want: "REFUSED"},
		{name: "unknown partition", cfg: lang.Slurm{Simulate: true},
			submit: lang.SubmitStep{ID: "1", Nodes: 1, Partition: "h100"}, want: `error: no partition "h100" with a flex-start pool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newModel(t, tc.cfg)
			got := ""
			if err := m.Submit(t0, tc.submit); err != nil {
				got = "error: " + err.Error()
			} else if j, ok := m.Job(tc.submit.ID); ok {
				got = j.State()
			}
			if got != tc.want {
				t.Errorf("submit %+v = %q, want %q", tc.submit, got, tc.want)
			}
		})
	}
	m, _ := newModel(t, lang.Slurm{Simulate: true})
	if err := m.Submit(t0, lang.SubmitStep{ID: "1", Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	if err := m.Submit(t0, lang.SubmitStep{ID: "1", Nodes: 1}); err == nil {
		t.Error("a job id submitted twice was accepted")
	}
}

// TestReservationKeepsJobsOff: the scheduler starts no job with a time
// limit on a node whose reservation starts before the job would end.
func TestReservationKeepsJobsOff(t *testing.T) {
	m, rec := newModel(t, lang.Slurm{Simulate: true})
	m.Apply(t0, Command{Command: event.SlurmReservationCreate, Nodes: []string{node1},
		Raw: map[string]any{"reservation": "flexslurm-eol-" + node1, "start_time": t0.Add(time.Hour).Format(time.RFC3339Nano)}})
	if err := m.Submit(t0, lang.SubmitStep{ID: "7", Nodes: 2, TimeLimit: lang.Duration(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	m.Update(t0, nil)
	if d := cmp.Diff([]string{config.TopicJobs + " job.pending job 7 " + static + "," + node2}, rec.take()); d != "" {
		t.Errorf("allocation around the reservation (-want +got):\n%s", d)
	}
	m.Apply(t0, Command{Command: event.SlurmReservationDelete, Raw: map[string]any{"reservation": "flexslurm-eol-" + node1}})
	if err := m.Submit(t0, lang.SubmitStep{ID: "8", Nodes: 1, TimeLimit: lang.Duration(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	m.Update(t0, nil)
	if d := cmp.Diff([]string{config.TopicJobs + " job.pending job 8 " + node1}, rec.take()); d != "" {
		t.Errorf("allocation once the reservation is deleted (-want +got):\n%s", d)
	}
}

// TestJobComment: the agent sets flexslurm's comment but never overwrites
// a user's own.
func TestJobComment(t *testing.T) {
	m, _ := newModel(t, lang.Slurm{Simulate: true})
	if err := m.Submit(t0, lang.SubmitStep{ID: "7", Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	j, _ := m.Job("7")
	m.Apply(t0, Command{Command: event.SlurmJobComment, Job: "7", Reason: event.JobCommentPrefix + "fits no node"})
	if want := event.JobCommentPrefix + "fits no node"; j.Comment() != want {
		t.Errorf("comment = %q, want %q", j.Comment(), want)
	}
	m.Apply(t0, Command{Command: event.SlurmJobComment, Job: "7", Reason: ""})
	if j.Comment() != "" {
		t.Errorf("comment = %q, want it cleared", j.Comment())
	}
	j.comment = "my experiment"
	m.Apply(t0, Command{Command: event.SlurmJobComment, Job: "7", Reason: event.JobCommentPrefix + "fits no node"})
	if j.Comment() != "my experiment" {
		t.Errorf("comment = %q, want the user's kept", j.Comment())
	}
}

// TestReconfigure: nodes follow the applied spec: a raised maximum adds
// powered-down nodes, a lowered one removes the nodes beyond it once they
// are powered down with no job, and jobs are never placed on them.
func TestReconfigure(t *testing.T) {
	m, _ := newModel(t, lang.Slurm{Simulate: true})
	if err := m.SetNode(t0, lang.SnapshotNode{Name: node2, State: "IDLE+CLOUD"}); err != nil {
		t.Fatal(err)
	}
	raised := exampleCluster(t)
	p, _ := raised.Pool("a3u")
	p.MaxNodeCount = 4
	m.Reconfigure(t0, raised)
	if got := state(t, m, "flexvm-a3u-3"); got != "IDLE+CLOUD+POWERED_DOWN" {
		t.Errorf("a node of the raised maximum = %q, want IDLE+CLOUD+POWERED_DOWN", got)
	}
	lowered := exampleCluster(t)
	p, _ = lowered.Pool("a3u")
	p.MaxNodeCount = 2
	m.Reconfigure(t0, lowered)
	if _, ok := m.Node("flexvm-a3u-3"); ok {
		t.Error("a powered-down node beyond the lowered maximum is still configured")
	}
	if got := state(t, m, node2); got != "IDLE+CLOUD" {
		t.Errorf("a powered-up node beyond the maximum = %q, want it kept until powered down", got)
	}
	if err := m.Submit(t0, lang.SubmitStep{ID: "7", Nodes: 2}); err != nil {
		t.Fatal(err)
	}
	m.Update(t0, map[string]VM{node2: running(node2)})
	j, _ := m.Job("7")
	if j.State() != "CONFIGURING" || slicesContain(j.nodes, node2) {
		t.Errorf("job 7 = %s on %v; want it placed within the maximum", j.State(), j.nodes)
	}
	m.Apply(t0, Command{Command: event.SlurmPowerDown, Nodes: []string{node2}})
	m.Update(t0, nil)
	if _, ok := m.Node(node2); ok {
		t.Error("a removed node powered down with no job is still configured")
	}
}

func slicesContain(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestServiceable: whether Slurm can run a job on a node, given its VM.
func TestServiceable(t *testing.T) {
	none := func(string) bool { return false }
	wanted := func(string) bool { return true }
	for _, tc := range []struct {
		node, state string
		vm          bool
		vmWanted    func(string) bool
		want        bool
		why         string
	}{
		{node1, "IDLE+CLOUD+POWERED_DOWN", false, none, true, ""},
		{node1, "IDLE+CLOUD+POWERED_DOWN", true, none, false, "powered down in Slurm while its VM runs"},
		{static, "IDLE+CLOUD+POWERED_DOWN", false, none, false, "a static node is powered down"},
		{node1, "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP", false, none, false, "powering up with no VM requested"},
		{node1, "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP", false, wanted, true, ""},
		{node1, "IDLE+CLOUD", false, none, false, "up in Slurm with no VM"},
		{node1, "IDLE+CLOUD", true, none, true, ""},
		{node1, "IDLE+CLOUD+DRAIN", true, none, false, "drained"},
		{node1, "DOWN+CLOUD", true, none, false, "DOWN"},
		{node1, "IDLE+CLOUD+POWERING_DOWN", false, none, false, "powering down"},
		{node1, "IDLE+CLOUD+NOT_RESPONDING", true, none, false, "not responding"},
	} {
		m, _ := newModel(t, lang.Slurm{})
		if err := m.SetNode(t0, lang.SnapshotNode{Name: tc.node, State: tc.state}); err != nil {
			t.Fatal(err)
		}
		vms := map[string]VM{}
		if tc.vm {
			vms[tc.node] = running(tc.node)
		}
		ok, why := m.Serviceable(tc.node, vms, tc.vmWanted)
		if ok != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s %s (VM %t) serviceable = %t, %q; want %t, %q", tc.node, tc.state, tc.vm, ok, why, tc.want, tc.why)
		}
	}
}

// TestNodesLeaveInOrder: nodes leaving the configuration together are
// traced in node order, run after run.
func TestNodesLeaveInOrder(t *testing.T) {
	for range 20 {
		var trace []string
		m := New(lang.Slurm{Simulate: true}, exampleCluster(t), t0, func(string, any) {}, func(format string, args ...any) {
			trace = append(trace, fmt.Sprintf(format, args...))
		})
		raised := exampleCluster(t)
		p, _ := raised.Pool("a3u")
		p.MaxNodeCount = 8
		m.Reconfigure(t0, raised)
		m.Reconfigure(t0, exampleCluster(t))
		want := []string{"slurm: node flexvm-a3u-3 left the configuration", "slurm: node flexvm-a3u-4 left the configuration",
			"slurm: node flexvm-a3u-5 left the configuration", "slurm: node flexvm-a3u-6 left the configuration",
			"slurm: node flexvm-a3u-7 left the configuration"}
		if d := cmp.Diff(want, trace); d != "" {
			t.Fatalf("trace (-want +got):\n%s", d)
		}
	}
}

// TestSortedNodesFollowsTheConfiguration: the sorted node list the model
// keeps is, after nodes are added and dropped, the one sorting them afresh
// gives, and it is kept while the nodes stay the same.
func TestSortedNodesFollowsTheConfiguration(t *testing.T) {
	m, _ := newModel(t, lang.Slurm{Simulate: true})
	names := func(ns []*Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.name)
		}
		return out
	}
	check := func(when string) {
		t.Helper()
		kept := m.sortedNodes()
		m.noReuse = true
		fresh := m.sortedNodes()
		m.noReuse = false
		if d := cmp.Diff(names(fresh), names(kept)); d != "" {
			t.Errorf("%s: kept order differs from a fresh sort (-fresh +kept):\n%s", when, d)
		}
		if again := m.sortedNodes(); len(again) > 0 && &again[0] != &fresh[0] {
			t.Errorf("%s: sorted again with nothing changed", when)
		}
	}
	check("start")
	raised := exampleCluster(t)
	p, _ := raised.Pool("a3u")
	p.MaxNodeCount = 12
	m.Reconfigure(t0, raised)
	check("raised to 12 (flexvm-a3u-10 and -11 sort after -9)")
	if got := names(m.sortedNodes()); !slicesContain(got, "flexvm-a3u-11") {
		t.Fatalf("nodes %v lack flexvm-a3u-11", got)
	}
	m.Reconfigure(t0, exampleCluster(t))
	check("lowered again")
	if got := names(m.sortedNodes()); slicesContain(got, "flexvm-a3u-11") {
		t.Errorf("nodes %v still hold flexvm-a3u-11", got)
	}
}

// TestSnapshotFollowsNodeChanges: a snapshot's node entries, kept per node
// until its base state, flags or reason change, are those parsed afresh
// after every kind of change the model makes; and a node nothing changed
// keeps its entry.
func TestSnapshotFollowsNodeChanges(t *testing.T) {
	m, _ := newModel(t, lang.Slurm{Simulate: true, SuspendTime: lang.Duration(time.Minute)})
	now := t0
	check := func(when string) {
		t.Helper()
		kept := m.Snapshot(now)
		m.noReuse = true
		fresh := m.Snapshot(now)
		m.noReuse = false
		if d := cmp.Diff(fresh, kept); d != "" {
			t.Errorf("%s: kept snapshot differs from a fresh one (-fresh +kept):\n%s", when, d)
		}
	}
	check("start")
	n, _ := m.Node(node1)
	if !n.snapOK {
		t.Fatalf("no entry kept for %s", node1)
	}
	kept := n.snap
	m.Snapshot(now)
	if n, _ := m.Node(node1); len(kept.Flags) > 0 && &n.snap.Flags[0] != &kept.Flags[0] {
		t.Errorf("%s parsed again with nothing changed", node1)
	}
	for _, c := range []Command{
		{Command: event.SlurmDrain, Nodes: []string{node1}, Reason: "flexslurm: repair (flexvm-a3u-1-g1)"},
		{Command: event.SlurmDrain, Nodes: []string{node1}, Reason: "another reason"},
		{Command: event.SlurmResume, Nodes: []string{node1}},
		{Command: event.SlurmPowerUp, Nodes: []string{node2}},
		{Command: event.SlurmDown, Nodes: []string{node2}, Reason: "down"},
		{Command: event.SlurmResume, Nodes: []string{node2}},
		{Command: event.SlurmPowerDown, Nodes: []string{node2}},
	} {
		now = now.Add(time.Second)
		if !m.Apply(now, c) {
			t.Fatalf("command %s not applied", c.Command)
		}
		check(fmt.Sprintf("after %s %v", c.Command, c.Nodes))
	}
	// Registration, a lost VM and a timeout, through Update.
	now = now.Add(time.Minute)
	m.Update(now, map[string]VM{node2: running(node2)})
	check("after node2's VM registered")
	now = now.Add(time.Hour)
	m.Update(now, map[string]VM{})
	check("after node2's VM was lost")
	// A snapshot step's state, with a flag the mask does not know and
	// one set to false.
	if err := m.SetNode(now, lang.SnapshotNode{Name: node1, State: "IDLE+CLOUD+DRAIN", Reason: "set"}); err != nil {
		t.Fatal(err)
	}
	check("after a snapshot step")
	n, _ = m.Node(node1)
	n.flags["INVALID_REG"] = true
	check("with a flag outside the mask")
	delete(n.flags, "INVALID_REG")
	n.flags[flagDrain] = false
	check("with a flag set to false")
	delete(n.flags, flagDrain)
	check("with the flag gone")
	n.base = baseDown
	check("with another base state")
	n.reason = "changed"
	check("with another reason")
}

// TestSnapshotJSONIsSnapshot: SnapshotJSON, built from the node entries
// kept encoded, is json.Marshal of Snapshot, byte for byte, as nodes
// change, jobs come and go, and with no node at all.
func TestSnapshotJSONIsSnapshot(t *testing.T) {
	m, _ := newModel(t, lang.Slurm{Simulate: true})
	now := t0
	check := func(when string) {
		t.Helper()
		got, err := m.SnapshotJSON(now)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		m.noReuse = true
		want, err := json.Marshal(m.Snapshot(now))
		m.noReuse = false
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("%s: SnapshotJSON differs from json.Marshal(Snapshot) (-Marshal +SnapshotJSON):\n%s", when, d)
		}
	}
	check("start")
	check("again, with every entry kept encoded")
	now = now.Add(time.Second)
	m.Apply(now, Command{Command: event.SlurmDrain, Nodes: []string{node1}, Reason: `a "quoted" <reason> & more`})
	check("after a drain")
	if err := m.Submit(now, lang.SubmitStep{ID: "7", Partition: "a3u", Nodes: 2, Runtime: lang.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	check("with a job")
	m.SetJobs([]lang.SnapshotJob{{ID: "9", State: "PENDING", Partition: "a3u", NodeCount: 1, Reason: "Resources"}})
	check("with a snapshot step's job")
	now = now.Add(time.Minute)
	m.Update(now, map[string]VM{node2: running(node2)})
	check("after an update")
	n, _ := m.Node(node2)
	n.flags["INVALID_REG"] = true
	check("with a flag outside the mask")

	empty := New(lang.Slurm{}, exampleCluster(t), t0, func(string, any) {}, func(string, ...any) {})
	got, err := empty.SnapshotJSON(t0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(empty.Snapshot(t0))
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("no node (-Marshal +SnapshotJSON):\n%s", d)
	}
}

// TestGPUJobsShareNodes: jobs asking for GPUs (gres/gpu) share a node
// while its 8 GPUs last, lowest node first; a node partly held is MIXED,
// fully held ALLOCATED; a whole-node job shares with none; a job asking
// for more GPUs than a node has is refused; a node's jobs all requeue when
// it goes DOWN, and the node is idle once its last job ends.
func TestGPUJobsShareNodes(t *testing.T) {
	m, rec := newModel(t, lang.Slurm{Simulate: true})
	vms := map[string]VM{static: running(static), node1: running(node1), node2: running(node2)}
	m.Update(t0, vms) // every node registers (the dynamic ones stay powered down)
	for _, s := range []lang.SubmitStep{
		{ID: "a", Nodes: 1, GPUs: 4, Runtime: lang.Duration(time.Hour)},
		{ID: "b", Nodes: 1, GPUs: 3, Runtime: lang.Duration(2 * time.Hour)},
		{ID: "c", Nodes: 1, GPUs: 2, Runtime: lang.Duration(time.Hour)},
		{ID: "d", Nodes: 1, GPUs: 1, Runtime: lang.Duration(time.Hour)},
		{ID: "e", Nodes: 1, Runtime: lang.Duration(time.Hour)},
		{ID: "f", Nodes: 1, GPUs: 9, Runtime: lang.Duration(time.Hour)},
	} {
		if err := m.Submit(t0, s); err != nil {
			t.Fatal(err)
		}
	}
	m.Update(t0, vms) // allocate
	m.Update(t0, vms) // start
	want := map[string]string{"a": static, "b": static, "c": node1, "d": static, "e": node2}
	for id, node := range want {
		j, _ := m.Job(id)
		if j.State() != "RUNNING" || !slices.Equal(j.Nodes(), []string{node}) {
			t.Errorf("job %s: %s on %v, want RUNNING on %s", id, j.State(), j.Nodes(), node)
		}
	}
	if f, _ := m.Job("f"); f.State() != "REFUSED" {
		t.Errorf("job f (9 GPUs on 8-GPU nodes) = %s, want REFUSED", f.State())
	}
	n0, _ := m.Node(static)
	if got := state(t, m, static); got != "ALLOCATED+CLOUD" || n0.GPUsUsed() != 8 || !slices.Equal(n0.JobIDs(), []string{"a", "b", "d"}) {
		t.Errorf("node 0 = %q, %d GPUs used, jobs %v; want ALLOCATED+CLOUD, 8, [a b d]", got, n0.GPUsUsed(), n0.JobIDs())
	}
	if got := state(t, m, node1); got != "MIXED+CLOUD" {
		t.Errorf("node 1 with 2 of 8 GPUs held = %q, want MIXED+CLOUD", got)
	}
	if got := state(t, m, node2); got != "ALLOCATED+CLOUD" {
		t.Errorf("node 2 with a whole-node job = %q, want ALLOCATED+CLOUD", got)
	}
	rec.take()
	// a and d end: b still holds 3 GPUs of node 0.
	m.Update(t0.Add(time.Hour), vms)
	if got := state(t, m, static); got != "MIXED+CLOUD" || n0.GPUsUsed() != 3 || !slices.Equal(n0.JobIDs(), []string{"b"}) {
		t.Errorf("node 0 after a and d ended = %q, %d GPUs used, jobs %v; want MIXED+CLOUD, 3, [b]", got, n0.GPUsUsed(), n0.JobIDs())
	}
	// Submitted now, g (5 GPUs) fits beside b.
	if err := m.Submit(t0.Add(time.Hour), lang.SubmitStep{ID: "g", Nodes: 1, GPUs: 5, Runtime: lang.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	m.Update(t0.Add(time.Hour), vms)
	if g, _ := m.Job("g"); !slices.Equal(g.Nodes(), []string{static}) {
		t.Errorf("job g on %v, want on %s beside b", g.Nodes(), static)
	}
	// Node 0 goes DOWN: both its jobs are requeued and it holds nothing.
	m.Apply(t0.Add(time.Hour+time.Minute), Command{Command: event.SlurmDown, Nodes: []string{static}, Reason: "test"})
	for _, id := range []string{"b", "g"} {
		if j, _ := m.Job(id); j.State() != "PENDING" || j.Restarts() != 1 {
			t.Errorf("job %s after its node went DOWN = %s, %d restarts; want PENDING, 1", id, j.State(), j.Restarts())
		}
	}
	if n0.GPUsUsed() != 0 || n0.JobIDs() != nil {
		t.Errorf("node 0 DOWN holds %d GPUs, jobs %v; want none", n0.GPUsUsed(), n0.JobIDs())
	}
}

// TestJobIDGivenAgain: an id whose job ended may be submitted again (a new
// job: Slurm's ids repeat), one whose job is alive may not.
func TestJobIDGivenAgain(t *testing.T) {
	m, rec := newModel(t, lang.Slurm{Simulate: true})
	if err := m.Submit(t0, lang.SubmitStep{ID: "7", Nodes: 1, Runtime: lang.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Submit(t0, lang.SubmitStep{ID: "7", Nodes: 1, Runtime: lang.Duration(time.Hour)}); err == nil {
		t.Fatal("an id whose job is pending was given again")
	}
	m.Cancel(t0.Add(time.Minute), "7")
	rec.take()
	if err := m.Submit(t0.Add(2*time.Minute), lang.SubmitStep{ID: "7", Nodes: 1, Runtime: lang.Duration(time.Hour)}); err != nil {
		t.Fatalf("an id whose job ended: %v", err)
	}
	j, ok := m.Job("7")
	if !ok || j.State() != "PENDING" {
		t.Fatalf("the new job 7: %v %v", ok, j)
	}
	m.Update(t0.Add(2*time.Minute), nil)
	if j, _ := m.Job("7"); j.State() != "CONFIGURING" {
		t.Errorf("the new job 7 after a pass: %s, want it allocated the node the earlier one left", j.State())
	}
}
