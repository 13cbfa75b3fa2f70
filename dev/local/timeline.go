package local

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Timeline prints what happens, stamped with simulated time since the
// start ("+2d 03:15:07"), from three sources: the stored state (node
// generations and phases, jobs), the Compute simulator (resize requests,
// VMs) and the Slurm commands the functions publish. Every time it prints
// is in that one format: the absolute times (RFC 3339) of the records'
// reasons are rewritten to it. Each Slurm decision — a command for a node
// and its VM (generation), with its reason — is printed once: Pub/Sub
// delivers a message at least once, and the reconciler sends a node's
// command again (a new attempt, a new id) when two Slurm snapshots taken
// after the send still show it not carried out; CommandCounts says how
// often that happened.
type Timeline struct {
	Clock  *clock.Scaled
	Origin time.Time
	// Hold, when set, keeps each line this long (wall time) before it is
	// printed, so that lines its watchers see at different moments come
	// out in the order their events happened: every line carries the time
	// of its event (a record's write, a resize request's creation or
	// fulfilment, a VM's creation; the moment it was seen otherwise), and
	// a line is printed once no line seen later can be older. Set it to
	// about twice the slowest watcher's period. Zero prints at once.
	Hold time.Duration
	// pending are the lines held, printed by flush in (time, arrival)
	// order.
	pending []heldLine
	seq     int

	mu       sync.Mutex
	out      io.Writer
	nodes    map[string]model.Node
	jobs     map[string]model.Job
	rrs      map[string]string
	vms      map[string]string
	commands []event.SlurmCommand
	// decisions counts each Slurm decision printed (decisionKey).
	decisions map[string]int
	// Violations records invariant breaches seen while watching.
	violations []string
}

// heldLine is a line waiting in Timeline.pending.
type heldLine struct {
	at   time.Time // the event's time (simulated)
	seen time.Time // when it was held (wall)
	seq  int
	text string // stamped and rewritten
}

// NewTimeline returns a timeline printing to out.
func NewTimeline(out io.Writer) *Timeline {
	return &Timeline{out: out, nodes: map[string]model.Node{}, jobs: map[string]model.Job{}, rrs: map[string]string{}, vms: map[string]string{},
		decisions: map[string]int{}}
}

func (t *Timeline) stamp() string {
	if t.Clock == nil {
		return "            "
	}
	return t.rel(t.Clock.Now())
}

// rfc3339 matches the absolute times that records' reasons carry.
var rfc3339 = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)

func (t *Timeline) printf(format string, args ...any) {
	t.printAt(time.Time{}, fmt.Sprintf(format, args...))
}

// printAt prints msg stamped with at, or with the clock's now when at is
// zero.
func (t *Timeline) printAt(at time.Time, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Clock != nil {
		msg = rfc3339.ReplaceAllStringFunc(msg, func(s string) string {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return s
			}
			return t.rel(at)
		})
	}
	stamp := t.stamp()
	if at.IsZero() && t.Clock != nil {
		at = t.Clock.Now()
	}
	if !at.IsZero() && t.Clock != nil {
		stamp = t.rel(at)
	}
	line := fmt.Sprintf("%s  %s\n", stamp, msg)
	if t.Hold <= 0 {
		fmt.Fprint(t.out, line)
		return
	}
	t.seq++
	t.pending = append(t.pending, heldLine{at: at, seen: time.Now(), seq: t.seq, text: line})
	t.flushLocked(false)
}

// Flush prints every line held now, in order (Timeline.Hold). The
// watchers flush as they poll; a caller about to print something of its
// own (a step, a check) flushes first.
func (t *Timeline) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(true)
}

// release prints the held lines whose turn has come: a watcher calls it
// at each poll, so that lines are not held longer than needed when
// nothing new happens.
func (t *Timeline) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(false)
}

// flushLocked prints, in (event time, arrival) order, the held lines no
// later line can precede: those up to the event time of the newest line
// held for Hold. With all, it prints every line.
func (t *Timeline) flushLocked(all bool) {
	if len(t.pending) == 0 {
		return
	}
	sort.SliceStable(t.pending, func(i, k int) bool {
		a, b := t.pending[i], t.pending[k]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.seq < b.seq
	})
	// The watermark: the latest event time among lines held long enough.
	// A line seen later than Hold after its event is printed late, in the
	// position it then has.
	var mark time.Time
	cutoff := time.Now().Add(-t.Hold)
	for _, l := range t.pending {
		if (all || l.seen.Before(cutoff)) && l.at.After(mark) {
			mark = l.at
		}
	}
	if mark.IsZero() && !all {
		return
	}
	n := 0
	for _, l := range t.pending {
		if !all && l.at.After(mark) {
			break
		}
		fmt.Fprint(t.out, l.text)
		n++
	}
	t.pending = append(t.pending[:0], t.pending[n:]...)
}

// Say prints one line.
func (t *Timeline) Say(msg string) { t.printf("%s", msg) }

// Step prints a step header.
func (t *Timeline) Step(n int, title string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(true)
	fmt.Fprintf(t.out, "\n── %d. %s\n", n, title)
}

// Check prints a check's outcome and returns ok.
func (t *Timeline) Check(ok bool, what string) bool {
	mark := "PASS"
	if !ok {
		mark = "FAIL"
	}
	t.Flush()
	t.printf("   [%s] %s", mark, what)
	t.Flush()
	return ok
}

// CommandCounts returns how many Slurm decisions (decisionKey) were seen,
// and how many commands repeated one of them under a new id (a redelivery
// keeps its id and does not count).
func (t *Timeline) CommandCounts() (decisions, resent int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := map[string]map[string]bool{}
	for _, c := range t.commands {
		k := decisionKey(c)
		if ids[k] == nil {
			ids[k] = map[string]bool{}
		}
		ids[k][c.ID] = true
	}
	for _, m := range ids {
		resent += len(m) - 1
	}
	return len(ids), resent
}

// Commands returns the Slurm commands seen so far.
func (t *Timeline) Commands() []event.SlurmCommand {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]event.SlurmCommand(nil), t.commands...)
}

// Violations returns the invariant breaches seen.
func (t *Timeline) Violations() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.violations...)
}

// WatchState prints node and job changes until ctx ends.
func (t *Timeline) WatchState(ctx context.Context, st store.Store, cluster string, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.release()
		// Jobs seen active are read again whatever their state, so that
		// their end is printed too (a pool's read holds active jobs only).
		t.mu.Lock()
		var known []string
		for id, j := range t.jobs {
			if j.State == model.JobPending || j.State == model.JobRunning {
				known = append(known, id)
			}
		}
		t.mu.Unlock()
		sort.Strings(known)
		s, err := st.Read(ctx, store.Scope{Cluster: cluster, AllPools: true, Jobs: known})
		if err != nil {
			continue
		}
		// Each change is stamped with the time its record was written, and
		// the changes of one read are printed in that order.
		type change struct {
			at   time.Time
			line string
		}
		var lines []change
		t.mu.Lock()
		names := make([]string, 0, len(s.Nodes))
		for n := range s.Nodes {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			n := *s.Nodes[name]
			old, seen := t.nodes[name]
			if !seen || old.Generation != n.Generation || old.Phase != n.Phase {
				lines = append(lines, change{n.UpdatedAt, fmt.Sprintf("node %-14s %-7s gen %d %-9s %s", n.Name, n.Kind, n.Generation, n.Phase, n.Reason)})
			}
			t.nodes[name] = n
		}
		for _, j := range s.SortedJobs() {
			old, seen := t.jobs[j.ID]
			if !seen || old.State != j.State || old.Generation != j.Generation || old.Reason != j.Reason {
				lines = append(lines, change{j.UpdatedAt, fmt.Sprintf("job  %-14s %-9s nodes %s  %s", j.ID, j.State, strings.Join(j.Nodes, ","), j.Reason)})
			}
			t.jobs[j.ID] = *j
		}
		t.mu.Unlock()
		sort.SliceStable(lines, func(i, k int) bool { return lines[i].at.Before(lines[k].at) })
		for _, l := range lines {
			t.printAt(l.at, l.line)
		}
	}
}

// Node returns the last seen record of a node.
func (t *Timeline) Node(name string) (model.Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[name]
	return n, ok
}

// Job returns the last seen record of a job.
func (t *Timeline) Job(id string) (model.Job, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, ok := t.jobs[id]
	return j, ok
}

// WatchSim prints resize-request and VM changes until ctx ends, and records
// a violation whenever two VMs that are not being deleted back one node.
func (t *Timeline) WatchSim(ctx context.Context, sim *computesim.Sim, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.release()
		// Each change carries the time Compute made it where the
		// simulator keeps it (a request's creation and fulfilment, a VM's
		// creation), and the moment it was seen otherwise.
		type change struct {
			at   time.Time
			line string
		}
		var lines []change
		rrs := sim.ResizeRequests()
		vms := sim.Instances()
		t.mu.Lock()
		for _, rr := range rrs {
			if t.rrs[rr.Name] != rr.State {
				var at time.Time
				switch rr.State {
				case "ACCEPTED", "CREATING":
					at = rr.Created
				case "SUCCEEDED":
					at = rr.CapacityAt
				}
				lines = append(lines, change{at, fmt.Sprintf("compute: resize request %s %s (%s)", rr.Name, rr.State, strings.Join(rr.Instances, ","))})
				t.rrs[rr.Name] = rr.State
			}
		}
		live := map[string]bool{}
		perNode := map[string][]string{}
		for _, vm := range vms {
			live[vm.Name] = true
			if t.vms[vm.Name] != vm.Status {
				extra := ""
				if !vm.TerminationTime.IsZero() && vm.Status == "RUNNING" {
					extra = " until " + t.rel(vm.TerminationTime)
				}
				var at time.Time
				if _, seen := t.vms[vm.Name]; !seen {
					at = vm.Created
				}
				lines = append(lines, change{at, fmt.Sprintf("compute: VM %s %s%s", vm.Name, vm.Status, extra)})
				t.vms[vm.Name] = vm.Status
			}
			if vm.Status != "STOPPING" {
				node := vm.Name
				if i := strings.LastIndex(node, "-g"); i > 0 {
					node = node[:i]
				}
				perNode[node] = append(perNode[node], vm.Name)
			}
		}
		for name := range t.vms {
			if !live[name] {
				lines = append(lines, change{line: fmt.Sprintf("compute: VM %s gone", name)})
				delete(t.vms, name)
			}
		}
		for node, v := range perNode {
			if len(v) > 1 {
				sort.Strings(v)
				msg := fmt.Sprintf("node %s is backed by %d VMs at once: %s", node, len(v), strings.Join(v, ","))
				if !containsStr(t.violations, msg) {
					t.violations = append(t.violations, msg)
					lines = append(lines, change{line: "INVARIANT BROKEN: " + msg})
				}
			}
		}
		t.mu.Unlock()
		for _, l := range lines {
			t.printAt(l.at, l.line)
		}
	}
}

func containsStr(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// rel renders at as simulated time since the start, to the second:
// "+2d 03:15:07" ("-0d 01:00:00" before it).
func (t *Timeline) rel(at time.Time) string {
	d := at.Sub(t.Origin)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + days(d.Truncate(time.Second))
}

// days renders a duration the way the timeline stamps it: "2d 03:15:07".
func days(d time.Duration) string {
	n := int(d / (24 * time.Hour))
	d -= time.Duration(n) * 24 * time.Hour
	return fmt.Sprintf("%dd %02d:%02d:%02d", n, int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second))
}

// decisionKey identifies a Slurm decision: the command, its nodes or job,
// its reservation and its reason, which names the VM (the node's
// generation) it is about. Resent commands differ only in their id.
func decisionKey(c event.SlurmCommand) string {
	return strings.Join([]string{string(c.Command), strings.Join(c.Nodes, ","), c.JobID, c.Reservation, c.Address, c.Reason}, "\x00")
}

// WatchSlurm prints the Slurm commands published for the agent.
func (t *Timeline) WatchSlurm(ctx context.Context, ps *pubsub.Client, sub string) {
	for ctx.Err() == nil {
		msgs, err := ps.Pull(ctx, sub, 50, 500*time.Millisecond)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		for _, m := range msgs {
			c, err := event.DecodeSlurmCommand(m.Data)
			if err != nil {
				t.printf("slurm: malformed command: %v", err)
				continue
			}
			t.command(*c)
		}
	}
}

// command records a Slurm command and prints it the first time its
// decision (decisionKey) is seen.
func (t *Timeline) command(c event.SlurmCommand) {
	t.mu.Lock()
	t.commands = append(t.commands, c)
	key := decisionKey(c)
	t.decisions[key]++
	again := t.decisions[key] > 1
	t.mu.Unlock()
	if again {
		return
	}
	target := strings.Join(c.Nodes, ",")
	if c.JobID != "" {
		target = "job " + c.JobID
	}
	t.printf("slurm: %s %s (%s)", c.Command, target, c.Reason)
}
