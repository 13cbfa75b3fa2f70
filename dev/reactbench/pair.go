package reactbench

import (
	"fmt"
	"slices"
	"time"
)

// Records are the components' own records of a run, every time on the
// wall clock: slurmctld's log, the Compute simulator's resize requests and
// VMs, and the publish times of the messages on the health-failure and
// expiry topics.
type Records struct {
	Ctld []CtldEvent
	// Resume are ResumeProgram's runs (the hook's log).
	Resume []ResumeCall
	// Requests are the resize requests Compute received, with the node
	// their VM is for and their creation time (creationTimestamp).
	Requests []Request
	// VMs are the VMs Compute created, with the time they were RUNNING
	// (lastStartTimestamp: the simulator creates a VM RUNNING).
	VMs []VM
	// Health are the health.failure messages (publishTime).
	Health []Message
	// Expiry are the expiry audit log entries (publishTime), one per VM.
	Expiry []Message
}

// Request is one resize request for one node.
type Request struct {
	Name, Node string
	Created    time.Time
}

// VM is one VM of a node.
type VM struct {
	Name, Node string
	Running    time.Time
	// Gone is when the VM was first seen no longer listed (zero while it
	// exists, or when the run ended first).
	Gone time.Time
}

// Message is a published message about a node.
type Message struct {
	Node, VM  string
	Published time.Time
}

// maxReaction bounds a pairing: an end more than this after its start
// belongs to another event.
const maxReaction = 60 * time.Second

// firstRequest returns the first resize request for node created at or
// after from, within maxReaction.
func (r Records) firstRequest(node string, from time.Time) (time.Time, bool) {
	var best time.Time
	for _, q := range r.Requests {
		if q.Node == node && !q.Created.Before(from) && q.Created.Before(from.Add(maxReaction)) && (best.IsZero() || q.Created.Before(best)) {
			best = q.Created
		}
	}
	return best, !best.IsZero()
}

// earlyRequest bounds how long before ResumeProgram runs a resize request
// may have been created for the same power-up: PrologSlurmctld reports the
// job at its allocation, which can reach ScaleUp before Slurm's power_save
// loop runs ResumeProgram. Such a request existed when ResumeProgram was
// called: the reaction is 0.
const earlyRequest = 30 * time.Second

// Pair pairs every event that started in [from, to) with its end and
// returns the phase; boot is subtracted from every registration.
func (r Records) Pair(name string, from, to time.Time, boot time.Duration) Phase {
	p := Phase{Name: name, Samples: map[Kind][]Sample{}}
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	missed := map[Kind]int{}
	early, gone := 0, 0
	for _, c := range r.Resume {
		if !in(c.Called) {
			continue
		}
		for _, node := range c.Nodes {
			if c.NoJob[node] {
				continue
			}
			end, ok := r.firstRequest(node, c.Called.Add(-earlyRequest))
			switch {
			case !ok:
				missed[KindResume]++
			case end.Before(c.Called):
				early++
				p.Samples[KindResume] = append(p.Samples[KindResume], Sample{Node: node, Start: c.Called, End: c.Called})
			default:
				p.Samples[KindResume] = append(p.Samples[KindResume], Sample{Node: node, Start: c.Called, End: end})
			}
		}
	}
	for _, v := range r.VMs {
		if !in(v.Running) {
			continue
		}
		end, ok := firstCtld(r.Ctld, v.Node, CtldResponding, v.Running, v.Running.Add(maxReaction))
		switch {
		case ok && (v.Gone.IsZero() || end.Before(v.Gone)):
			p.Samples[KindRegister] = append(p.Samples[KindRegister], Sample{Node: v.Node, Start: v.Running, End: end, Less: boot})
		case !v.Gone.IsZero() && v.Gone.Before(v.Running.Add(maxReaction)):
			gone++ // deleted before its slurmd registered: no registration to wait for
		default:
			missed[KindRegister]++
		}
	}
	seen := map[string]bool{}
	for _, m := range r.Health {
		// One failure per node and VM: a redelivered or repeated report
		// of the same failure is not a new event.
		key := m.Node + "/" + m.VM
		if !in(m.Published) || seen[key] {
			continue
		}
		seen[key] = true
		// The hook drains the node before it publishes: the drain is
		// looked for from a little before the report.
		drain, ok1 := firstCtld(r.Ctld, m.Node, CtldDrain, m.Published.Add(-10*time.Second), m.Published.Add(maxReaction))
		req, ok2 := r.firstRequest(m.Node, m.Published)
		if !ok1 || !ok2 {
			missed[KindHealth]++
			continue
		}
		end := req
		if drain.After(end) {
			end = drain
		}
		p.Samples[KindHealth] = append(p.Samples[KindHealth], Sample{Node: m.Node, Start: m.Published, End: end})
	}
	seen = map[string]bool{}
	for _, m := range r.Expiry {
		if !in(m.Published) || seen[m.VM] {
			continue
		}
		seen[m.VM] = true
		if end, ok := r.firstRequest(m.Node, m.Published); ok {
			p.Samples[KindExpiry] = append(p.Samples[KindExpiry], Sample{Node: m.Node, Start: m.Published, End: end})
		} else {
			missed[KindExpiry]++
		}
	}
	if early > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d resume event(s) whose resize request already existed when ResumeProgram ran (the job's report from PrologSlurmctld came first): counted as 0 s", early))
	}
	if gone > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d VM(s) deleted before their slurmd registered (a node powered down at once, or a VM replaced): no registration, not counted", gone))
	}
	for _, k := range Kinds {
		slices.SortFunc(p.Samples[k], func(a, b Sample) int { return a.Start.Compare(b.Start) })
		if missed[k] > 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("%d %s event(s) without an end within %s (not counted)", missed[k], k, maxReaction))
		}
	}
	return p
}
