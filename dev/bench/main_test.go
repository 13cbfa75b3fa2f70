package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Environment variables of the benchmarks.
const (
	// envHooks names a file holding the `go test -bench` output of
	// shared/hooks' BenchmarkResumeProgram64Nodes (make bench writes it).
	envHooks = "FLEXSLURM_BENCH_HOOKS"
	// envChaos names a file holding the `go test -bench` output of
	// dev/chaos' BenchmarkRun (make bench writes it).
	envChaos = "FLEXSLURM_BENCH_CHAOS"
	// envTable, when set, names a file the result table is written to.
	envTable = "FLEXSLURM_BENCH_TABLE"
)

// results collects the rows every benchmark adds; TestMain prints them.
var results Table

// Ranks of the sections in the printed table.
const (
	rankCost = iota
	rankBurst
	rankReconcile
	rankHooks
	rankChaos
	rankNotRun
)

// notRunSection lists the benchmarks that could not run.
var notRunSection = sync.OnceValue(func() *Section { return results.Section(rankNotRun, "Not run", "benchmark", "why") })

// notRun records, loudly, a benchmark that could not run.
func notRun(name, why string) {
	fmt.Fprintf(os.Stderr, "SKIP (loud): %s: %s\n", name, why)
	sec := notRunSection()
	sec.Add(name, why)
	sec.Pending(name, "not run: "+why, "")
}

func TestMain(m *testing.M) {
	flag.Parse()
	machine := Machine()
	code := m.Run()
	if !benchmarking() {
		os.Exit(code)
	}
	hooksRow()
	chaosRow()
	out := "Machine: " + machine + " at the start, " + LoadAverage() + " at the end.\n\n" + results.Markdown()
	fmt.Print("\n" + out)
	if path := os.Getenv(envTable); path != "" {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "writing the table to %s: %v\n", path, err)
			code = 1
		}
	}
	os.Exit(code)
}

// benchmarking reports whether -test.bench selects anything.
func benchmarking() bool {
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// benchLine finds the result line of benchmark name in a `go test -bench`
// output file and returns its iteration count and metrics by unit, or why
// there is none (the file's skip or failure line, if any).
func benchLine(path, name string) (iterations string, metric map[string]float64, why string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err.Error()
	}
	var skip string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 2 && (fields[0] == name || strings.HasPrefix(fields[0], name+"-")) {
			metric := map[string]float64{}
			for i := 1; i < len(fields); i++ {
				if v, err := strconv.ParseFloat(fields[i-1], 64); err == nil {
					metric[fields[i]] = v
				}
			}
			return fields[1], metric, ""
		}
		if strings.Contains(line, "SKIP") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") {
			skip = strings.TrimSpace(line)
		}
	}
	why = "no " + name + " result in " + filepath.Base(path)
	if skip != "" {
		why += ": " + skip
	}
	return "", nil, why
}

// benchMetric reads metric unit of benchmark name from the output file
// named by environment variable env, or calls pending with why there is
// none.
func benchMetric(env, name, unit string, pending func(string)) (iterations string, metric map[string]float64, ok bool) {
	path := os.Getenv(env)
	if path == "" {
		pending(env + " unset; `make bench` sets it")
		return "", nil, false
	}
	n, m, why := benchLine(path, name)
	if why != "" {
		pending(why)
		return "", nil, false
	}
	if _, ok := m[unit]; !ok {
		pending(name + " reported no " + unit)
		return "", nil, false
	}
	return n, m, true
}

// chaosRow adds flexslurm chaos's throughput from dev/chaos' BenchmarkRun
// output, or marks it pending.
func chaosRow() {
	const what = "chaos: seeds per second on this machine (every core, the default workload)"
	const target = "≥ 20 seeds/s"
	sec := results.Section(rankChaos, "Chaos (dev/chaos BenchmarkRun: seeds 1…N of `flexslurm chaos`'s default workload, as many seeds at once as cores, the command's garbage collector setting)",
		"seeds", "seeds/s", "CPU-s per seed", "deliveries per seed", "crashes per seed")
	pending := func(why string) {
		sec.Note("pending: %s", why)
		sec.Pending(what, "pending: "+why, target)
	}
	n, m, ok := benchMetric(envChaos, "BenchmarkRun", "seeds/s", pending)
	if !ok {
		return
	}
	rate := m["seeds/s"]
	sec.Add(n, fmt.Sprintf("%.1f", rate), fmt.Sprintf("%.3f", m["cpu-s/seed"]), fmt.Sprintf("%.0f", m["deliveries/seed"]), fmt.Sprintf("%.1f", m["crashes/seed"]))
	sec.Target(what, fmt.Sprintf("%.1f seeds/s (%.3f CPU-s a seed)", rate, m["cpu-s/seed"]), target, rate >= 20)
}

// hooksRow adds the ResumeProgram result from the hooks benchmark's output
// (shared/hooks BenchmarkResumeProgram64Nodes), or marks it pending.
func hooksRow() {
	const what = "ResumeProgram wall time, 64-node hostlist, real slurmctld"
	const target = "p99 < 1 s"
	sec := results.Section(rankHooks, "ResumeProgram (shared/hooks BenchmarkResumeProgram64Nodes: the hook run for a 64-node hostlist against a real slurmctld and the Pub/Sub emulator)",
		"hostlist", "runs", "p50", "p99")
	pending := func(why string) {
		sec.Note("pending: needs shared/hooks (%s)", why)
		sec.Pending(what, "pending: needs shared/hooks", target)
	}
	n, metric, ok := benchMetric(envHooks, "BenchmarkResumeProgram64Nodes", "p99-ms", pending)
	if !ok {
		return
	}
	p99 := metric["p99-ms"]
	sec.Add("64 nodes", n, fmt.Sprintf("%.0f ms", metric["p50-ms"]), fmt.Sprintf("%.0f ms", p99))
	sec.Target(what, fmt.Sprintf("p99 %.0f ms", p99), target, p99 < 1000)
}

// exampleSpec loads examples/cluster_config.json.
func exampleSpec(tb testing.TB) *spec.Cluster {
	tb.Helper()
	c, err := spec.Load("../../examples/cluster_config.json")
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// flexSpec is the example with n flex-start pools of maxNodes nodes each.
func flexSpec(tb testing.TB, n, maxNodes int) *spec.Cluster {
	tb.Helper()
	c, err := WithFlexPools(exampleSpec(tb), n, maxNodes)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// firestoreClient connects to the Firestore emulator, or skips loudly
// (testenv) when there is none.
func firestoreClient(tb testing.TB) *firestore.Client {
	tb.Helper()
	if os.Getenv(testenv.EnvFirestoreHost) == "" {
		notRun(tb.Name(), testenv.EnvFirestoreHost+" unset: `make bench` starts the emulators")
	}
	testenv.Firestore(tb)
	c, err := firestore.NewClient(context.Background(), testenv.Project())
	if err != nil {
		tb.Fatalf("connecting to the Firestore emulator: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// rig is a harness with counters on its store and its Compute port.
type rig struct {
	h       *harness.Harness
	fs      *store.Firestore // nil with the in-memory store
	compute *CountingCompute
}

// newRig starts a harness over st (nil: in-memory) with a counting Compute
// port and the simulator options given.
func newRig(tb testing.TB, ctx context.Context, fs *store.Firestore, o harness.Options) *rig {
	tb.Helper()
	r := &rig{fs: fs}
	if fs != nil {
		o.Store = fs
	}
	o.Compute = func(c apply.Compute) apply.Compute {
		r.compute = NewCountingCompute(c)
		return r.compute
	}
	h, err := harness.New(ctx, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Close)
	r.h = h
	return r
}

// stats returns the Firestore counters (zero with the in-memory store).
func (r *rig) stats() store.Stats {
	if r.fs == nil {
		return store.Stats{}
	}
	return r.fs.Stats()
}

// median returns the median of ds (0 when empty).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
