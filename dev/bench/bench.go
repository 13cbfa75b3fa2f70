// Package bench measures what flexslurm costs and how it scales, and prints
// the table that BENCHMARKS.md records. The measurements are Go benchmarks in
// this package's tests (run them with `make bench`):
//
//   - BenchmarkCostPerEvent counts, per event type, the Firestore reads,
//     writes and transactions and the Compute calls one event costs, on the
//     Firestore emulator, and times the handler against one Firestore round
//     trip measured in the same run;
//   - BenchmarkBurst delivers 1,000 job-pending events, each one to three
//     times and shuffled, to concurrent function instances against the
//     Firestore emulator, and checks that exactly the needed VMs result;
//   - BenchmarkReconcileScale times one reconcile pass over 1,000 and 10,000
//     nodes in 100 pools, each size in a fresh process so that its peak
//     memory is its own;
//   - the hooks row comes from shared/hooks' BenchmarkResumeProgram64Nodes,
//     whose `go test -bench` output `make bench` hands over in
//     FLEXSLURM_BENCH_HOOKS.
//
// This file holds what the benchmarks share: specs with many flex-start
// pools built from the example, a Compute wrapper that counts and times
// calls by method, and the result table.
package bench

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// WithFlexPools returns a copy of base whose flex-start pools are replaced by
// n copies of base's first flex-start pool, with ids PoolID(0..n-1),
// min_node_count 0 and max_node_count maxNodes, each the only pool of a
// partition of the same id. Non-flex pools (the login pool) are kept. The
// result is validated by a round trip through spec.Parse.
func WithFlexPools(base *spec.Cluster, n, maxNodes int) (*spec.Cluster, error) {
	flex := base.FlexPools()
	if len(flex) == 0 {
		return nil, fmt.Errorf("spec %s has no flex-start pool to copy", base.ID)
	}
	c := *base
	c.NodePools = nil
	for _, p := range base.NodePools {
		if !p.IsFlexStart() || p.ID == base.Slurm.LoginNodePoolID {
			c.NodePools = append(c.NodePools, p)
		}
	}
	c.Slurm.Partitions = nil
	c.Slurm.DefaultPartitionID = ""
	for i := range n {
		p := flex[0]
		p.ID = PoolID(i, n)
		p.MinNodeCount, p.MaxNodeCount = 0, maxNodes
		c.NodePools = append(c.NodePools, p)
		c.Slurm.Partitions = append(c.Slurm.Partitions, spec.Partition{ID: p.ID, NodePoolIDs: []string{p.ID}})
	}
	eff, err := c.EffectiveJSON()
	if err != nil {
		return nil, err
	}
	out, err := spec.Parse(eff)
	if err != nil {
		return nil, fmt.Errorf("spec with %d pools does not validate: %w", n, err)
	}
	return out, nil
}

// WithZones returns a copy of c whose flex-start pools are spread round
// robin over the first n zone names of the cluster's region
// ("REGION-a".."REGION-z", n ≤ 26; most are not real zones, which neither
// flexslurm nor the simulator minds). The result is validated.
func WithZones(c *spec.Cluster, n int) (*spec.Cluster, error) {
	if n < 1 || n > 26 {
		return nil, fmt.Errorf("%d zones: want 1 to 26", n)
	}
	out := *c
	out.NodePools = slices.Clone(c.NodePools)
	k := 0
	for i := range out.NodePools {
		if out.NodePools[i].IsFlexStart() && out.NodePools[i].ID != c.Slurm.LoginNodePoolID {
			out.NodePools[i].Zone = fmt.Sprintf("%s-%c", c.Region, 'a'+k%n)
			k++
		}
	}
	eff, err := out.EffectiveJSON()
	if err != nil {
		return nil, err
	}
	v, err := spec.Parse(eff)
	if err != nil {
		return nil, fmt.Errorf("spec over %d zones does not validate: %w", n, err)
	}
	return v, nil
}

// PoolID names pool i of n: "p" and i with as many digits as n-1 has
// ("p0".."p9" for 10 pools, "p00".."p99" for 100).
func PoolID(i, n int) string {
	return fmt.Sprintf("p%0*d", len(fmt.Sprint(max(n-1, 0))), i)
}

// Mutations are the apply.Compute methods that change Compute state.
var Mutations = []string{"EnsureInstanceTemplate", "EnsureMIG", "CreateResizeRequest", "CancelResizeRequest", "DeleteResizeRequest", "DeleteInstances", "DeleteMIG"}

// Lists are the apply.Compute methods that list Compute resources.
var Lists = []string{"ListInstances", "ListResizeRequests", "ListMIGs"}

// Calls counts Compute calls by apply.Compute method name.
type Calls map[string]int

// Sub returns c minus earlier, keeping non-zero counts.
func (c Calls) Sub(earlier Calls) Calls {
	out := Calls{}
	for k, v := range c {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Sum adds the counts of the named methods.
func (c Calls) Sum(methods ...string) int {
	n := 0
	for _, m := range methods {
		n += c[m]
	}
	return n
}

// String lists the counts as "Method×n" sorted by method, or "none".
func (c Calls) String() string {
	if len(c) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// CountingCompute wraps an apply.Compute and counts and times every call by
// method. It is safe for concurrent use.
type CountingCompute struct {
	apply.Compute

	mu    sync.Mutex
	calls Calls
	busy  time.Duration
}

// NewCountingCompute wraps c.
func NewCountingCompute(c apply.Compute) *CountingCompute {
	return &CountingCompute{Compute: c, calls: Calls{}}
}

// Calls returns the counts so far.
func (c *CountingCompute) Calls() Calls {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// Busy returns the total time spent inside Compute calls so far (summed over
// concurrent callers).
func (c *CountingCompute) Busy() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

func (c *CountingCompute) count(method string, start time.Time) {
	d := time.Since(start)
	c.mu.Lock()
	c.calls[method]++
	c.busy += d
	c.mu.Unlock()
}

// EnsureInstanceTemplate implements apply.Compute.
func (c *CountingCompute) EnsureInstanceTemplate(ctx context.Context, t instancetemplate.Template, requestID string) error {
	defer c.count("EnsureInstanceTemplate", time.Now())
	return c.Compute.EnsureInstanceTemplate(ctx, t, requestID)
}

// EnsureMIG implements apply.Compute.
func (c *CountingCompute) EnsureMIG(ctx context.Context, m gce.MIGSpec, requestID string) error {
	defer c.count("EnsureMIG", time.Now())
	return c.Compute.EnsureMIG(ctx, m, requestID)
}

// CreateResizeRequest implements apply.Compute.
func (c *CountingCompute) CreateResizeRequest(ctx context.Context, zone, mig string, rr gce.ResizeRequestSpec, requestID string) error {
	defer c.count("CreateResizeRequest", time.Now())
	return c.Compute.CreateResizeRequest(ctx, zone, mig, rr, requestID)
}

// CancelResizeRequest implements apply.Compute.
func (c *CountingCompute) CancelResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	defer c.count("CancelResizeRequest", time.Now())
	return c.Compute.CancelResizeRequest(ctx, zone, mig, name, requestID)
}

// DeleteResizeRequest implements apply.Compute.
func (c *CountingCompute) DeleteResizeRequest(ctx context.Context, zone, mig, name, requestID string) error {
	defer c.count("DeleteResizeRequest", time.Now())
	return c.Compute.DeleteResizeRequest(ctx, zone, mig, name, requestID)
}

// DeleteInstances implements apply.Compute.
func (c *CountingCompute) DeleteInstances(ctx context.Context, zone, mig string, names []string, requestID string) error {
	defer c.count("DeleteInstances", time.Now())
	return c.Compute.DeleteInstances(ctx, zone, mig, names, requestID)
}

// ListInstances implements apply.Compute.
func (c *CountingCompute) ListInstances(ctx context.Context, zone string, labels map[string]string) ([]gce.Instance, error) {
	defer c.count("ListInstances", time.Now())
	return c.Compute.ListInstances(ctx, zone, labels)
}

// ListResizeRequests implements apply.Compute.
func (c *CountingCompute) ListResizeRequests(ctx context.Context, zone, mig string) ([]gce.ResizeRequest, error) {
	defer c.count("ListResizeRequests", time.Now())
	return c.Compute.ListResizeRequests(ctx, zone, mig)
}

// ListMIGs implements apply.Compute.
func (c *CountingCompute) ListMIGs(ctx context.Context, zone, namePrefix string) ([]gce.MIG, error) {
	defer c.count("ListMIGs", time.Now())
	return c.Compute.ListMIGs(ctx, zone, namePrefix)
}

// GetInstance implements apply.Compute.
func (c *CountingCompute) GetInstance(ctx context.Context, zone, name string) (gce.Instance, error) {
	defer c.count("GetInstance", time.Now())
	return c.Compute.GetInstance(ctx, zone, name)
}

// DeleteMIG implements apply.Compute.
func (c *CountingCompute) DeleteMIG(ctx context.Context, zone, name, requestID string) error {
	defer c.count("DeleteMIG", time.Now())
	return c.Compute.DeleteMIG(ctx, zone, name, requestID)
}

// ReportHostAsFaulty implements apply.Compute.
func (c *CountingCompute) ReportHostAsFaulty(ctx context.Context, zone, name, behavior, description, requestID string) error {
	defer c.count("ReportHostAsFaulty", time.Now())
	return c.Compute.ReportHostAsFaulty(ctx, zone, name, behavior, description, requestID)
}

// StartInstance implements apply.Compute.
func (c *CountingCompute) StartInstance(ctx context.Context, zone, name, requestID string) error {
	defer c.count("StartInstance", time.Now())
	return c.Compute.StartInstance(ctx, zone, name, requestID)
}

// Table is the result of a run: sections of measurements, each a Markdown
// table with its own columns and the targets it was measured against. It is
// safe for concurrent use.
type Table struct {
	mu       sync.Mutex
	sections []*Section
}

// Section is one titled table of measurements with its targets.
type Section struct {
	t       *Table
	rank    int
	Title   string
	Columns []string
	rows    [][]string
	notes   []string
	targets [][]string
}

// Section adds a section with the given title and columns. Sections are
// rendered by rank, then in the order they were added.
func (t *Table) Section(rank int, title string, columns ...string) *Section {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &Section{t: t, rank: rank, Title: title, Columns: columns}
	t.sections = append(t.sections, s)
	return s
}

// Add appends a row of cells, one per column.
func (s *Section) Add(cells ...string) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.rows = append(s.rows, cells)
}

// Note appends a paragraph printed under the section's table.
func (s *Section) Note(format string, args ...any) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// Target records a target, the value measured against it and whether it
// was met.
func (s *Section) Target(what, value, target string, ok bool) {
	verdict := "met"
	if !ok {
		verdict = "**MISSED**"
	}
	s.target(what, value, target, verdict)
}

// Pending records a target that could not be measured in this run.
func (s *Section) Pending(what, why, target string) {
	s.target(what, why, target, "pending")
}

func (s *Section) target(what, value, target, verdict string) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.targets = append(s.targets, []string{what, value, target, verdict})
}

// Markdown renders the sections, then every target.
func (t *Table) Markdown() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	secs := slices.Clone(t.sections)
	slices.SortStableFunc(secs, func(a, b *Section) int { return a.rank - b.rank })
	var b strings.Builder
	var targets [][]string
	for _, s := range secs {
		fmt.Fprintf(&b, "### %s\n\n", s.Title)
		if len(s.rows) > 0 {
			writeTable(&b, s.Columns, s.rows)
			b.WriteString("\n")
		}
		for _, n := range s.notes {
			fmt.Fprintf(&b, "%s\n\n", n)
		}
		targets = append(targets, s.targets...)
	}
	if len(targets) > 0 {
		b.WriteString("### Targets\n\n")
		writeTable(&b, []string{"what", "measured", "target", "verdict"}, targets)
	}
	return b.String()
}

func writeTable(b *strings.Builder, columns []string, rows [][]string) {
	b.WriteString("| " + strings.Join(columns, " | ") + " |\n|")
	for range columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = strings.ReplaceAll(c, "|", "\\|")
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
}

// Machine describes the machine and toolchain a run happens on: CPUs,
// memory, CPU model, Go version, OS, the date and the load average (other
// work on the machine shows up in timings).
func Machine() string {
	mem, model := "unknown", "unknown"
	if f, err := os.Open("/proc/meminfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			var kb int64
			if _, err := fmt.Sscanf(s.Text(), "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("nproc %d, memory %s, CPU %s, %s %s/%s, %s, load average %s",
		runtime.NumCPU(), mem, model, runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04 MST"), LoadAverage())
}

// LoadAverage returns the 1, 5 and 15 minute load averages of the machine
// ("unknown" where /proc/loadavg is missing).
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
