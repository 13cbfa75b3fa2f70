package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// maxCapacityWaits is how many recent capacity waits a pool keeps.
const maxCapacityWaits = 20

// leadTime is how long before a static node's termination its successor is
// requested: Policy.LeadTime when set, else the 90th percentile of the
// pool's recent capacity waits, at least Policy.LeadFloor, at most half the
// run duration.
func (b *builder) leadTime(pool *model.Pool) time.Duration {
	lead := b.pol.LeadTime
	if lead <= 0 {
		lead = b.pol.LeadFloor
		if w := percentile(pool.CapacityWaits, 0.9); w > lead {
			lead = w
		}
	}
	if limit := pool.MaxRunDuration / 2; limit > 0 && lead > limit {
		lead = limit
	}
	return lead
}

func percentile(secs []int64, q float64) time.Duration {
	if len(secs) == 0 {
		return 0
	}
	s := append([]int64(nil), secs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1)*q + 0.5)
	return time.Duration(s[i]) * time.Second
}

// recordCapacityWait notes how long a generation waited until it could
// serve: to its registration in Slurm when Slurm is known (capacity plus
// boot), else to its VM's creation.
func (b *builder) recordCapacityWait(pool *model.Pool, n model.Node, created time.Time) {
	if n.RequestedAt.IsZero() || created.Before(n.RequestedAt) {
		return
	}
	p := *b.st.Pools[pool.ID]
	p.CapacityWaits = append(append([]int64(nil), p.CapacityWaits...), int64(created.Sub(n.RequestedAt)/time.Second))
	if len(p.CapacityWaits) > maxCapacityWaits {
		p.CapacityWaits = p.CapacityWaits[len(p.CapacityWaits)-maxCapacityWaits:]
	}
	b.putPool(p, fmt.Sprintf("capacity for %s arrived after %s", n.VMName, created.Sub(n.RequestedAt).Round(time.Second)))
}

// eolName is the Slurm maintenance reservation of a node's end of life.
func eolName(node string) string { return event.ReservationPrefix + "eol-" + node }

// endOfLife places the node's end-of-life reservation at its termination
// time, so Slurm starts no job on it that would outlive it. A new
// generation moves it (same name, new start).
func (b *builder) endOfLife(n model.Node) {
	if n.TerminationTime.IsZero() {
		return
	}
	reason := fmt.Sprintf("flexslurm: %s ends at %s (max run duration)", n.VMName, n.TerminationTime.Format(time.RFC3339))
	b.add(SlurmCommand{
		ID:      naming.CommandID(b.cluster, event.SlurmReservationCreate, n.Name, n.VMName, n.TerminationTime.Format(time.RFC3339)),
		Command: event.SlurmReservationCreate, Nodes: []string{n.Name}, Reservation: eolName(n.Name),
		StartTime: n.TerminationTime, DurationSeconds: int64(b.pol.EOLReservation / time.Second), Reason: reason,
	})
}

// endOfLifeDone removes the node's end-of-life reservation (its VM is gone).
func (b *builder) endOfLifeDone(n model.Node) {
	if n.TerminationTime.IsZero() {
		return
	}
	b.add(SlurmCommand{
		ID:      naming.CommandID(b.cluster, event.SlurmReservationDelete, n.Name, n.VMName),
		Command: event.SlurmReservationDelete, Nodes: []string{n.Name}, Reservation: eolName(n.Name),
		Reason: fmt.Sprintf("flexslurm: %s is gone", n.VMName),
	})
}

// makeBeforeBreak requests, a lead time before a static node's
// termination, a successor in a free slot of the pool; when the successor
// has registered in Slurm, the old node is drained and stops counting as
// static. Without a free slot (the pool is at max_node_count) the node is
// recreated after its termination instead.
func (b *builder) makeBeforeBreak(pool *model.Pool, slurm *model.SlurmView) {
	if cur, ok := b.st.Pools[pool.ID]; ok {
		pool = cur
	}
	// A predecessor link is only valid while the predecessor names this node
	// as its successor; a stale one (its hand-over ended another way) goes.
	for _, n := range b.poolNodes(pool.ID) {
		if n.Predecessor == "" {
			continue
		}
		if p, ok := b.st.Nodes[n.Predecessor]; !ok || p.Successor != n.Name {
			node := *n
			node.Predecessor = ""
			b.putNode(node, node.Reason)
		}
	}
	for _, n := range b.poolNodes(pool.ID) {
		node := *n
		switch {
		case node.Successor != "":
			b.followSuccessor(pool, node, slurm)
		case b.pol.RecreateAfterTermination || node.Kind != model.NodeStatic || node.Phase != model.PhaseRunning || node.TerminationTime.IsZero():
		case b.now.Before(node.TerminationTime.Add(-b.leadTime(pool))) || !b.now.Before(node.TerminationTime):
		default:
			b.requestSuccessor(pool, node)
		}
	}
}

func (b *builder) requestSuccessor(pool *model.Pool, old model.Node) {
	if blocked, _ := b.blocked(pool); blocked || b.vmCount(pool.ID) >= pool.MaxNodes {
		return
	}
	var succ *model.Node
	for i := 0; i < pool.MaxNodes; i++ {
		n := b.node(pool, i)
		if !n.Phase.Serving() && n.Successor == "" && n.Predecessor == "" && !b.claimed(n.Name) && n.Name != old.Name {
			succ = &n
			break
		}
	}
	if succ == nil {
		return
	}
	why := fmt.Sprintf("make-before-break: %s ends at %s; successor %s requested %s ahead (lead time)", old.VMName,
		old.TerminationTime.Format(time.RFC3339), succ.Name, old.TerminationTime.Sub(b.now).Round(time.Minute))
	old.Successor = succ.Name
	b.putNode(old, why)
	s := *succ
	s.Kind, s.Predecessor = model.NodeStatic, old.Name
	b.provisionNode(pool, s, "", why)
	if n := b.st.Nodes[s.Name]; n == nil || !n.Phase.Serving() {
		// The request was held back (backoff): try again next pass.
		old.Successor = ""
		b.putNode(old, "make-before-break: successor held back by the pool's backoff")
		if n != nil {
			nn := *n
			nn.Predecessor = ""
			b.putNode(nn, nn.Reason)
		}
	}
}

// followSuccessor hands over once the successor registered, and forgets a
// successor whose capacity never came.
func (b *builder) followSuccessor(pool *model.Pool, old model.Node, slurm *model.SlurmView) {
	s, ok := b.st.Nodes[old.Successor]
	if !ok || s.Predecessor != old.Name || !s.Phase.Serving() {
		old.Successor = ""
		b.putNode(old, "make-before-break: the successor did not come up; the node is recreated after its termination instead")
		if ok && s.Predecessor == old.Name {
			ss := *s
			ss.Predecessor = ""
			b.putNode(ss, ss.Reason)
		}
		return
	}
	registered := s.Registered || (slurm == nil && s.Phase == model.PhaseRunning)
	if slurm != nil {
		// Usable, not just registered: a drain left from the slot's previous
		// VM is lifted first (liftOwnDrain).
		if sn, ok := slurm.Nodes[s.Name]; !ok || !slices.Contains([]SlurmClass{SlurmIdle, SlurmBusy}, ClassifySlurm(sn)) {
			registered = false
		}
	}
	if !registered {
		return
	}
	if old.Kind == model.NodeStatic && b.successorLate(pool, s.Name) {
		// Another hand-over of the pool is late: keep this old node serving
		// (its end-of-life reservation keeps long jobs off) so that it can
		// cover for the late one until its own termination.
		return
	}
	if old.Kind == model.NodeStatic {
		old.Kind = model.NodeDynamic
		b.putNode(old, fmt.Sprintf("make-before-break: successor %s registered; %s drained until its jobs end (at the latest %s)", s.Name, old.Name, old.TerminationTime.Format(time.RFC3339)))
		b.slurm(event.SlurmDrain, []string{old.Name}, "", fmt.Sprintf("flexslurm: end of life at %s, replaced by %s (%s)", old.TerminationTime.Format(time.RFC3339), s.Name, old.VMName), old.VMName)
		return
	}
	// Drained and without jobs: the old VM is released now rather than at
	// its termination, which bounds the overlap.
	if old.Phase != model.PhaseRunning {
		return
	}
	if _, busy := b.activeJobOn(old); busy {
		return
	}
	if slurm != nil {
		n, ok := slurm.Nodes[old.Name]
		if !ok || !slices.Contains(n.Flags, "DRAIN") || strings.ToLower(n.State) != "idle" {
			return
		}
	}
	b.releaseNode(pool, old, fmt.Sprintf("make-before-break: %s is drained and idle, and %s serves in its place: VM released", old.Name, s.Name))
}

// handoverEnded closes a make-before-break when the old node's VM is gone:
// the overlap is accounted and the link cleared on both nodes.
func (b *builder) handoverEnded(pool *model.Pool, old *model.Node) {
	if s, ok := b.st.Nodes[old.Successor]; ok && s.Predecessor == old.Name {
		ss := *s
		ss.Predecessor = ""
		if !s.RunningAt.IsZero() && b.now.After(s.RunningAt) {
			p := *b.st.Pools[pool.ID]
			overlap := b.now.Sub(s.RunningAt)
			p.OverlapSeconds += int64(overlap / time.Second)
			b.putPool(p, fmt.Sprintf("make-before-break overlap of %s and %s: %s", old.Name, s.Name, overlap.Round(time.Minute)))
			b.add(Metric{Name: MetricOverlap, Labels: map[string]string{"pool": pool.ID}, Reason: fmt.Sprintf("%d", int64(overlap/time.Second))})
		}
		b.putNode(ss, ss.Reason)
	}
	old.Successor = ""
	old.Kind = model.NodeDynamic
}

// endAtConfiguredDuration ends a VM whose pool's flex_start_max_duration is
// below Compute's 600 s floor: Compute was asked for 600 s, flexslurm ends
// the node at the configured time (its TerminationTime).
func (b *builder) endAtConfiguredDuration(pool *model.Pool, node model.Node, vm VM) bool {
	if node.Phase != model.PhaseRunning || node.TerminationTime.IsZero() || b.now.Before(node.TerminationTime) {
		return false
	}
	if !vm.TerminationTime.IsZero() && !vm.TerminationTime.After(node.TerminationTime) {
		return false // Compute ends it itself
	}
	why := fmt.Sprintf("VM %s reached the pool's max run duration %s (below Compute's 600 s floor, so flexslurm ends it)", node.VMName, pool.MaxRunDuration)
	b.add(DeleteVMs{Pool: pool.ID, VMs: []string{node.VMName}, RequestID: naming.RequestID("delete-instances", pool.MIG+"/"+node.VMName), Reason: why})
	b.generationEnded(pool, node, model.EndExpired, why)
	return true
}

// MetricOverlap counts make-before-break overlap seconds.
const MetricOverlap = "make_before_break_overlap_seconds"

// successorLate reports whether a successor of the pool other than except
// is requested or running but not yet registered in Slurm.
func (b *builder) successorLate(pool *model.Pool, except string) bool {
	for _, n := range b.poolNodes(pool.ID) {
		if n.Name != except && n.Predecessor != "" && n.Phase.Serving() && !n.Registered {
			return true
		}
	}
	return false
}
