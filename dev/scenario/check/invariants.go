package check

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario/computefault"
	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// invariantState follows the continuous invariants of a run.
type invariantState struct {
	cfg lang.Invariants
	// first failure result index in runner.results, and later failing
	// evaluations, per invariant.
	failedAt map[string]int
	repeats  map[string]int
	evals    int

	unrecordedSince map[string]time.Time // VM → since when no record names it
	belowSince      map[string]time.Time // pool → since when below min
	beyondSince     map[string]time.Time // VM → since when beyond its pool's max
	held            map[string]bool      // node → held for a repair or diagnosis when last evaluated
	heldUntil       map[string]time.Time // node → when its last such hold was first seen ended
	ownDrainSince   map[string]time.Time // node/VM → since when drained by flexslurm's health check with no repair following it
	// names are the configured invariants (enabledOf cfg), which a run
	// never changes.
	names []string
}

func newInvariantState(cfg lang.Invariants) *invariantState {
	return &invariantState{cfg: cfg, failedAt: map[string]int{}, repeats: map[string]int{},
		unrecordedSince: map[string]time.Time{}, belowSince: map[string]time.Time{}, beyondSince: map[string]time.Time{},
		held: map[string]bool{}, heldUntil: map[string]time.Time{}, ownDrainSince: map[string]time.Time{}, names: enabledOf(cfg)}
}

// enabled lists the configured invariants, in evaluation order: the same
// slice each time (callers must not change it).
func (s *invariantState) enabled() []string { return s.names }

// enabledOf lists the invariants c configures.
func enabledOf(c lang.Invariants) []string {
	var out []string
	if c.OneVMPerNode {
		out = append(out, "one_vm_per_node")
	}
	if c.OneRequestPerNode {
		out = append(out, "one_request_per_node")
	}
	if c.NoUnrecordedVM != nil {
		out = append(out, "no_unrecorded_vm")
	}
	if c.StaticAtMin != nil {
		out = append(out, "static_at_min")
	}
	if c.IdleDynamicReleased != nil {
		out = append(out, "idle_dynamic_released")
	}
	if c.RepairProgress != nil {
		out = append(out, "repair_progress")
	}
	if c.ForeignUntouched {
		out = append(out, "foreign_untouched")
	}
	if c.ForeignReservationsUntouched != nil {
		out = append(out, "foreign_reservations_untouched")
	}
	if c.WithinMax != nil {
		out = append(out, "within_max")
	}
	if c.OwnDrainFollowed != nil {
		out = append(out, "own_drain_followed")
	}
	if c.ArrivedCapacityKept {
		out = append(out, "arrived_capacity_kept")
	}
	return out
}

func (s *invariantState) describe(name string) string {
	c := s.cfg
	switch name {
	case "one_vm_per_node":
		return "never two live VMs for one node"
	case "one_request_per_node":
		return "never two active resize requests for one node"
	case "no_unrecorded_vm":
		return fmt.Sprintf("no VM without a node record for longer than %s", lang.FormatDuration(c.NoUnrecordedVM.Within.D()))
	case "static_at_min":
		return fmt.Sprintf("static pools back at min_node_count within %s of capacity being available", lang.FormatDuration(c.StaticAtMin.Within.D()))
	case "idle_dynamic_released":
		return fmt.Sprintf("no dynamic VM idle in Slurm for SuspendTime plus %s", lang.FormatDuration(c.IdleDynamicReleased.Within.D()))
	case "repair_progress":
		return fmt.Sprintf("no node waits in a repair state (await_drain, host_repair, blocked) for longer than %s", lang.FormatDuration(c.RepairProgress.Within.D()))
	case "foreign_untouched":
		return "no action on a resource not labelled as this cluster's"
	case "foreign_reservations_untouched":
		return fmt.Sprintf("no Slurm command names a reservation without the %q prefix", c.ForeignReservationsUntouched.Prefix)
	case "own_drain_followed":
		return fmt.Sprintf("no node drained by flexslurm's health check of its current VM without a repair following it for longer than %s", lang.FormatDuration(c.OwnDrainFollowed.Within.D()))
	case "arrived_capacity_kept":
		return "no VM that came for a node deleted while a pending job assigned the node could use it, with the node requested again"
	case "within_max":
		return fmt.Sprintf("no VM beyond its pool's max_node_count without a running job for longer than %s", lang.FormatDuration(c.WithinMax.Within.D()))
	}
	return name
}

// checkInvariants evaluates the configured invariants now.
func (r *Checker) checkInvariants() {
	s := r.inv
	names := s.enabled()
	if len(names) == 0 {
		return
	}
	s.evals++
	w := r.vmView()
	now := r.now()
	for _, name := range names {
		v := r.invariant(name, w, now, false)
		if len(v) == 0 {
			continue
		}
		if _, failed := s.failedAt[name]; failed {
			s.repeats[name]++
			continue
		}
		s.failedAt[name] = len(r.results)
		r.record([]Result{{At: r.since(), Step: -1, Name: "invariant " + name, Pass: false,
			Expected: s.describe(name), Actual: strings.Join(v, "; ")}})
	}
}

// finalInvariants reports the invariants that held throughout, and how
// often the failed ones were violated.
func (r *Checker) finalInvariants() []Result {
	s := r.inv
	var out []Result
	for _, name := range s.enabled() {
		if i, failed := s.failedAt[name]; failed {
			if n := s.repeats[name]; n > 0 && i < len(r.results) {
				r.results[i].Actual += fmt.Sprintf(" (and still violated in %d later evaluations)", n)
			}
			continue
		}
		out = append(out, Result{At: r.since(), Step: -1, Name: "invariant " + name, Pass: true,
			Expected: s.describe(name), Actual: fmt.Sprintf("held in all %d evaluations", s.evals)})
	}
	return out
}

// strictInvariant evaluates a named invariant now with no grace.
func (r *Checker) strictInvariant(name string) []string {
	w := r.vmView()
	switch name {
	case "no_dead_letters":
		var out []string
		for _, d := range r.deliveries.DeadLetters() {
			out = append(out, fmt.Sprintf("%s %s (%s) dead-lettered at %s", d.Topic, d.ID, d.Type, lang.FormatDuration(d.At)))
		}
		return out
	case "quiet":
		return r.deliveries.NotQuiet()
	case "no_idle_dynamic_vm":
		return r.idleDynamic(w, r.now(), 0, time.Time{}, true)
	case "no_mig_left":
		return r.migsLeft()
	}
	return r.invariant(name, w, r.now(), true)
}

// invariant returns the violations of one invariant at now (the clock's
// time: the caller reads it once for all the invariants it evaluates);
// strict ignores grace periods.
func (r *Checker) invariant(name string, w world, now time.Time, strict bool) []string {
	s := r.inv
	grace := func(wi *lang.Within) time.Duration {
		if strict || wi == nil {
			return 0
		}
		return wi.Within.D()
	}
	// afterFault is the earliest deadline a fault on the calls at path
	// allows.
	afterFault := func(wi *lang.Within, path string) time.Time {
		if strict || wi == nil {
			return time.Time{}
		}
		b := r.compute.BlockedUntil(path)
		if b.IsZero() {
			return b
		}
		return b.Add(wi.AfterFault.D() + wi.Within.D())
	}
	switch name {
	case "one_vm_per_node":
		return slices.Clone(w.multiVM)
	case "one_request_per_node":
		// A function of the simulator's resize requests alone: kept while
		// its state (computesim.Sim.Version) stays the same.
		v := r.sim.Version()
		if !r.oneRequestOK || r.oneRequestVersion != v || r.noStateReuse {
			r.oneRequest, r.oneRequestVersion, r.oneRequestOK = r.oneRequestPerNode(), v, true
		}
		return slices.Clone(r.oneRequest)
	case "no_unrecorded_vm":
		st := r.state()
		recorded := map[string]bool{}
		for _, n := range st.Nodes {
			recorded[n.VMName] = true
		}
		live := map[string]bool{}
		var out []string
		for _, vm := range w.ours {
			if vm.Status == "STOPPING" || recorded[vm.Name] || recorded[naming.BaseVMName(vm.Name)] {
				continue
			}
			live[vm.Name] = true
			since, ok := s.unrecordedSince[vm.Name]
			if !ok {
				since = now
				s.unrecordedSince[vm.Name] = now
			}
			if deadline := latest(since.Add(grace(s.cfg.NoUnrecordedVM)), afterFault(s.cfg.NoUnrecordedVM, computefault.AnyPath)); now.After(deadline) || strict {
				out = append(out, fmt.Sprintf("VM %s (created at %s) has had no node record since %s", vm.Name,
					lang.FormatDuration(vm.Created.Sub(r.start)), lang.FormatDuration(since.Sub(r.start))))
			}
		}
		if !strict {
			for vm := range s.unrecordedSince {
				if !live[vm] {
					delete(s.unrecordedSince, vm)
				}
			}
		}
		sort.Strings(out)
		return out
	case "within_max":
		var out []string
		live := map[string]bool{}
		if r.specAt.IsZero() {
			return nil // no step applied another spec
		}
		st := r.state()
		for node, vm := range w.byNode {
			_, pool, idx, ok := naming.ParseNodeName(node)
			if !ok {
				continue
			}
			if rec, known := st.Nodes[node]; !known || rec.VMName != vm.Name {
				continue // no record names it: no_unrecorded_vm's business
			}
			if p, inSpec := r.spec.Pool(pool); inSpec && p.IsFlexStart() && idx < p.MaxNodeCount {
				continue
			}
			if sn, known := r.slurm.Node(node); known && sn.JobID() != "" {
				if j, ok := r.slurm.Job(sn.JobID()); ok && j.State() == "RUNNING" {
					continue
				}
			}
			live[vm.Name] = true
			since, seen := s.beyondSince[vm.Name]
			switch {
			case !seen:
				since = now
			case since.Before(r.specAt):
				since = r.specAt // the clock starts again at the latest apply
			}
			if !strict {
				s.beyondSince[vm.Name] = since
			}
			if deadline := since.Add(grace(s.cfg.WithinMax)); now.After(deadline) || strict {
				out = append(out, fmt.Sprintf("VM %s of node %s is beyond its pool's maximum with no job running since %s", vm.Name, node, lang.FormatDuration(since.Sub(r.start))))
			}
		}
		if !strict {
			for vm := range s.beyondSince {
				if !live[vm] {
					delete(s.beyondSince, vm)
				}
			}
		}
		sort.Strings(out)
		return out
	case "static_at_min":
		st := r.state()
		var out []string
		pools := r.flexPools()
		for i := range pools {
			p := &pools[i]
			if p.MinNodeCount == 0 {
				continue
			}
			if _, ok := st.Pools[p.ID]; !ok {
				continue
			}
			// Static nodes: indexes below min_node_count (Slurm's
			// SuspendExcNodes), and nodes flexslurm holds as static (a
			// make-before-break successor).
			up := map[string]bool{}
			for node, vm := range w.byNode {
				_, pool, idx, ok := naming.ParseNodeName(node)
				if !ok || pool != p.ID || vm.Status != "RUNNING" {
					continue
				}
				if rec, known := st.Nodes[node]; idx < p.MinNodeCount || (known && rec.Kind == model.NodeStatic) {
					up[node] = true
				}
			}
			if len(up) >= p.MinNodeCount {
				delete(s.belowSince, p.ID)
				continue
			}
			since, ok := s.belowSince[p.ID]
			if !ok {
				since = now
				s.belowSince[p.ID] = now
			}
			delays := r.capacityDelay(p.Zone, p.MachineSpec.MachineType) + r.simulator.AcceptDelay.D() + r.simulator.DeleteDelay.D()
			deadline := latest(since.Add(delays+grace(s.cfg.StaticAtMin)), afterFault(s.cfg.StaticAtMin, computefault.PathResizeRequests).Add(delays))
			if strict || now.After(deadline) {
				out = append(out, fmt.Sprintf("pool %s has %d of %d static nodes with a running VM since %s (deadline %s)",
					p.ID, len(up), p.MinNodeCount, lang.FormatDuration(since.Sub(r.start)), lang.FormatDuration(deadline.Sub(r.start))))
			}
		}
		return out
	case "idle_dynamic_released":
		return r.idleDynamic(w, now, grace(s.cfg.IdleDynamicReleased), afterFault(s.cfg.IdleDynamicReleased, computefault.AnyPath), strict)
	case "repair_progress":
		st := r.state()
		var waiting []*model.Node
		for _, n := range st.Nodes {
			if n.Repair.UnderRepair() || n.Repair == model.RepairBlocked {
				waiting = append(waiting, n)
			}
		}
		sort.Slice(waiting, func(i, j int) bool { return waiting[i].Name < waiting[j].Name })
		var out []string
		for _, n := range waiting {
			// A drain waits for the node's job to end (Slurm's DRAINING):
			// a repair awaiting it is not stalled while the job runs, and
			// its time counts from when the node was freed.
			start := n.RepairSince
			if n.Repair == model.RepairAwaitDrain && r.slurm != nil {
				if sn, ok := r.slurm.Node(n.Name); ok {
					if sn.JobID() != "" {
						continue
					}
					if sn.FreedAt().After(start) {
						start = sn.FreedAt()
					}
				}
			}
			deadline := latest(start.Add(grace(s.cfg.RepairProgress)), afterFault(s.cfg.RepairProgress, computefault.AnyPath))
			if strict || now.After(deadline) {
				out = append(out, fmt.Sprintf("node %s (%s) has been %s since %s", n.Name, n.VMName, n.Repair, lang.FormatDuration(n.RepairSince.Sub(r.start))))
			}
		}
		return out
	case "arrived_capacity_kept":
		return r.arrivedCapacityKept(w, now)
	case "own_drain_followed":
		return r.ownDrainFollowed(now, grace(s.cfg.OwnDrainFollowed), afterFault(s.cfg.OwnDrainFollowed, computefault.AnyPath), strict)
	case "foreign_untouched":
		return r.foreignTouched(w)
	case "foreign_reservations_untouched":
		prefix := "flexslurm-"
		if p := s.cfg.ForeignReservationsUntouched; p != nil && p.Prefix != "" {
			prefix = p.Prefix
		}
		return r.foreignReservations(prefix)
	}
	return nil
}

// oneRequestPerNode lists the nodes named by more than one active
// (CREATING or ACCEPTED) resize request.
func (r *Checker) oneRequestPerNode() []string {
	active := map[string][]string{}
	for _, rr := range r.sim.ResizeRequests() {
		if rr.State != "CREATING" && rr.State != "ACCEPTED" {
			continue
		}
		seen := map[string]bool{}
		for _, vm := range rr.Instances {
			if node, _, _, _, ok := naming.ParseVMName(vm); ok && !seen[node] {
				seen[node] = true
				active[node] = append(active[node], rr.Name)
			}
		}
	}
	var out []string
	for _, node := range sortedKeys(active) {
		if rrs := active[node]; len(rrs) > 1 {
			out = append(out, fmt.Sprintf("node %s has %d active resize requests %s", node, len(rrs), listOf(rrs)))
		}
	}
	return out
}

// migsLeft lists the cluster's MIGs in Compute that no node record serves
// from: a request's MIG whose node generations all ended (or that no record
// names), or the pool's MIG of the layout before one MIG per request with
// no generation of that layout left. One MIG per resize request leaves
// none behind once the system is quiet.
func (r *Checker) migsLeft() []string {
	st := r.state()
	serving := map[string]bool{}
	legacy := map[string]bool{}
	for _, n := range st.Nodes {
		if !n.Phase.Serving() && !(n.RequestOpen && n.ResizeRequest != "") && n.Phase != model.PhaseDeleting {
			continue
		}
		if n.MIG != "" {
			serving[n.MIG] = true
		} else if n.ResizeRequest != "" {
			legacy[naming.MIG(r.spec.ID, n.Pool)] = true
		}
	}
	prefix := "fs-" + r.spec.ID + "-"
	var out []string
	for _, m := range r.sim.MIGs() {
		if !strings.HasPrefix(m.Name, prefix) || serving[m.Name] || legacy[m.Name] {
			continue
		}
		var rrs []string
		for _, rr := range r.sim.ResizeRequests() {
			if rr.MIG == m.Name {
				rrs = append(rrs, rr.Name+" "+rr.State)
			}
		}
		out = append(out, fmt.Sprintf("MIG %s (requests %s, VMs %s) serves no node", m.Name, listOf(rrs), listOf(m.Instances)))
	}
	return out
}

// idleDynamic lists the live dynamic VMs whose node Slurm has not allocated
// to a job for SuspendTime plus grace.
func (r *Checker) idleDynamic(w world, now time.Time, grace time.Duration, notBefore time.Time, strict bool) []string {
	st := r.state()
	var out []string
	for _, node := range w.nodes {
		vm := w.byNode[node]
		n, ok := r.slurm.Node(node)
		if !ok || n.Static() {
			continue
		}
		// A node flexslurm holds as static (a make-before-break successor)
		// is not dynamic, whatever its index.
		// Neither is a retiring node handing over to its successor: its
		// idleness counts from the hand-over, and flexslurm releases it once
		// drained and idle (make-before-break overlap, reported apart).
		if rec, known := st.Nodes[node]; known && (rec.Kind == model.NodeStatic || rec.Successor != "") {
			continue
		}
		// Nor is a node flexslurm holds drained for its health repair (it
		// must finish: repair_progress) or for an operator's diagnosis.
		if rec, known := st.Nodes[node]; known && rec.Repair != model.RepairNone {
			r.inv.held[node] = true
			continue
		}
		if r.inv.held[node] {
			delete(r.inv.held, node)
			r.inv.heldUntil[node] = now
		}
		// Nor is a VM kept for a pending job (the rule: no dynamic
		// VM without a pending or running job): the job it was provisioned
		// for, requeued and waiting for its other nodes, or a pending job
		// whose nodes flexslurm holds it among (a job a health failure
		// requeued, which Slurm may place on it again).
		holding := holdingJobs(st, node)
		kept := false
		for _, id := range holding {
			if j, ok := st.Jobs[id]; ok && j.State == model.JobPending {
				if sj, ok := r.slurm.Job(id); !ok || sj.Active() {
					kept = true
				}
			}
		}
		if kept {
			continue
		}
		if n.JobID() != "" {
			if j, ok := r.slurm.Job(n.JobID()); ok && j.Active() {
				continue
			}
		}
		idle := vm.Created
		if n.FreedAt().After(idle) {
			idle = n.FreedAt()
		}
		// A drained node cannot take a job: it is idle from its resume.
		if n.UndrainedAt().After(idle) {
			idle = n.UndrainedAt()
		}
		// Nor is a node held for a repair or a diagnosis idle before the
		// hold ended (a FAIL after a diagnosis, say, whose replacement a
		// crash delays): it is idle from then, as from a resume.
		if u := r.inv.heldUntil[node]; u.After(idle) {
			idle = u
		}
		// A VM kept for a pending job (above) is idle from the moment
		// that job ended, not from before.
		for _, id := range holding {
			if sj, ok := r.slurm.Job(id); ok && !sj.Active() && sj.EndAt().After(idle) && !sj.EndAt().After(now) {
				idle = sj.EndAt()
			}
		}
		deadline := latest(idle.Add(r.slurm.SuspendTime()+grace), notBefore)
		if strict || now.After(deadline) {
			if strict && now.Before(idle.Add(r.slurm.SuspendTime())) {
				continue
			}
			out = append(out, fmt.Sprintf("VM %s of node %s (Slurm: %s) has had no job since %s", vm.Name, node, n.State(), lang.FormatDuration(idle.Sub(r.start))))
		}
	}
	return out
}

// holdingJobs lists the jobs flexslurm may keep a node's VM for: the job
// it was provisioned for and the jobs whose recorded nodes include it, in
// no particular order (idleDynamic's use of them does not depend on it).
func holdingJobs(st *model.State, node string) []string {
	var out []string
	if rec, known := st.Nodes[node]; known && rec.JobID != "" {
		out = append(out, rec.JobID)
	}
	for _, j := range st.Jobs {
		if slices.Contains(j.Nodes, node) && !slices.Contains(out, j.ID) {
			out = append(out, j.ID)
		}
	}
	return out
}

// foreignTouched lists foreign VMs that are gone and calls flexslurm made
// that name a foreign VM or MIG.
func (r *Checker) foreignTouched(w world) []string {
	foreign := r.foreign()
	if len(foreign) == 0 {
		// No call can name a foreign resource: the calls so far count as
		// scanned, as the loop below would leave them.
		r.foreignScanned = r.compute.Len()
		return append([]string(nil), r.foreignCalls...)
	}
	var out []string
	for _, f := range foreign {
		alive := false
		for _, vm := range w.all {
			if vm.Name == f.Name && vm.Zone == f.Zone && vm.Status != "STOPPING" {
				alive = true
			}
		}
		if !alive {
			out = append(out, fmt.Sprintf("foreign VM %s is gone or being deleted", f.Name))
		}
	}
	// Calls are scanned once each, as they come.
	calls := r.compute.Since(r.foreignScanned)
	r.foreignScanned += len(calls)
	for _, f := range foreign {
		if len(calls) == 0 {
			break
		}
		var re *regexp.Regexp // compiled for the first call that may name f
		for _, c := range calls {
			// (Each of Path and Body apart: the pattern below matches
			// within one of them.)
			if c.Method == "GET" || !(strings.Contains(c.Path, f.Name) || strings.Contains(c.Body, f.Name) ||
				strings.Contains(c.Path, f.MIG) || strings.Contains(c.Body, f.MIG)) {
				continue
			}
			if re == nil {
				re = regexp.MustCompile(`(^|[^a-z0-9-])(` + regexp.QuoteMeta(f.Name) + `|` + regexp.QuoteMeta(f.MIG) + `)([^a-z0-9-]|$)`)
			}
			if re.MatchString(c.Path) || re.MatchString(c.Body) {
				r.foreignCalls = append(r.foreignCalls, fmt.Sprintf("flexslurm called %s %s at %s naming foreign %s", c.Method, c.Path, lang.FormatDuration(c.Time.Sub(r.start)), f.Name))
			}
		}
	}
	return append(out, r.foreignCalls...)
}

// foreignReservations lists Slurm commands that name a reservation whose
// name lacks prefix: the value of any field whose key mentions a
// reservation ("reservation", "reservation_name", …), or the name field of
// a command about reservations.
//
// Commands are scanned once each, as they come (the command log only grows and the
// prefix is the run's): a chaos run checks this after every event.
func (r *Checker) foreignReservations(prefix string) []string {
	if r.resvPrefix != prefix {
		r.resvPrefix, r.resvScanned, r.resvFound = prefix, 0, nil
	}
	cmds := r.commands()
	for _, c := range cmds[r.resvScanned:] {
		about := strings.Contains(strings.ToLower(string(c.Command)), "reservation")
		for _, k := range sortedKeys(c.Raw) {
			v := c.Raw[k]
			key := strings.ToLower(k)
			if !strings.Contains(key, "reservation") && !strings.HasPrefix(key, "resv") && !(about && key == "name") {
				continue
			}
			for _, name := range stringsIn(v) {
				if !strings.HasPrefix(name, prefix) {
					r.resvFound = append(r.resvFound, fmt.Sprintf("command %s at %s names reservation %q (%s)", c.Command, lang.FormatDuration(c.At.Sub(r.start)), name, k))
				}
			}
		}
	}
	r.resvScanned = len(cmds)
	return append([]string(nil), r.resvFound...)
}

func stringsIn(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			out = append(out, stringsIn(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, k := range sortedKeys(t) {
			out = append(out, stringsIn(t[k])...)
		}
		return out
	}
	return nil
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ownDrainFollowed lists the running nodes the Slurm model shows drained
// with flexslurm's health-check reason for their record's current VM,
// with no repair following them in the record (none, or awaiting the
// report), for longer than grace (and past notBefore).
func (r *Checker) ownDrainFollowed(now time.Time, grace time.Duration, notBefore time.Time, strict bool) []string {
	if r.slurm == nil {
		return nil
	}
	s := r.inv
	st := r.state()
	seen := map[string]bool{}
	var out []string
	for _, n := range st.SortedNodes() {
		if n.Phase != model.PhaseRunning || (n.Repair != model.RepairNone && n.Repair != model.RepairAwaitReport) {
			continue
		}
		sn, ok := r.slurm.Node(n.Name)
		if !ok || !sn.Flag("DRAIN") || !slurmstate.ParseNode(n.Name, []string{"IDLE", "DRAIN"}, sn.Reason()).OwnHealthDrainOf(n.Generation) {
			continue
		}
		key := n.Name + "/" + n.VMName
		seen[key] = true
		since, ok := s.ownDrainSince[key]
		if !ok {
			since = now
			s.ownDrainSince[key] = now
		}
		if deadline := latest(since.Add(grace), notBefore); strict || now.After(deadline) {
			out = append(out, fmt.Sprintf("node %s (%s) drained by flexslurm's health check (%q) with no repair following it since %s",
				n.Name, n.VMName, sn.Reason(), lang.FormatDuration(since.Sub(r.start))))
		}
	}
	for k := range s.ownDrainSince {
		if !seen[k] {
			delete(s.ownDrainSince, k)
		}
	}
	return out
}
