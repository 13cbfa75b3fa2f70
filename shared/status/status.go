// Package status builds and prints the operator's view of flexslurm
// (`flexslurm status`): per cluster and node pool, the static minimum and
// the maximum, the nodes by phase, each node's VM, generation and time left
// before Compute Engine terminates it, the resize requests still waiting for
// capacity, the pool's backoff and breaker state, and, on request, how many
// messages wait in each dead-letter subscription.
//
// Collect reads the state through the store port (Firestore in production
// and in the local system); it writes nothing. Render formats a Snapshot as
// text. PeekDeadLetters measures dead-letter depth (deadletter.go).
//
// This package imports shared/model, shared/store and shared/config, and
// the Pub/Sub client for the dead-letter peek.
package status

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Source is what Collect reads: store.Store satisfies it.
type Source interface {
	Read(ctx context.Context, scope store.Scope) (*model.State, error)
	Clusters(ctx context.Context) ([]string, error)
}

var _ Source = store.Store(nil)

// Snapshot is the state of every cluster shown, as of At.
type Snapshot struct {
	// Local is Options.Local: remedies are the local system's.
	Local bool
	// At is the time the view is computed against (time left, ages).
	At       time.Time
	Clusters []Cluster
	// FutureRecords is set when a record was updated more than a minute
	// after At: the state was written under another clock (the local
	// system's scaled clock) and times left are then meaningless.
	FutureRecords time.Time
	// DeadLetters is nil when dead-letter depth was not measured.
	DeadLetters []Depth
}

// Cluster is one cluster's view.
type Cluster struct {
	ID string
	// Applied is false when no spec was ever applied (no cluster record).
	Applied     bool
	SpecVersion int64
	UpdatedAt   time.Time
	Pools       []Pool
	// SlurmConfig is the agent's comparison of its spec with Slurm's live
	// configuration, from the latest Slurm snapshot; nil when none.
	SlurmConfig *SlurmConfig
}

// SlurmConfig is what the agent found comparing its cluster spec with the
// configuration slurmctld runs with.
type SlurmConfig struct {
	// TakenAt is the snapshot's time.
	TakenAt time.Time
	// OtherSpec is set when the agent compared a spec other than the one
	// applied (its copy of the spec is not the applied one).
	OtherSpec   bool
	Divergences []model.SlurmDivergence
}

// Pool is one node pool's view. A pool that has nodes but no pool record
// (removed from the spec while nodes remained) has Known false.
type Pool struct {
	ID    string
	Known bool
	Zone  string
	// Zones are a multi-zone pool's zones (docs/design/zones.md); nil otherwise.
	Zones []string
	// Static is scaling_spec.min_node_count: nodes kept whether or not a
	// job waits. Max is max_node_count; nodes above Static are dynamic.
	Static, Max int
	// RunDuration is what Compute is asked for (600 s–7 d).
	RunDuration time.Duration
	// Ready is true once the pool's template is known to exist.
	Ready bool
	// Phases counts nodes by phase; every phase of model.Phases is present.
	Phases map[model.Phase]int
	// Nodes are ordered by index.
	Nodes []Node
	// InFlight lists nodes whose capacity was requested and not yet
	// granted, oldest request first.
	InFlight []ResizeRequest
	// Pending and Running are the active jobs of the pool, by id.
	Pending, Running []string
	Controls         Controls
	// LeftForOperator says, per node left drained for an operator (at its
	// repair limit, or for diagnosis after inconclusive checks), why.
	LeftForOperator []string
	// VersionWarnings are the reports of nodes whose current VM runs
	// another flexslurm version than the functions that built its
	// template (node.version_mismatch), by node.
	VersionWarnings []string
}

// Node is one node's view.
type Node struct {
	Name  string
	Kind  model.NodeKind
	Phase model.Phase
	VM    string
	// Zone is the zone the VM landed in, for a multi-zone pool's node
	// ("" otherwise: the pool's zone).
	Zone       string
	Generation int64
	// Termination is when Compute Engine ends the VM; zero when unknown
	// (capacity not granted yet, or no VM).
	Termination time.Time
	// TimeLeft is Termination - At; meaningful only when Termination is set.
	TimeLeft time.Duration
}

// ResizeRequest is a node's capacity request still in flight.
type ResizeRequest struct {
	Name string // resize request name ("" when the record has none yet)
	// MIG is the MIG that holds it (one MIG per resize request); "" for a
	// request of the layout before it, in the pool's MIG.
	MIG  string
	Node string
	Job  string // "" for a static node
	// Age is At - the node's RequestedAt; 0 when RequestedAt is unset.
	Age time.Duration
}

// Controls is a pool's backoff, breaker and condition state.
type Controls struct {
	Backoff   string // e.g. "capacity until 12:05:00Z (failure 3)"; "none"
	Breaker   string // e.g. "open since 11:50:00Z (3 bootstrap failures)"; "none"
	Condition string // operator-visible condition, e.g. "QuotaExceeded: QUOTA_EXCEEDED"; "" when healthy
	// Shortage is what Compute reports of a queued request short of
	// capacity or quota, e.g. "capacity: ZONE_RESOURCE_POOL_EXHAUSTED on
	// rr-x for 2h (since …)" (the message is in the condition); "" when
	// none.
	Shortage string
	// Overlap is the make-before-break overlap accumulated (node-time).
	Overlap time.Duration
	// PolicyRefused is the pool's workload policy when Compute refused
	// it (its requests then go without it: docs/design/placement.md), with
	// Compute's error code, e.g. "fs-c-p-wp-block (HTTP_400)"; "" otherwise.
	PolicyRefused string
}

// poolControls derives a pool's Controls from its record (nil for a pool
// without record).
func poolControls(p *model.Pool, at time.Time) Controls {
	c := Controls{Backoff: "none", Breaker: "none"}
	if p == nil {
		return c
	}
	if at.Before(p.BackoffUntil) {
		c.Backoff = fmt.Sprintf("%s until %s (failure %d)", p.BackoffReason, p.BackoffUntil.UTC().Format(time.RFC3339), p.BackoffAttempts)
	} else if p.BackoffAttempts > 0 {
		c.Backoff = fmt.Sprintf("expired (%d %s failures; next attempt allowed)", p.BackoffAttempts, p.BackoffReason)
	}
	switch {
	case !p.BreakerOpenedAt.IsZero():
		c.Breaker = fmt.Sprintf("open since %s (%d bootstrap failures)", p.BreakerOpenedAt.UTC().Format(time.RFC3339), p.BootstrapFailures)
	case p.BootstrapFailures > 0:
		c.Breaker = fmt.Sprintf("closed (%d consecutive bootstrap failures)", p.BootstrapFailures)
	}
	c.Condition = p.Condition
	if sh := p.Shortage; sh != nil {
		c.Shortage = fmt.Sprintf("%s: %s on %s for %s (since %s)", sh.Class, sh.Code, sh.Request, Human(at.Sub(sh.Since)),
			sh.Since.UTC().Format(time.RFC3339))
	}
	c.Overlap = time.Duration(p.OverlapSeconds) * time.Second
	if p.WorkloadPolicy != "" && p.WorkloadPolicyRefused == p.WorkloadPolicy {
		c.PolicyRefused = fmt.Sprintf("%s (%s)", p.WorkloadPolicyRefused, p.WorkloadPolicyError)
	}
	return c
}

// Options selects what Collect shows.
type Options struct {
	// Cluster limits the view to one cluster; "" shows every cluster.
	Cluster string
	// Local is set for the local system (`flexslurm local`): its remedies
	// are named instead of a real controller's.
	Local bool
}

// Collect reads the clusters (one Read per cluster, every pool with its
// nodes and active jobs) and builds their view as of at.
func Collect(ctx context.Context, src Source, at time.Time, o Options) (*Snapshot, error) {
	ids := []string{o.Cluster}
	if o.Cluster == "" {
		var err error
		if ids, err = src.Clusters(ctx); err != nil {
			return nil, err
		}
	}
	snap := &Snapshot{At: at, Local: o.Local}
	for _, id := range ids {
		st, err := src.Read(ctx, store.Scope{Cluster: id, AllPools: true, Slurm: true})
		if err != nil {
			return nil, fmt.Errorf("reading cluster %s: %w", id, err)
		}
		snap.Clusters = append(snap.Clusters, cluster(id, st, at))
		if t := latest(st); t.After(at.Add(time.Minute)) && t.After(snap.FutureRecords) {
			snap.FutureRecords = t
		}
	}
	return snap, nil
}

// cluster builds one cluster's view.
func cluster(id string, st *model.State, at time.Time) Cluster {
	c := Cluster{ID: id}
	if st.Cluster != nil {
		c.Applied, c.SpecVersion, c.UpdatedAt = true, st.Cluster.SpecVersion, st.Cluster.UpdatedAt
	}
	if st.Slurm != nil && st.Slurm.Config != nil {
		cc := st.Slurm.Config
		c.SlurmConfig = &SlurmConfig{TakenAt: st.Slurm.TakenAt, Divergences: cc.Divergences,
			OtherSpec: st.Cluster != nil && cc.SpecSHA256 != st.Cluster.SpecSHA256}
	}
	ids := map[string]bool{}
	for id := range st.Pools {
		ids[id] = true
	}
	for _, n := range st.Nodes {
		ids[n.Pool] = true
	}
	for _, j := range st.Jobs {
		if j.Pool != "" {
			ids[j.Pool] = true
		}
	}
	for _, pid := range sortedKeys(ids) {
		c.Pools = append(c.Pools, pool(pid, st, at))
	}
	return c
}

// pool builds one pool's view.
func pool(id string, st *model.State, at time.Time) Pool {
	p := Pool{ID: id, Phases: map[model.Phase]int{}}
	for _, ph := range model.Phases {
		p.Phases[ph] = 0
	}
	rec := st.Pools[id]
	if rec != nil {
		p.Known, p.Zone, p.Static, p.Max = true, rec.Zone, rec.MinNodes, rec.MaxNodes
		p.RunDuration, p.Ready = rec.RunDuration, rec.Ready
		if rec.MultiZone() {
			p.Zones = rec.Zones
		}
	}
	p.Controls = poolControls(rec, at)
	for _, n := range st.PoolNodes(id) {
		p.Phases[n.Phase]++
		v := Node{Name: n.Name, Kind: n.Kind, Phase: n.Phase, Generation: n.Generation}
		if n.Phase.HasVM() {
			v.VM = n.VMName
			if n.Phase != model.PhaseRequested {
				v.Zone = n.Zone
			}
			if !n.TerminationTime.IsZero() {
				v.Termination, v.TimeLeft = n.TerminationTime, n.TerminationTime.Sub(at)
			}
		}
		p.Nodes = append(p.Nodes, v)
		if n.Phase.HasVM() {
			switch n.Repair {
			case model.RepairLimit:
				p.LeftForOperator = append(p.LeftForOperator, fmt.Sprintf("%s: repair limit reached (%d repairs since %s), left drained: %s",
					n.Name, n.RepairCount, stamp(n.RepairCountSince), n.RepairReason))
			case model.RepairDiagnosis:
				p.LeftForOperator = append(p.LeftForOperator, fmt.Sprintf("%s: drained for diagnosis since %s: %s", n.Name, stamp(n.RepairSince), n.RepairReason))
			}
		}
		if n.VersionMismatch != "" && n.VersionMismatchVM == n.VMName && n.Phase.HasVM() {
			p.VersionWarnings = append(p.VersionWarnings, n.Name+": "+n.VersionMismatch)
		}
		if n.Phase == model.PhaseRequested {
			rr := ResizeRequest{Name: n.ResizeRequest, MIG: n.MIG, Node: n.Name, Job: n.JobID}
			if !n.RequestedAt.IsZero() {
				rr.Age = at.Sub(n.RequestedAt)
			}
			p.InFlight = append(p.InFlight, rr)
		}
	}
	sort.SliceStable(p.InFlight, func(i, j int) bool { return p.InFlight[i].Age > p.InFlight[j].Age })
	for _, j := range st.SortedJobs() {
		if j.Pool != id {
			continue
		}
		switch j.State {
		case model.JobPending:
			p.Pending = append(p.Pending, j.ID)
		case model.JobRunning:
			p.Running = append(p.Running, j.ID)
		}
	}
	return p
}

// latest returns the latest UpdatedAt of the state's records.
func latest(st *model.State) time.Time {
	var t time.Time
	bump := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	if st.Cluster != nil {
		bump(st.Cluster.UpdatedAt)
	}
	for _, p := range st.Pools {
		bump(p.UpdatedAt)
	}
	for _, n := range st.Nodes {
		bump(n.UpdatedAt)
	}
	for _, j := range st.Jobs {
		bump(j.UpdatedAt)
	}
	return t
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Render writes the snapshot as text: one block per cluster and pool, then
// the dead-letter depths (or how to measure them). Times are UTC RFC 3339;
// durations are rounded to the largest two units (Human).
func Render(w io.Writer, s *Snapshot) error {
	var b strings.Builder
	fmt.Fprintf(&b, "flexslurm status at %s\n", stamp(s.At))
	if !s.FutureRecords.IsZero() {
		fmt.Fprintf(&b, "warning: records were updated as late as %s, after this clock: the state was written\n"+
			"under another clock (the local system's scaled clock: pass its --clock); times left are off\n", stamp(s.FutureRecords))
	}
	if len(s.Clusters) == 0 {
		b.WriteString("\nno clusters\n")
	}
	for _, c := range s.Clusters {
		b.WriteString("\n")
		if c.Applied {
			fmt.Fprintf(&b, "cluster %s · spec v%d · updated %s\n", c.ID, c.SpecVersion, stamp(c.UpdatedAt))
		} else {
			fmt.Fprintf(&b, "cluster %s · no spec applied\n", c.ID)
		}
		renderSlurmConfig(&b, c.SlurmConfig, s.Local)
		if len(c.Pools) == 0 {
			b.WriteString("  no pools\n")
		}
		for _, p := range c.Pools {
			renderPool(&b, p)
		}
	}
	b.WriteString("\n")
	renderDeadLetters(&b, s.DeadLetters, s.At)
	_, err := io.WriteString(w, b.String())
	return err
}

// renderSlurmConfig says, loudly, when Slurm's configuration cannot serve
// the spec, with the slurm.conf lines to change.
func renderSlurmConfig(b *strings.Builder, c *SlurmConfig, local bool) {
	if c == nil {
		return
	}
	if c.OtherSpec {
		remedy := "copy the applied spec to the controller (`flexslurm install controller --spec SPEC`)"
		if local {
			remedy = "the local system's agent keeps the spec it started with: start it again with the applied one (`flexslurm local --spec SPEC`)"
		}
		fmt.Fprintf(b, "  WARNING: the Slurm agent compares Slurm with a spec other than the one applied (snapshot of %s):\n"+
			"    %s\n", stamp(c.TakenAt), remedy)
	}
	if len(c.Divergences) == 0 {
		fmt.Fprintf(b, "  Slurm's configuration serves the spec (snapshot of %s)\n", stamp(c.TakenAt))
		return
	}
	fmt.Fprintf(b, "  ERROR: Slurm's configuration cannot serve the spec (snapshot of %s); change slurm.conf:\n", stamp(c.TakenAt))
	for _, d := range c.Divergences {
		fmt.Fprintf(b, "    - %s\n      fix: %s\n", d.Problem, d.Fix)
	}
}

func renderPool(b *strings.Builder, p Pool) {
	if p.Known {
		ready := "ready"
		if !p.Ready {
			ready = "not ready (template pending)"
		}
		zone := "zone " + p.Zone
		if len(p.Zones) > 0 {
			zone = "zones " + strings.Join(p.Zones, ", ") + " (each request in one of them, where capacity is)"
		}
		fmt.Fprintf(b, "  pool %s · %s · static minimum %d · maximum %d (up to %d dynamic) · run duration %s · %s\n",
			p.ID, zone, p.Static, p.Max, max(p.Max-p.Static, 0), Human(p.RunDuration), ready)
	} else {
		fmt.Fprintf(b, "  pool %s · no pool record (removed from the spec?)\n", p.ID)
	}
	var phases []string
	for _, ph := range model.Phases {
		phases = append(phases, fmt.Sprintf("%s %d", ph, p.Phases[ph]))
	}
	fmt.Fprintf(b, "    nodes by phase: %s\n", strings.Join(phases, ", "))
	if len(p.Nodes) > 0 {
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    NODE\tKIND\tPHASE\tVM\tGEN\tTIME LEFT")
		for _, n := range p.Nodes {
			vm := dash(n.VM)
			if n.Zone != "" {
				vm += " in " + n.Zone
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%d\t%s\n", n.Name, n.Kind, n.Phase, vm, n.Generation, timeLeft(n))
		}
		tw.Flush()
	}
	for _, w := range p.LeftForOperator {
		fmt.Fprintf(b, "    LEFT FOR AN OPERATOR: %s (reportFaultyNodes repairs it: docs/design/repair-limit.md)\n", w)
	}
	for _, w := range p.VersionWarnings {
		fmt.Fprintf(b, "    WARNING: version mismatch on %s (deploy/README.md, \"Versions\")\n", w)
	}
	if len(p.InFlight) == 0 {
		b.WriteString("    resize requests in flight: none\n")
	} else {
		b.WriteString("    resize requests in flight:\n")
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		for _, rr := range p.InFlight {
			job := "static"
			if rr.Job != "" {
				job = "job " + rr.Job
			}
			age := "age unknown"
			if rr.Age > 0 {
				age = "age " + Human(rr.Age)
			}
			mig := "-"
			switch {
			case rr.MIG != "":
				mig = "MIG " + rr.MIG
			case rr.Name != "":
				mig = "the pool's MIG"
			}
			fmt.Fprintf(tw, "      %s\t%s\tnode %s\t%s\t%s\n", dash(rr.Name), mig, rr.Node, job, age)
		}
		tw.Flush()
	}
	fmt.Fprintf(b, "    jobs: pending %d%s, running %d%s\n", len(p.Pending), ids(p.Pending), len(p.Running), ids(p.Running))
	fmt.Fprintf(b, "    backoff: %s · breaker: %s\n", p.Controls.Backoff, p.Controls.Breaker)
	if p.Controls.Condition != "" {
		fmt.Fprintf(b, "    condition: %s\n", p.Controls.Condition)
	}
	if p.Controls.Shortage != "" {
		fmt.Fprintf(b, "    short of %s: the request stays queued, new requests wait for the backoff\n", p.Controls.Shortage)
	}
	if p.Controls.PolicyRefused != "" {
		fmt.Fprintf(b, "    compact placement: Compute refused workload policy %s; requests go without it, placement is best effort\n", p.Controls.PolicyRefused)
	}
	if p.Controls.Overlap > 0 {
		fmt.Fprintf(b, "    make-before-break overlap: %.1f node-hours\n", p.Controls.Overlap.Hours())
	}
}

func timeLeft(n Node) string {
	switch {
	case n.Termination.IsZero():
		return "-"
	case n.TimeLeft < 0:
		return "overdue " + Human(-n.TimeLeft)
	default:
		return Human(n.TimeLeft)
	}
}

func ids(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return " (" + strings.Join(v, ", ") + ")"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// Human formats a non-negative duration with its two largest units, rounded
// down: "6d23h", "2h5m", "12m30s", "45s", "0s". Negative durations are
// formatted as their absolute value.
func Human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	units := []struct {
		name string
		size time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}}
	var parts []string
	for _, u := range units {
		if n := d / u.size; n > 0 || len(parts) > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", n, u.name))
			d -= n * u.size
		}
		if len(parts) == 2 {
			break
		}
	}
	if len(parts) == 0 {
		return "0s"
	}
	if len(parts) == 2 && strings.HasPrefix(parts[1], "0") {
		parts = parts[:1]
	}
	return strings.Join(parts, "")
}
