package check

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/scenario/delivery"
	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/dev/scenario/slurmmodel"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/store"
)

// world is what the simulator shows of VMs at one instant.
type world struct {
	all []computesim.Instance
	// ours are the VMs labelled as this cluster's (STOPPING included).
	ours []computesim.Instance
	// byNode is each node's live (not STOPPING) VM of this cluster, the
	// newest when there are several.
	byNode map[string]slurmmodel.VM
	// nodes are byNode's keys, sorted.
	nodes []string
	// liveByNode lists every live VM of this cluster per node.
	liveByNode map[string][]string
	// multiVM are one_vm_per_node's violations: the nodes with more than
	// one live VM, by name.
	multiVM []string
}

// vmView is what the simulator shows of VMs now. It is computed once per
// simulator state (computesim.Sim.Version) and shared until the state
// changes (the runner asks for it several times an event): callers must not
// modify it.
func (r *Checker) vmView() world {
	v := r.sim.Version()
	if r.worldOK && r.worldVersion == v && !r.noStateReuse {
		return r.world
	}
	w := r.computeVMView()
	r.world, r.worldVersion, r.worldOK = w, v, true
	return w
}

func (r *Checker) computeVMView() world {
	w := world{all: r.sim.Instances(), byNode: map[string]slurmmodel.VM{}, liveByNode: map[string][]string{}}
	for _, vm := range w.all {
		if !r.ours(vm) {
			continue
		}
		w.ours = append(w.ours, vm)
		if vm.Status == "STOPPING" {
			continue
		}
		node, _, _, _, ok := naming.ParseVMName(vm.Name)
		if !ok {
			continue
		}
		w.liveByNode[node] = append(w.liveByNode[node], vm.Name)
		if cur, seen := w.byNode[node]; !seen || vm.Created.After(cur.Created) {
			w.byNode[node] = slurmmodel.VM{Name: vm.Name, Zone: vm.Zone, Status: vm.Status, Created: vm.Created}
		}
	}
	// A node has a live VM in liveByNode exactly when byNode has one.
	w.nodes = sortedKeys(w.byNode)
	for _, node := range w.nodes {
		if vms := w.liveByNode[node]; len(vms) > 1 {
			vms = sortStrings(vms)
			w.multiVM = append(w.multiVM, fmt.Sprintf("node %s has %d live VMs %s", node, len(vms), listOf(vms)))
		}
	}
	return w
}

// ours reports whether a VM carries this cluster's labels.
func (r *Checker) ours(vm computesim.Instance) bool {
	return vm.Labels[naming.LabelManagedBy] == naming.ManagedBy && vm.Labels[naming.LabelCluster] == r.spec.ID
}

// state reads the stored records: every pool, node and active job, plus the
// jobs named.
//
// The whole state (no jobs named) is read once per store write and shared
// by the checks until the next one (invariants run after every event, and
// most events change nothing): callers must not modify it.
func (r *Checker) state(jobs ...string) *model.State {
	whole := len(jobs) == 0 && !r.noStateReuse
	gen := r.gen()
	if whole && r.stateCache != nil && r.stateGen == gen {
		return r.stateCache
	}
	read := r.store.Read
	if r.view != nil && !r.noStateReuse {
		read = r.view
	}
	st, err := read(r.ctx, store.Scope{Cluster: r.spec.ID, AllPools: true, Jobs: jobs})
	if err != nil {
		r.note("reading the store: %v", err)
		return model.NewState()
	}
	if whole {
		r.stateCache, r.stateGen = st, gen
	}
	return st
}

// evaluate runs one check now.
func (r *Checker) evaluate(c lang.Check, step int) []Result {
	if !r.readingsMatch(c.Readings) {
		return nil
	}
	var out []Result
	add := func(name string, pass bool, expected, actual string) {
		if c.Name != "" {
			name = c.Name + ": " + name
		}
		out = append(out, Result{At: r.since(), Step: step, Line: c.Line(), Name: name, Pass: pass, Expected: expected, Actual: actual})
	}
	if v := c.VMs; v != nil {
		r.checkVMs(v, add)
	}
	if len(c.Pools) > 0 {
		st := r.state()
		for _, pc := range c.Pools {
			checkPool(st, pc, r.now(), add)
		}
	}
	if len(c.Nodes) > 0 || len(c.Jobs) > 0 {
		var ids []string
		for _, j := range c.Jobs {
			ids = append(ids, j.ID)
		}
		st := r.state(ids...)
		for _, nc := range c.Nodes {
			checkNode(st, nc, add)
		}
		for _, jc := range c.Jobs {
			checkJob(st, jc, add)
		}
	}
	if rr := c.ResizeRequests; rr != nil {
		r.checkRRs(rr, add)
	}
	if sc := c.SlurmCommands; sc != nil {
		r.checkCommands(sc, add)
	}
	if len(c.SlurmNodes) > 0 {
		w := r.vmView()
		st := r.state()
		for _, sn := range c.SlurmNodes {
			r.checkSlurmNode(sn, w, st, add)
		}
	}
	for _, sj := range c.SlurmJobs {
		r.checkSlurmJob(sj, add)
	}
	if cc := c.Counter; cc != nil {
		r.checkCounter(cc, add)
	}
	for _, inv := range c.Invariant {
		v := r.strictInvariant(inv)
		add("invariant "+inv, len(v) == 0, "holds", orNone(v))
	}
	return out
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "holds"
	}
	return strings.Join(v, "; ")
}

type addFunc func(name string, pass bool, expected, actual string)

func listOf(names []string) string {
	if len(names) == 0 {
		return "[]"
	}
	return "[" + strings.Join(names, " ") + "]"
}

func (r *Checker) checkVMs(v *lang.VMCheck, add addFunc) {
	w := r.vmView()
	var names []string
	var sel []computesim.Instance
	for _, vm := range w.all {
		if r.ours(vm) == v.Foreign {
			continue
		}
		if vm.Status == "STOPPING" && !v.IncludeStopping {
			continue
		}
		if v.Pool != "" && vm.Labels[naming.LabelPool] != v.Pool {
			continue
		}
		if v.Node != "" {
			if n, _, _, _, ok := naming.ParseVMName(vm.Name); !ok || n != v.Node {
				continue
			}
		}
		// A VM its MIG named from a generation's base name (a request
		// that could not name it) is checked under that base, which is
		// what the file names: the assertion holds under both readings.
		names = append(names, naming.BaseVMName(vm.Name))
		sel = append(sel, vm)
	}
	sort.Strings(names)
	what := "VMs"
	if v.Foreign {
		what = "foreign VMs"
	}
	if v.Pool != "" {
		what += " of pool " + v.Pool
	}
	if v.Node != "" {
		what += " of node " + v.Node
	}
	if v.Names != nil {
		want := sortStrings(v.Names)
		add(what, strings.Join(want, " ") == strings.Join(names, " "), listOf(want), listOf(names))
	}
	if v.Count.IsSet() {
		ok, exp := v.Count.Expect(len(names))
		add(what+" count", ok, exp, fmt.Sprintf("%d %s", len(names), listOf(names)))
	}
	r.checkVMProperties(v, what, sel, add)
}

// checkVMProperties checks what every selected VM must have: its boot disk
// size, the template its pool's record names now, an end no later than a
// given time.
func (r *Checker) checkVMProperties(v *lang.VMCheck, what string, sel []computesim.Instance, add addFunc) {
	sort.Slice(sel, func(i, j int) bool { return sel[i].Name < sel[j].Name })
	if v.BootDiskSizeGB != 0 {
		var bad []string
		for _, vm := range sel {
			if vm.BootDiskSizeGB != v.BootDiskSizeGB {
				bad = append(bad, fmt.Sprintf("%s=%dGB", vm.Name, vm.BootDiskSizeGB))
			}
		}
		add(what+" boot disk size", len(bad) == 0, fmt.Sprintf("%d GB on every VM", v.BootDiskSizeGB), listOf(bad))
	}
	if v.Zone != "" {
		var bad []string
		for _, vm := range sel {
			if vm.Zone != v.Zone {
				bad = append(bad, vm.Name+" in "+vm.Zone)
			}
		}
		add(what+" zone", len(bad) == 0, "every VM in "+v.Zone, listOf(bad))
	}
	if v.PoolTemplate {
		st := r.state()
		var bad []string
		for _, vm := range sel {
			p, ok := st.Pools[vm.Labels[naming.LabelPool]]
			if !ok || p.Template == "" || vm.Template != p.Template {
				want := "(no pool record)"
				if ok {
					want = p.Template
				}
				bad = append(bad, fmt.Sprintf("%s from %s, pool's %s", vm.Name, vm.Template, want))
			}
		}
		add(what+" created from their pool's current template", len(bad) == 0, "every VM", listOf(bad))
	}
	if v.EndBy != nil {
		limit := r.start.Add(time.Duration(*v.EndBy))
		var bad []string
		for _, vm := range sel {
			if vm.TerminationTime.IsZero() || vm.TerminationTime.After(limit) {
				bad = append(bad, fmt.Sprintf("%s ends %s", vm.Name, lang.FormatDuration(vm.TerminationTime.Sub(r.start))))
			}
		}
		add(what+" end by "+lang.FormatDuration(time.Duration(*v.EndBy)), len(bad) == 0, "every VM", listOf(bad))
	}
	if v.EndAfter != nil {
		limit := r.start.Add(time.Duration(*v.EndAfter))
		var bad []string
		for _, vm := range sel {
			if vm.TerminationTime.IsZero() || vm.TerminationTime.Before(limit) {
				bad = append(bad, fmt.Sprintf("%s ends %s", vm.Name, lang.FormatDuration(vm.TerminationTime.Sub(r.start))))
			}
		}
		add(what+" end at or after "+lang.FormatDuration(time.Duration(*v.EndAfter)), len(bad) == 0, "every VM", listOf(bad))
	}
}

func checkNode(st *model.State, nc lang.NodeCheck, add addFunc) {
	n, ok := st.Nodes[nc.Name]
	name := "node " + nc.Name
	if nc.Exists != nil {
		add(name+" exists", ok == *nc.Exists, fmt.Sprint(*nc.Exists), fmt.Sprint(ok))
	}
	if !ok {
		if nc.Phase != "" || nc.Generation != nil || nc.Kind != "" || nc.Job != nil || nc.LastEnd != "" || nc.VM != "" || nc.Repair != "" || nc.HostRepaired != nil {
			add(name, false, "a node record", "no record")
		}
		return
	}
	if nc.Phase != "" {
		add(name+" phase", string(n.Phase) == nc.Phase, nc.Phase, string(n.Phase)+reasonSuffix(n.Reason))
	}
	if nc.Generation != nil {
		add(name+" generation", n.Generation == *nc.Generation, fmt.Sprint(*nc.Generation), fmt.Sprint(n.Generation))
	}
	if nc.Kind != "" {
		add(name+" kind", string(n.Kind) == nc.Kind, nc.Kind, string(n.Kind))
	}
	if nc.Job != nil {
		add(name+" job", n.JobID == *nc.Job, quote(*nc.Job), quote(n.JobID))
	}
	if nc.LastEnd != "" {
		add(name+" last end", string(n.LastEnd) == nc.LastEnd, nc.LastEnd, string(n.LastEnd))
	}
	if nc.VM != "" {
		add(name+" VM", n.VMName == nc.VM, nc.VM, n.VMName)
	}
	if nc.Repair != "" {
		add(name+" repair", lang.RepairName(n.Repair) == nc.Repair, nc.Repair, lang.RepairName(n.Repair)+reasonSuffix(n.Reason))
	}
	if nc.HostRepaired != nil {
		add(name+" host repaired", n.HostRepaired == *nc.HostRepaired, fmt.Sprint(*nc.HostRepaired), fmt.Sprint(n.HostRepaired))
	}
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return " (" + r + ")"
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// readingsMatch reports whether the simulator's readings have each switch
// of want as given (lang.Check.Readings).
func (r *Checker) readingsMatch(want map[string]bool) bool {
	if len(want) == 0 {
		return true
	}
	got := r.sim.Readings()
	for name, on := range want {
		if v, ok := got.Switch(name); !ok || v != on {
			return false
		}
	}
	return true
}

func checkPool(st *model.State, pc lang.PoolCheck, now time.Time, add addFunc) {
	p, ok := st.Pools[pc.ID]
	name := "pool " + pc.ID
	if !ok {
		add(name, false, "a pool record", "no record")
		return
	}
	if pc.Shortage != "" || pc.ShortageCode != "" {
		got, code := "none", ""
		if p.Shortage != nil {
			got, code = p.Shortage.Class, p.Shortage.Code
		}
		if pc.Shortage != "" {
			add(name+" shortage", got == pc.Shortage, pc.Shortage, got)
		}
		if pc.ShortageCode != "" {
			add(name+" shortage code", code == pc.ShortageCode, pc.ShortageCode, noneIfEmpty(code))
		}
	}
	if pc.Condition != "" {
		if pc.Condition == "none" {
			add(name+" condition", p.Condition == "", "none", noneIfEmpty(p.Condition))
		} else {
			add(name+" condition", strings.HasPrefix(p.Condition, pc.Condition), pc.Condition+"…", noneIfEmpty(p.Condition))
		}
	}
	if pc.Backoff != "" {
		got := "none"
		if now.Before(p.BackoffUntil) {
			got = p.BackoffReason
		}
		add(name+" backoff", got == pc.Backoff, pc.Backoff, got)
	}
	if pc.WorkloadPolicyRefused != "" {
		got := noneIfEmpty(p.WorkloadPolicyRefused)
		add(name+" workload policy refused", got == pc.WorkloadPolicyRefused, pc.WorkloadPolicyRefused, got)
	}
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func checkJob(st *model.State, jc lang.JobCheck, add addFunc) {
	j, ok := st.Jobs[jc.ID]
	name := "job " + jc.ID
	if jc.Exists != nil {
		add(name+" exists", ok == *jc.Exists, fmt.Sprint(*jc.Exists), fmt.Sprint(ok))
	}
	if !ok {
		if jc.State != "" || jc.Nodes != nil {
			add(name, false, "a job record", "no record")
		}
		return
	}
	if jc.State != "" {
		add(name+" state", string(j.State) == jc.State, jc.State, string(j.State)+reasonSuffix(j.Reason))
	}
	if jc.Nodes != nil {
		want, got := sortStrings(jc.Nodes), sortStrings(j.Nodes)
		add(name+" nodes", strings.Join(want, " ") == strings.Join(got, " "), listOf(want), listOf(got))
	}
}

func (r *Checker) selectRRs(rc *lang.RRCheck) []computesim.ResizeRequest {
	var re *regexp.Regexp
	if rc.Match != "" {
		re = regexp.MustCompile(rc.Match)
	}
	var out []computesim.ResizeRequest
	for _, rr := range r.sim.ResizeRequestHistory() {
		if rc.Name != "" && rr.Name != rc.Name {
			continue
		}
		if re != nil && !re.MatchString(rr.Name) {
			continue
		}
		if rc.Node != "" && !NamesNode(rr.Instances, rc.Node) {
			continue
		}
		if rc.Job != "" && !strings.Contains(rr.Name, "-j"+strings.ReplaceAll(rc.Job, "_", "-")+"-g") {
			continue
		}
		if len(rc.State) > 0 && !stateIn(rr.State, rc.State) {
			continue
		}
		out = append(out, rr)
	}
	return out
}

func stateIn(state string, want []string) bool {
	for _, w := range want {
		if w == state || (w == "active" && (state == "CREATING" || state == "ACCEPTED")) {
			return true
		}
	}
	return false
}

func (r *Checker) checkRRs(rc *lang.RRCheck, add addFunc) {
	sel := r.selectRRs(rc)
	var names, described []string
	states, policies := map[string]string{}, map[string]string{}
	for _, rr := range sel {
		names = append(names, rr.Name)
		described = append(described, rr.Name+"="+rr.State)
	}
	for _, rr := range r.sim.ResizeRequestHistory() {
		states[rr.Name] = rr.State
		policies[rr.Name] = rr.WorkloadPolicy
	}
	sort.Strings(names)
	sort.Strings(described)
	what := "resize requests" + rrSelector(rc)
	if rc.Names != nil {
		want := sortStrings(rc.Names)
		add(what, strings.Join(want, " ") == strings.Join(names, " "), listOf(want), listOf(described))
	}
	if rc.Count.IsSet() {
		ok, exp := rc.Count.Expect(len(sel))
		add(what+" count", ok, exp, fmt.Sprintf("%d %s", len(sel), listOf(described)))
	}
	for _, name := range sortedKeys(rc.States) {
		got, ok := states[name]
		if !ok {
			got = "absent"
		}
		add("resize request "+name+" state", got == rc.States[name], rc.States[name], got)
	}
	for _, name := range sortedKeys(rc.WorkloadPolicies) {
		got, ok := policies[name]
		switch {
		case !ok:
			got = "absent"
		case got == "":
			got = "none"
		}
		want := rc.WorkloadPolicies[name]
		if want == "" {
			want = "none"
		}
		add("resize request "+name+" MIG's workload policy", got == want, want, got)
	}
}

func rrSelector(rc *lang.RRCheck) string {
	var parts []string
	if rc.Name != "" {
		parts = append(parts, "name "+rc.Name)
	}
	if rc.Match != "" {
		parts = append(parts, "matching "+rc.Match)
	}
	if rc.Node != "" {
		parts = append(parts, "of node "+rc.Node)
	}
	if rc.Job != "" {
		parts = append(parts, "of job "+rc.Job)
	}
	if len(rc.State) > 0 {
		parts = append(parts, "in "+strings.Join(rc.State, "|"))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func (r *Checker) within(t time.Time, from, to *lang.At) bool {
	if from != nil && t.Before(r.start.Add(from.Offset)) {
		return false
	}
	if to != nil && t.After(r.start.Add(to.Offset)) {
		return false
	}
	return true
}

func (r *Checker) checkCommands(cc *lang.CommandCheck, add addFunc) {
	var got []string
	for _, c := range r.commands() {
		if cc.Command != "" && string(c.Command) != cc.Command {
			continue
		}
		if cc.Node != "" && !slices.Contains(c.Nodes, cc.Node) {
			continue
		}
		if cc.Job != "" && c.Job != cc.Job {
			continue
		}
		if cc.ReasonContains != "" && !strings.Contains(c.Reason, cc.ReasonContains) {
			continue
		}
		if !r.within(c.At, cc.From, cc.To) {
			continue
		}
		target := strings.Join(c.Nodes, ",")
		if c.Job != "" {
			target = "job " + c.Job
		}
		got = append(got, fmt.Sprintf("%s %s at %s", c.Command, target, lang.FormatDuration(c.At.Sub(r.start))))
	}
	var sel []string
	for _, s := range []struct{ k, v string }{{"command", cc.Command}, {"node", cc.Node}, {"job", cc.Job}, {"reason containing", cc.ReasonContains}} {
		if s.v != "" {
			sel = append(sel, s.k+" "+s.v)
		}
	}
	what := "Slurm commands"
	if len(sel) > 0 {
		what += " (" + strings.Join(sel, ", ") + ")"
	}
	ok, exp := cc.Count.Expect(len(got))
	if !cc.Count.IsSet() {
		ok, exp = len(got) > 0, "at least 1"
	}
	add(what, ok, exp, fmt.Sprintf("%d %s", len(got), listOf(quoteAll(got))))
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "{" + x + "}"
	}
	return out
}

func (r *Checker) checkSlurmNode(sn lang.SlurmNodeCheck, w world, st *model.State, add addFunc) {
	n, ok := r.slurm.Node(sn.Name)
	name := "Slurm node " + sn.Name
	if !ok {
		add(name, false, "a node known to Slurm", "unknown (no snapshot named it)")
		return
	}
	if sn.State != "" {
		base, flags, _ := lang.ParseSlurmState(sn.State)
		want := lang.FormatSlurmState(base, flags)
		add(name+" state", want == n.State(), want, n.State()+reasonSuffix(n.Reason()))
	}
	for _, f := range sn.Flags {
		add(name+" has "+f, n.Flag(f), "set", n.State())
	}
	for _, f := range sn.NotFlags {
		add(name+" lacks "+f, !n.Flag(f), "not set", n.State())
	}
	if sn.Serviceable != nil {
		wanted := func(node string) bool {
			rec, ok := st.Nodes[node]
			return ok && rec.Phase.Serving()
		}
		ok, why := r.slurm.Serviceable(sn.Name, w.byNode, wanted)
		exp := "serviceable"
		if !*sn.Serviceable {
			exp = "not serviceable"
		}
		add(name+" serviceable", ok == *sn.Serviceable, exp, why)
	}
}

func (r *Checker) checkSlurmJob(sj lang.SlurmJobCheck, add addFunc) {
	j, ok := r.slurm.Job(sj.ID)
	name := "Slurm job " + sj.ID
	if !ok {
		add(name, false, "a job submitted to Slurm", "unknown")
		return
	}
	if sj.State != "" {
		add(name+" state", strings.EqualFold(sj.State, j.State()), strings.ToUpper(sj.State), j.State())
	}
	if sj.Comment != nil {
		add(name+" comment", regexp.MustCompile(*sj.Comment).MatchString(j.Comment()), "matching "+*sj.Comment, fmt.Sprintf("%q", j.Comment()))
	}
	if sj.MinRestarts > 0 {
		add(name+" restarts", j.Restarts() >= sj.MinRestarts, fmt.Sprintf("at least %d", sj.MinRestarts), fmt.Sprintf("%d", j.Restarts()))
	}
	if sj.Nodes != nil {
		want, got := slices.Sorted(slices.Values(sj.Nodes)), slices.Sorted(slices.Values(j.Nodes()))
		add(name+" nodes", slices.Equal(want, got), fmt.Sprint(want), fmt.Sprint(got))
	}
	if sj.MaxRestarts != nil {
		add(name+" restarts", j.Restarts() <= *sj.MaxRestarts, fmt.Sprintf("at most %d", *sj.MaxRestarts), fmt.Sprintf("%d", j.Restarts()))
	}
}

func (r *Checker) checkCounter(cc *lang.CounterCheck, add addFunc) {
	var times []time.Time
	what := cc.Counter
	switch cc.Counter {
	case "compute_calls":
		calls := r.compute.Calls()
		var pathRe, bodyRe *regexp.Regexp
		if cc.Path != "" {
			pathRe = regexp.MustCompile(cc.Path)
		}
		if cc.Body != "" {
			bodyRe = regexp.MustCompile(cc.Body)
		}
		for _, c := range calls {
			if cc.Method != "" && !strings.EqualFold(cc.Method, c.Method) {
				continue
			}
			if pathRe != nil && !pathRe.MatchString(c.Path) {
				continue
			}
			if bodyRe != nil && !bodyRe.MatchString(c.Body) {
				continue
			}
			switch cc.Outcome {
			case "ok":
				if c.Failed() {
					continue
				}
			case "error":
				if !c.Failed() {
					continue
				}
			case "injected":
				if c.Injected == "" {
					continue
				}
			}
			times = append(times, c.Time)
		}
		what = fmt.Sprintf("compute_calls %s %s", orAny(cc.Method), orAny(cc.Path))
		if cc.Body != "" {
			what += " body~" + cc.Body
		}
		if cc.Outcome != "" && cc.Outcome != "any" {
			what += " (" + cc.Outcome + ")"
		}
	case "resize_requests_created":
		var re *regexp.Regexp
		if cc.Match != "" {
			re = regexp.MustCompile(cc.Match)
			what += " matching " + cc.Match
		}
		n := 0
		for name := range r.rrSeen() {
			if re == nil || re.MatchString(name) {
				n++
			}
		}
		ok, exp := cc.Count.Expect(n)
		add(what, ok, exp, fmt.Sprint(n))
		return
	case "injected_errors":
		calls := r.compute.Calls()
		for _, c := range calls {
			if c.Injected != "" && (cc.Fault == "" || c.Injected == cc.Fault) {
				times = append(times, c.Time)
			}
		}
		if cc.Fault != "" {
			what += " of " + cc.Fault
		}
	default:
		for _, d := range r.deliveries.Records() {
			if cc.Topic != "" && d.Topic != cc.Topic || cc.Type != "" && d.Type != cc.Type || cc.Label != "" && d.Label != cc.Label {
				continue
			}
			switch cc.Counter {
			case "acks":
				if d.Outcome != "ack" {
					continue
				}
			case "nacks":
				if d.Outcome == "ack" {
					continue
				}
			case "redeliveries":
				if d.Kind != delivery.Retry {
					continue
				}
			case "duplicates":
				if d.Kind != delivery.Duplicate {
					continue
				}
			}
			times = append(times, d.At)
		}
		if cc.Counter == "dead_letters" {
			times = times[:0]
			for _, d := range r.deliveries.DeadLetters() {
				if (cc.Topic == "" || d.Topic == cc.Topic) && (cc.Type == "" || d.Type == cc.Type) && (cc.Label == "" || d.Label == cc.Label) {
					times = append(times, r.start.Add(d.At))
				}
			}
		}
		for _, s := range []struct{ k, v string }{{"topic", cc.Topic}, {"type", cc.Type}, {"label", cc.Label}} {
			if s.v != "" {
				what += " " + s.k + " " + s.v
			}
		}
	}
	var in []time.Time
	for _, t := range times {
		if r.within(t, cc.From, cc.To) {
			in = append(in, t)
		}
	}
	if cc.From != nil || cc.To != nil {
		what += fmt.Sprintf(" from %s to %s", atOr(cc.From, "start"), atOr(cc.To, "now"))
	}
	if cc.Count.IsSet() {
		ok, exp := cc.Count.Expect(len(in))
		add(what, ok, exp, fmt.Sprint(len(in)))
	}
	if cc.PerHourMax != nil {
		most, at := maxPerHour(in)
		actual := fmt.Sprintf("%d", most)
		if most > 0 {
			actual += " in the hour from " + lang.FormatDuration(at.Sub(r.start))
		}
		add(what+" per hour", most <= *cc.PerHourMax, fmt.Sprintf("at most %d in any hour", *cc.PerHourMax), actual)
	}
}

func atOr(a *lang.At, def string) string {
	if a == nil {
		return def
	}
	return lang.FormatDuration(a.Offset)
}

// maxPerHour returns the largest number of times within one hour of each
// other (a sliding window starting at each time) and the window's start.
func maxPerHour(ts []time.Time) (int, time.Time) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, at := 0, time.Time{}
	j := 0
	for i := range ts {
		for j < len(ts) && ts[j].Sub(ts[i]) < time.Hour {
			j++
		}
		if j-i > best {
			best, at = j-i, ts[i]
		}
	}
	return best, at
}

// --- watches ---

func (r *Checker) checkWatches() {
	now := r.now()
	for _, w := range r.watches {
		if w.done || now.Before(w.from) {
			continue
		}
		if !w.until.IsZero() && now.After(w.until) {
			r.closeWatch(w)
			continue
		}
		w.evals++
		if w.failed {
			continue
		}
		for _, c := range w.checks {
			for _, res := range r.evaluate(c, w.step) {
				if !res.Pass {
					res.Name = w.name + ": " + res.Name
					w.failed = true
					r.record([]Result{res})
				}
			}
		}
	}
}

func (r *Checker) closeWatch(w *watchState) {
	if w.done {
		return
	}
	w.done = true
	if w.failed {
		return
	}
	until := r.now()
	if !w.until.IsZero() && w.until.Before(until) {
		until = w.until
	}
	r.record([]Result{{At: until.Sub(r.start), Step: w.step, Name: w.name,
		Pass: true, Expected: fmt.Sprintf("holds from %s to %s", lang.FormatDuration(w.from.Sub(r.start)), lang.FormatDuration(until.Sub(r.start))),
		Actual: fmt.Sprintf("held in all %d evaluations", w.evals)}})
}
