package plan

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// maxCapacityWaits is how many recent capacity waits a pool keeps: about
// a week of hand-overs of an 8-node pool of 1-day VMs, enough for the tail
// of the wait to show.
const maxCapacityWaits = 32

// Lead estimation from waits (learnLead). A capacity wait is modelled as
// log-normal, the usual shape of a queue for a scarce resource: positive,
// skewed, with a tail of hours. Until a pool has many waits, their spread
// is pooled with a prior spread of leadPriorSigma (in log space), weighted
// as leadPriorWeight waits, so that a few widely spread waits count for
// what they show; and the spread is never taken below leadPriorSigma, so
// that close waits (a few, or many that include the same boot time) do not
// promise a short tail that a pool's dozens of waits cannot show.
const (
	leadPriorSigma  = 1.0
	leadPriorWeight = 4.0
)

// leadTime is how long before a static node's termination its successor is
// requested: Policy.LeadTime when set, else learnt from the pool's recent
// waits to registration (learnLead), sized so that late successors keep the
// pool below min_node_count for at most 1 − Policy.TargetAvailability of the
// time, at least Policy.LeadFloor and at most Policy.LeadMaxShare of the max
// run duration; never more than half the max run duration.
func (b *builder) leadTime(pool *model.Pool) time.Duration {
	lead := b.pol.LeadTime
	if lead <= 0 {
		ceiling := time.Duration(float64(pool.MaxRunDuration) * b.pol.LeadMaxShare)
		lead = learnLead(pool.CapacityWaits, pool.MaxRunDuration, pool.MinNodes, b.pol.TargetAvailability, b.pol.LeadFloor, ceiling)
	}
	if limit := pool.MaxRunDuration / 2; limit > 0 && lead > limit {
		lead = limit // a run shorter than twice the floor
	}
	return lead
}

// learnLead sizes a make-before-break lead time from the waits (seconds,
// request to registration) a pool's successors had. A successor whose wait
// W exceeds the lead L leaves the pool one node short for W − L after its
// predecessor ends. A pool of nodes static nodes whose VMs run maxRun makes
// nodes hand-overs per maxRun, so the pool stays at min_node_count for a
// share target of the time when each hand-over is late by at most
// (1 − target) × maxRun / nodes on average. learnLead fits a log-normal to
// the waits (leadPriorSigma pooled in while they are few, and the least
// spread it assumes; the spread of the next wait also counts the
// uncertainty of their mean) and returns the
// shortest lead, rounded up to the minute, whose expected lateness
// E[(W − L)⁺] is within that budget, bounded to [floor, ceiling]. The
// ceiling, a share of maxRun, bounds what the lead costs: an early
// successor runs beside its predecessor for at most the lead. Without any
// wait, the floor: a pool's nodes record their own waits when they
// register, long before the first of them ends, so only a pool whose record
// lost them has none.
func learnLead(waits []int64, maxRun time.Duration, nodes int, target float64, floor, ceiling time.Duration) time.Duration {
	if ceiling < floor {
		ceiling = floor
	}
	if len(waits) == 0 || maxRun <= 0 {
		return min(floor, ceiling)
	}
	n := float64(len(waits))
	var mu, ss float64
	for _, w := range waits {
		mu += math.Log(float64(max(w, 1)))
	}
	mu /= n
	for _, w := range waits {
		d := math.Log(float64(max(w, 1))) - mu
		ss += d * d
	}
	sigma := max(leadPriorSigma, math.Sqrt((leadPriorWeight*leadPriorSigma*leadPriorSigma+ss)/(leadPriorWeight+n-1))) * math.Sqrt(1+1/n)
	budget := (1 - target) * maxRun.Seconds() / float64(max(nodes, 1))
	late := func(l time.Duration) float64 { return lognormalExcess(mu, sigma, l.Seconds()) }
	if late(ceiling) > budget {
		return ceiling
	}
	if late(floor) <= budget {
		return floor
	}
	lo, hi := math.Log(floor.Seconds()), math.Log(ceiling.Seconds())
	for range 60 {
		mid := (lo + hi) / 2
		if lognormalExcess(mu, sigma, math.Exp(mid)) > budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	lead := (time.Duration(math.Exp(hi)*float64(time.Second)) + time.Minute - 1).Truncate(time.Minute)
	return min(max(lead, floor), ceiling)
}

// lognormalExcess is E[(W − l)⁺] for ln W ~ N(mu, sigma²):
// e^(mu+sigma²/2) Φ((mu + sigma² − ln l)/sigma) − l Φ((mu − ln l)/sigma).
func lognormalExcess(mu, sigma, l float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	ll := math.Log(l)
	return max(0, math.Exp(mu+sigma*sigma/2)*phi((mu+sigma*sigma-ll)/sigma)-l*phi((mu-ll)/sigma))
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

// reserveEndOfLife places the node's end-of-life reservation at its termination
// time, so Slurm starts no job on it that would outlive it. A new
// generation moves it (same name, new start).
func (b *builder) reserveEndOfLife(n model.Node) {
	if n.TerminationTime.IsZero() {
		return
	}
	start, reason := n.TerminationTime, fmt.Sprintf("%s ends at %s (max run duration)", n.VMName, n.TerminationTime.Format(time.RFC3339))
	if n.RunDuration > 0 {
		// A VM sized by its job (jobduration.go): jobs placed on the node
		// while it boots start late, so the reservation keeps the boot
		// allowance free before the end.
		start = n.TerminationTime.Add(-b.pol.BootAllowance)
		reason = fmt.Sprintf("%s ends at %s (run duration %s, sized by job %s); reserved from %s before, the boot allowance",
			n.VMName, n.TerminationTime.Format(time.RFC3339), n.RunDuration, n.JobID, b.pol.BootAllowance)
	}
	b.add(SlurmCommand{
		ID:      naming.CommandID(b.cluster, string(event.SlurmReservationCreate), n.Name, n.VMName, start.Format(time.RFC3339)),
		Command: event.SlurmReservationCreate, Nodes: []string{n.Name}, Reservation: eolName(n.Name),
		StartTime: start, DurationSeconds: int64(b.pol.EOLReservation / time.Second), Reason: reason,
	})
}

// endOfLifeDone removes the node's end-of-life reservation (its VM is gone).
func (b *builder) endOfLifeDone(n model.Node) {
	if n.TerminationTime.IsZero() && n.RunDuration <= 0 {
		return // no reservation was placed (a job-sized node's is placed at its request: bootReservation)
	}
	b.add(SlurmCommand{
		ID:      naming.CommandID(b.cluster, string(event.SlurmReservationDelete), n.Name, n.VMName),
		Command: event.SlurmReservationDelete, Nodes: []string{n.Name}, Reservation: eolName(n.Name),
		Reason: fmt.Sprintf("%s is gone", n.VMName),
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
			node.Predecessor, node.Hedge = "", false
			b.putNode(node, node.Reason)
		}
	}
	for _, n := range b.poolNodes(pool.ID) {
		node := *n
		if cur := b.st.Nodes[n.Name]; cur != nil {
			node = *cur // a hedge resolved earlier in this loop relinks other nodes
		}
		switch {
		case node.Successor != "":
			b.followSuccessor(pool, node, slurm)
		case b.pol.RecreateAfterTermination || node.Kind != model.NodeStatic || node.Phase != model.PhaseRunning || node.TerminationTime.IsZero():
		case b.now.Before(node.TerminationTime.Add(-b.leadTime(pool))) || !b.now.Before(node.TerminationTime):
		default:
			b.requestSuccessor(pool, node, "")
		}
	}
	if !b.pol.RecreateAfterTermination {
		b.advanceHandOver(pool, slurm)
	}
}

// riskHorizon is the end of the half lead time within which a waiting
// static node whose place nothing keeps is at risk (advanceHandOver), and
// beyond which its running predecessor covers it (lateStatic).
func (b *builder) riskHorizon(pool *model.Pool) time.Time {
	return b.now.Add(b.leadTime(pool) / 2)
}

// advanceHandOver requests, ahead of its lead time, the successor of the
// static node that ends first, when static nodes of the pool are at risk
// of arriving after the node they replace and too few other hand-overs
// would cover them. A node is at risk when it still waits for capacity and
// nothing keeps its place for the next half lead time: its predecessor
// ends within it, or it has none (its predecessor ended, or it was
// recreated after its termination) and has waited that long. A hand-over covers when its old node ends after that and
// its successor takes its place: once that successor registers, the old
// node is kept serving while a late node needs it (followSuccessor). The
// successor requested ahead is one the pool needs anyway, so a late
// successor costs the hand-over brought forward, not an extra VM.
func (b *builder) advanceHandOver(pool *model.Pool, slurm *model.SlurmView) {
	if cur, ok := b.st.Pools[pool.ID]; ok {
		pool = cur
	}
	if pool.MinNodes == 0 {
		return
	}
	lead := b.leadTime(pool)
	horizon := b.riskHorizon(pool)
	atRisk, cover := 0, 0
	var first, hedgeFor *model.Node
	for _, n := range b.poolNodes(pool.ID) {
		if n.Kind != model.NodeStatic || !n.Phase.Serving() {
			continue
		}
		if n.Phase == model.PhaseRunning {
			switch {
			case n.TerminationTime.IsZero() || !n.TerminationTime.After(horizon):
			case n.Successor != "" && b.successorTakesOver(*n):
				cover++
			case n.Successor == "" && !n.TerminationTime.After(b.now.Add(2*lead)) && (first == nil || n.TerminationTime.Before(first.TerminationTime)):
				first = n
			}
			continue
		}
		if n.Successor != "" || b.isHedge(*n) {
			continue // hedged: the hedge is its cover
		}
		if p, ok := b.st.Nodes[n.Predecessor]; ok && n.Predecessor != "" && p.Successor == n.Name && p.Phase == model.PhaseRunning {
			if p.TerminationTime.After(horizon) {
				continue
			}
			if n.Phase == model.PhaseRequested && (hedgeFor == nil || p.TerminationTime.Before(b.st.Nodes[hedgeFor.Predecessor].TerminationTime)) {
				hedgeFor = n
			}
		} else if n.RequestedAt.IsZero() || b.now.Sub(n.RequestedAt) < lead/2 {
			continue
		}
		atRisk++
	}
	if atRisk <= cover {
		return
	}
	if first != nil {
		b.requestSuccessor(pool, *first, fmt.Sprintf(", before its lead time: %d static node(s) of the pool may arrive after the node they replace and %d other hand-over(s) cover them", atRisk, cover))
		return
	}
	if hedgeFor != nil {
		// Every static node that ends soon has its successor already: the
		// waiting successor whose predecessor ends first gets a second
		// request for its place.
		b.requestSuccessor(pool, *hedgeFor, fmt.Sprintf(": %d static node(s) of the pool may arrive after the node they replace, %d other hand-over(s) cover them and none can be brought forward", atRisk, cover))
	}
}

// isHedge reports whether n is a hedge (model.Node.Hedge) whose
// predecessor still names it.
func (b *builder) isHedge(n model.Node) bool {
	p, ok := b.st.Nodes[n.Predecessor]
	return ok && n.Predecessor != "" && p.Successor == n.Name && n.Hedge
}

// followHedge settles a hedge h of the late static node l: the first whose
// VM runs keeps the place, the other is released (a queued request is
// cancelled: Flex-Start charges nothing for it; a VM that ran too is
// deleted, or, if a job already runs there, left dynamic for the idle rule
// to release). When the hedge wins it takes l's place in l's own hand-over
// (l's predecessor names it as successor), so the pool's static count never
// changes: l with a successor does not count, h does.
func (b *builder) followHedge(pool *model.Pool, l, h model.Node) {
	switch {
	case !b.successorTakesOver(l):
		// The hedge's capacity never came, or it was released or made
		// dynamic: l waits on alone.
		l.Successor = ""
		b.putNode(l, fmt.Sprintf("hedge %s no longer waits for %s's place", h.Name, l.Name))
		if h.Predecessor == l.Name {
			h.Predecessor, h.Hedge = "", false
			b.putNode(h, h.Reason)
		}
	case l.Phase == model.PhaseRunning:
		l.Successor = ""
		b.putNode(l, fmt.Sprintf("hedge: %s's VM runs first; hedge %s is released", l.Name, h.Name))
		h.Predecessor, h.Hedge, h.Kind = "", false, model.NodeDynamic
		why := fmt.Sprintf("hedge for %s: %s's own VM ran first", l.Name, l.Name)
		if _, busy := b.activeJobOn(h); busy {
			b.putNode(h, why+"; a job runs here: dynamic, released when idle")
			return
		}
		b.releaseNode(pool, h, why+": released")
	case h.Phase == model.PhaseRunning:
		why := fmt.Sprintf("hedge: %s's VM runs first and takes %s's place", h.Name, l.Name)
		h.Predecessor, h.Hedge = b.passPredecessor(l, h.Name, why), false
		b.putNode(h, why)
		l.Successor, l.Predecessor, l.Kind = "", "", model.NodeDynamic
		b.releaseNode(pool, l, fmt.Sprintf("hedge %s's VM ran first and takes %s's place: request released", h.Name, l.Name))
	}
}

// passPredecessor hands l's make-before-break predecessor, when it still
// names l as its successor, over to the node named to (a hedge taking l's
// place) and returns its name; "" when there is none.
func (b *builder) passPredecessor(l model.Node, to, why string) string {
	p, ok := b.st.Nodes[l.Predecessor]
	if !ok || l.Predecessor == "" || p.Successor != l.Name {
		return ""
	}
	pp := *p
	pp.Successor = to
	b.putNode(pp, why)
	return pp.Name
}

// requestSuccessor requests old's make-before-break successor in a free
// slot of the pool; note, when set, replaces " (lead time)" at the end of
// the reason.
func (b *builder) requestSuccessor(pool *model.Pool, old model.Node, note string) {
	if blocked, _ := b.blocked(pool); blocked || b.vmCount(pool.ID) >= pool.MaxNodes {
		return
	}
	var succ *model.Node
	for i := 0; i < pool.MaxNodes; i++ {
		n := b.node(pool, i)
		if !n.Phase.Serving() && n.Successor == "" && n.Predecessor == "" && !b.claimed(n.Name) && n.Name != old.Name && !requestMayBeActive(&n) {
			succ = &n
			break
		}
	}
	if succ == nil {
		return
	}
	if note == "" {
		note = " (lead time)"
	}
	why := fmt.Sprintf("make-before-break: %s ends at %s; successor %s requested %s ahead", old.VMName,
		old.TerminationTime.Format(time.RFC3339), succ.Name, old.TerminationTime.Sub(b.now).Round(time.Minute)) + note
	if old.Phase != model.PhaseRunning {
		why = fmt.Sprintf("hedge: %s has waited %s for capacity; %s requested for the same place, the first to run keeps it", old.Name,
			b.now.Sub(old.RequestedAt).Round(time.Minute), succ.Name) + note
	}
	old.Successor = succ.Name
	b.putNode(old, why)
	s := *succ
	s.Kind, s.Predecessor, s.Hedge = model.NodeStatic, old.Name, old.Phase != model.PhaseRunning
	b.provisionNode(pool, s, "", why)
	if n := b.st.Nodes[s.Name]; n == nil || !n.Phase.Serving() {
		// The request was held back (backoff): try again next pass.
		old.Successor = ""
		b.putNode(old, "make-before-break: successor held back by the pool's backoff")
		if n != nil {
			nn := *n
			nn.Predecessor, nn.Hedge = "", false
			b.putNode(nn, nn.Reason)
		}
	}
}

// followSuccessor hands over once the successor registered, and forgets a
// successor whose capacity never came.
func (b *builder) followSuccessor(pool *model.Pool, old model.Node, slurm *model.SlurmView) {
	s, ok := b.st.Nodes[old.Successor]
	if ok && s.Predecessor == old.Name && s.Hedge {
		b.followHedge(pool, old, *s)
		return
	}
	if !b.successorTakesOver(old) {
		succ := old.Successor
		handedOver := old.Kind != model.NodeStatic
		old.Successor = ""
		why := fmt.Sprintf("make-before-break: successor %s does not take %s's place (its capacity never came, or it was released or made dynamic by a lowered max_node_count)", succ, old.Name)
		switch {
		case b.staticShort(pool) && !handedOver:
			why += "; the node is recreated after its termination instead"
		case b.staticShort(pool):
			old.Kind = model.NodeStatic
			why += fmt.Sprintf("; the pool is short of static nodes: %s is static again and recreated after its termination", old.Name)
		default:
			// The pool has min_node_count static nodes without it
			// (min_node_count lowered): it is surplus, as releaseSurplus
			// would make it.
			old.Kind = model.NodeDynamic
			why += fmt.Sprintf("; the pool has min_node_count static nodes without it: %s is dynamic", old.Name)
			handedOver = false
		}
		b.putNode(old, why)
		if ok && s.Predecessor == old.Name {
			ss := *s
			ss.Predecessor = ""
			b.putNode(ss, ss.Reason)
		}
		if handedOver {
			b.liftHandOverDrain(old, slurm)
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
	if old.Kind == model.NodeStatic && (b.lateStatic(pool, slurm, old) > b.coveringOld(pool, slurm, old) || b.usableStatic(pool, slurm, old.Name) < pool.MinNodes) {
		// Other static nodes of the pool are on their way that this node
		// may have to cover for (a successor whose predecessor ended, or
		// ends before this node does, or a node recreated after its
		// predecessor ended), more than the other old nodes kept serving
		// that end no earlier than this one cover, or the pool would be
		// short without this node: keep it serving (its end-of-life
		// reservation keeps long jobs off) so that it covers until its own
		// termination.
		return
	}
	if old.Kind == model.NodeStatic {
		old.Kind = model.NodeDynamic
		b.putNode(old, fmt.Sprintf("make-before-break: successor %s registered; %s drained until its jobs end (at the latest %s)", s.Name, old.Name, old.TerminationTime.Format(time.RFC3339)))
		b.slurm(event.SlurmDrain, []string{old.Name}, "", fmt.Sprintf("end of life at %s, replaced by %s (%s)", old.TerminationTime.Format(time.RFC3339), s.Name, old.VMName), old.VMName)
		if slurm == nil || old.Phase != model.PhaseRunning {
			return
		}
		if nodeSlurmClass(slurm, old) == SlurmIdle {
			if _, busy := b.activeJobOn(old); !busy {
				// Idle in Slurm: released in the same pass, as an idle
				// dynamic node is (releaseIfIdle), rather than one
				// reconcile period later once Slurm shows it drained.
				b.releaseNode(pool, old, fmt.Sprintf("make-before-break: %s is idle and %s serves in its place: drained and VM released", old.Name, s.Name))
			}
		}
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
		// Drained: DRAIN and no job running or ending there, whatever the
		// base state — DOWN+DRAIN runs no job either (a node drained while
		// its VM was replaced, then drained again for its end of life,
		// stays DOWN with the second reason): waiting for IDLE would keep
		// it forever.
		if !ok || !n.Drained() {
			return
		}
	}
	b.releaseNode(pool, old, fmt.Sprintf("make-before-break: %s is drained and runs no job, and %s serves in its place: VM released", old.Name, s.Name))
}

// staticShort reports whether the pool has fewer than min_node_count
// static nodes serving (staticServing: a node with a successor counts
// through it).
func (b *builder) staticShort(pool *model.Pool) bool {
	if cur, ok := b.st.Pools[pool.ID]; ok {
		pool = cur
	}
	return b.staticServing(pool.ID) < pool.MinNodes
}

// successorTakesOver reports whether old's make-before-break successor
// still takes its place: it names old as its predecessor, is static and
// serves (requested or running). A successor released, or made dynamic,
// because its slot is at or beyond a lowered max_node_count (cluster.go,
// shrink.go), or whose capacity never came, does not: the static role
// stays with old.
func (b *builder) successorTakesOver(old model.Node) bool {
	s, ok := b.st.Nodes[old.Successor]
	return ok && s.Predecessor == old.Name && s.Kind == model.NodeStatic && s.Phase.Serving()
}

// liftHandOverDrain resumes in Slurm a node that flexslurm drained for its
// hand-over to a successor that then did not take its place: the node is
// static again and serves until its termination (its end-of-life
// reservation keeps jobs that would outlive it off). Only flexslurm's own
// drain for this very generation is lifted, and not while a health repair
// or a diagnosis holds the node; another drain (an administrator's) and a
// node Slurm is not known to hold drained are left alone.
func (b *builder) liftHandOverDrain(old model.Node, slurm *model.SlurmView) {
	if slurm == nil || old.Phase != model.PhaseRunning || old.Repair != model.RepairNone {
		return
	}
	sn, ok := slurm.Nodes[old.Name]
	if !ok || !sn.DrainSet() || sn.Owner != slurmstate.OwnerFlexslurm || sn.ReasonGeneration != old.Generation {
		return
	}
	b.slurm(event.SlurmResume, []string{old.Name}, "", fmt.Sprintf("make-before-break: %s is static again, its successor does not take its place: lifting flexslurm's hand-over drain", old.Name), old.VMName, "handover-undone")
}

// endHandover closes a make-before-break when the old node's VM is gone:
// the link is cleared on both nodes and, when the successor took the old
// node's place, the overlap is accounted and the old node stays dynamic
// (not recreated). When the successor does not take its place
// (successorTakesOver) and the pool is short of static nodes without the
// old node, the old node is static again, so that its caller recreates it.
// It reports whether the successor took over.
func (b *builder) endHandover(pool *model.Pool, old *model.Node) bool {
	took := b.successorTakesOver(*old)
	short := !took && b.staticShort(pool)
	if s, ok := b.st.Nodes[old.Successor]; ok && s.Predecessor == old.Name {
		ss := *s
		ss.Predecessor = ""
		if took && s.Hedge {
			// old, still waiting, ended (its request failed or timed out):
			// its hedge takes its place in its own hand-over.
			ss.Predecessor = b.passPredecessor(*old, ss.Name, fmt.Sprintf("hedge %s takes %s's place", ss.Name, old.Name))
			ss.Hedge, old.Predecessor = false, ""
		} else if took && !s.RunningAt.IsZero() && b.now.After(s.RunningAt) {
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
	if short {
		old.Kind = model.NodeStatic
	}
	return took
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
	b.releaseVM(pool, node, why)
	b.endGeneration(pool, node, model.EndExpired, why)
	return true
}

// MetricOverlap counts make-before-break overlap seconds.
const MetricOverlap = "make_before_break_overlap_seconds"

// lateStatic counts the static nodes of the pool, other than old's
// successor, that are requested or running but not yet registered in Slurm
// and that old may have to cover for: a successor still waiting for
// capacity or booting whose predecessor already ended (the link is cleared
// then, the node stays static) or ends before old does and within half a
// lead time, or a static node recreated after its termination. A
// successor whose predecessor still runs and ends no earlier than old is
// covered by that predecessor for as long as old could cover it: keeping
// old for it would only pay for old beside its own successor. One whose
// predecessor ends later than half a lead time from now is covered by it
// until then, and usually arrives before: should it still be waiting at
// half a lead, it is at risk, and advanceHandOver brings a hand-over
// forward for it unless one in flight covers it; that hand-over's old node
// is then kept for it. Without a Slurm view, a running VM counts as
// arrived.
func (b *builder) lateStatic(pool *model.Pool, slurm *model.SlurmView, old model.Node) int {
	late := 0
	horizon := b.riskHorizon(pool)
	for _, n := range b.poolNodes(pool.ID) {
		if n.Name == old.Successor || n.Name == old.Name || n.Kind != model.NodeStatic || !n.Phase.Serving() || b.isHedge(*n) {
			continue // a hedge and the node it hedges count once
		}
		if n.Phase == model.PhaseRunning && (slurm == nil || n.Registered) {
			continue
		}
		if p, ok := b.st.Nodes[n.Predecessor]; ok && n.Predecessor != "" && p.Successor == n.Name && p.Phase == model.PhaseRunning && !p.TerminationTime.IsZero() {
			if !old.TerminationTime.IsZero() && !p.TerminationTime.Before(old.TerminationTime) {
				continue // covered by its own predecessor at least as long as old could
			}
			if p.TerminationTime.After(horizon) {
				continue // covered by its own predecessor for half a lead time yet
			}
		}
		late++
	}
	return late
}

// coveringOld counts the other old nodes of the pool kept serving beside
// their registered successor (still static, VM running, usable in Slurm
// when Slurm is known) that end no earlier than old (ties: the lower name
// first). Each covers a late static node (lateStatic) at least as long as
// old could, so old is kept only while the late nodes outnumber them: the
// old nodes that end last are the ones kept.
func (b *builder) coveringOld(pool *model.Pool, slurm *model.SlurmView, old model.Node) int {
	count := 0
	for _, k := range b.poolNodes(pool.ID) {
		if k.Name == old.Name || k.Kind != model.NodeStatic || k.Phase != model.PhaseRunning || k.Successor == "" || !b.successorTakesOver(*k) {
			continue
		}
		if k.TerminationTime.Before(old.TerminationTime) || (k.TerminationTime.Equal(old.TerminationTime) && k.Name > old.Name) {
			continue
		}
		s := b.st.Nodes[k.Successor]
		if s.Phase != model.PhaseRunning || (slurm != nil && !s.Registered) {
			continue
		}
		if slurm != nil {
			if sn, ok := slurm.Nodes[k.Name]; !ok || !slices.Contains([]SlurmClass{SlurmIdle, SlurmBusy}, ClassifySlurm(sn)) {
				continue
			}
		}
		count++
	}
	return count
}

// usableStatic counts the pool's static nodes other than except that serve
// jobs now: VM running and, when Slurm is known, idle or busy there (not
// drained, down or booting); without Slurm, every running one.
func (b *builder) usableStatic(pool *model.Pool, slurm *model.SlurmView, except string) int {
	count := 0
	for _, n := range b.poolNodes(pool.ID) {
		if n.Name == except || n.Kind != model.NodeStatic || n.Phase != model.PhaseRunning {
			continue
		}
		if slurm == nil {
			count++
			continue
		}
		if sn, ok := slurm.Nodes[n.Name]; ok && slices.Contains([]SlurmClass{SlurmIdle, SlurmBusy}, ClassifySlurm(sn)) {
			count++
		}
	}
	return count
}

// makeBeforeBreakPass requests static nodes' successors ahead of their
// end and places end-of-life reservations.
type makeBeforeBreakPass struct{}

func (makeBeforeBreakPass) apply(b *builder, pc *poolContext) { b.makeBeforeBreak(pc.pool, pc.slurm) }
