package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// costReps is how many times the event sequence runs (each on fresh
// Firestore data); counts must agree across repetitions, latencies are
// medians.
const costReps = 10

// eventCost is what one delivery of an event cost.
type eventCost struct {
	stats   store.Stats
	calls   Calls
	latency time.Duration
}

// costKey identifies the counted part of a cost (latency aside).
func (c eventCost) costKey() string {
	return fmt.Sprintf("%d/%d/%d/%d %s", c.stats.Transactions, c.stats.Attempts, c.stats.Reads, c.stats.Writes, c.calls)
}

// costRun records the cost of each event of one sequence.
type costRun struct {
	r     *rig
	order []string
	costs map[string]eventCost
}

// measure delivers one event through f and records its cost under name.
func (cr *costRun) measure(tb testing.TB, name string, f func() error) {
	tb.Helper()
	s0, c0 := cr.r.stats(), cr.r.compute.Calls()
	start := time.Now()
	err := f()
	d := time.Since(start)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	s1 := cr.r.stats()
	cost := eventCost{
		stats: store.Stats{Transactions: s1.Transactions - s0.Transactions, Attempts: s1.Attempts - s0.Attempts,
			Reads: s1.Reads - s0.Reads, Writes: s1.Writes - s0.Writes},
		calls:   cr.r.compute.Calls().Sub(c0),
		latency: d,
	}
	if _, dup := cr.costs[name]; dup {
		tb.Fatalf("event %q measured twice", name)
	}
	cr.order = append(cr.order, name)
	cr.costs[name] = cost
}

// Event names of the cost table, in the order they are delivered.
const (
	evApplied       = "cluster applied (example: 1 flex pool, min 1)"
	evApplied10     = "cluster applied (10 flex pools, min 0)"
	evPending       = "job pending (2 nodes)"
	evRedelivered   = "job pending, redelivered (same message id)"
	evTickUp        = "reconcile tick (2 VMs came up)"
	evStarted       = "job started"
	evTickSteady    = "reconcile tick (steady: 3 nodes running)"
	evHealth        = "health failure (GPU fault, job requeued, node drained: host repair)"
	evFinished      = "job finished"
	evExpiryStatic  = "expiry (static node: recreated)"
	evExpiryDynamic = "expiry (dynamic node, no job pending)"
	evNodesQuiet    = "job pending (1 node named, as ResumeProgram reports it; no other job waiting in its pool)"
	evNodesDeep     = "job pending (1 node named, as ResumeProgram reports it; 100 jobs waiting in its pool)"
	evNodesRedeliv  = "job pending (1 node named), redelivered"
)

// deepQueue is how many jobs wait for capacity in the pool when
// evNodesDeep is measured.
const deepQueue = 100

// costSequence runs the example spec's node lifecycle through the four
// functions on the Firestore emulator, measuring each event.
func costSequence(tb testing.TB, ctx context.Context, client *firestore.Client) *costRun {
	tb.Helper()
	fs := store.NewFirestoreFromClient(client, store.WithRoot(testenv.UniqueID(tb)+"_"))
	r := newRig(tb, ctx, fs, harness.Options{})
	h := r.h
	cr := &costRun{r: r, costs: map[string]eventCost{}}
	job := func(typ, id string, n int) ([]byte, error) {
		return json.Marshal(event.Job{Header: event.Header{Version: 1, Type: typ, Cluster: "flexvm"},
			JobID: id, Partition: "a3u", NodeCount: n})
	}
	deliver := func(topic, id string, data []byte) func() error {
		return func() error { return h.Deliver(ctx, topic, id, data) }
	}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}

	cr.measure(tb, evApplied, func() error { return h.Apply(ctx, exampleSpec(tb)) })
	must(h.Advance(ctx, time.Hour)) // capacity for the static node
	must(h.Tick(ctx))

	pending, err := job(event.TypeJobPending, "101", 2)
	must(err)
	cr.measure(tb, evPending, deliver(config.TopicJobs, "job-101-pending", pending))
	cr.measure(tb, evRedelivered, deliver(config.TopicJobs, "job-101-pending", pending))
	must(h.Advance(ctx, time.Hour))
	cr.measure(tb, evTickUp, func() error { return h.Tick(ctx) })

	started, err := job(event.TypeJobStarted, "101", 0)
	must(err)
	cr.measure(tb, evStarted, deliver(config.TopicJobs, "job-101-started", started))
	cr.measure(tb, evTickSteady, func() error { return h.Tick(ctx) })

	health, err := json.Marshal(event.Health{
		Header: event.Header{Version: 1, Type: event.TypeHealthFailure, Cluster: "flexvm"},
		Node:   "flexvm-a3u-1", Generation: 1, JobID: "101", JobState: "requeued", Verdict: "FAIL", Drained: true,
		Reasons: []string{"GPU 3: 2 uncorrectable ECC errors"}})
	must(err)
	cr.measure(tb, evHealth, deliver(config.TopicHealthFailure, "health-1", health))
	must(h.Advance(ctx, time.Hour))
	must(h.Tick(ctx))
	restarted, err := job(event.TypeJobStarted, "101", 0)
	must(err)
	must(h.Deliver(ctx, config.TopicJobs, "job-101-restarted", restarted))
	finished, err := job(event.TypeJobFinished, "101", 0)
	must(err)
	cr.measure(tb, evFinished, deliver(config.TopicJobs, "job-101-finished", finished))

	// Compute ends the static node's VM at its run duration: the audit
	// entry reaches Expiry.
	expire := func(vm string) func() error {
		return func() error {
			if err := h.Sim.ExpireNow("us-central1-a", vm); err != nil {
				return err
			}
			msgs := h.TakeAudit()
			if len(msgs) != 1 {
				return fmt.Errorf("%d audit entries for the expiry of %s, want 1", len(msgs), vm)
			}
			return h.Deliver(ctx, config.TopicExpiry, msgs[0].ID, msgs[0].Data)
		}
	}
	cr.measure(tb, evExpiryStatic, expire("flexvm-a3u-0-g1"))
	cr.measure(tb, evExpiryDynamic, expire("flexvm-a3u-2-g1"))

	// A bigger spec on fresh data: cluster.applied grows with pools.
	fs10 := store.NewFirestoreFromClient(client, store.WithRoot(testenv.UniqueID(tb)+"_"))
	r10 := newRig(tb, ctx, fs10, harness.Options{})
	cr10 := &costRun{r: r10, costs: cr.costs}
	cr10.measure(tb, evApplied10, func() error { return r10.h.Apply(ctx, flexSpec(tb, 10, 20)) })
	cr.order = append(cr.order, cr10.order...)

	// Job events naming their node, on fresh data, with no job and then
	// deepQueue jobs waiting for capacity in the pool.
	fsq := store.NewFirestoreFromClient(client, store.WithRoot(testenv.UniqueID(tb)+"_"))
	rq := newRig(tb, ctx, fsq, harness.Options{})
	crq := &costRun{r: rq, costs: cr.costs}
	must(rq.h.Apply(ctx, flexSpec(tb, 1, deepQueue+2)))
	pool := PoolID(0, 1)
	named := func(i int) []byte {
		data, err := json.Marshal(event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"},
			JobID: strconv.Itoa(500 + i), Partition: pool, NodeCount: 1, Nodes: []string{model.NodeName("flexvm", pool, i)}})
		must(err)
		return data
	}
	deliverq := func(i int) func() error {
		return func() error { return rq.h.Deliver(ctx, config.TopicJobs, fmt.Sprintf("named-%d", i), named(i)) }
	}
	crq.measure(tb, evNodesQuiet, deliverq(0))
	for i := 1; i <= deepQueue; i++ {
		must(deliverq(i)())
	}
	crq.measure(tb, evNodesDeep, deliverq(deepQueue+1))
	crq.measure(tb, evNodesRedeliv, deliverq(deepQueue+1))
	cr.order = append(cr.order, crq.order...)
	return cr
}

// firestoreRTT returns the latency of single-document Gets of an existing
// document on the emulator.
func firestoreRTT(tb testing.TB, ctx context.Context, client *firestore.Client, n int) []time.Duration {
	tb.Helper()
	doc := client.Collection(testenv.UniqueID(tb) + "_rtt").Doc("probe")
	if _, err := doc.Set(ctx, map[string]any{"x": 1}); err != nil {
		tb.Fatal(err)
	}
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := doc.Get(ctx); err != nil {
			tb.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// BenchmarkCostPerEvent counts what each event type costs on the Firestore
// emulator and times each handler against one Firestore round trip.
func BenchmarkCostPerEvent(b *testing.B) {
	client := firestoreClient(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var runs []*costRun
	var rtts []time.Duration
	for b.Loop() {
		runs, rtts = nil, nil
		firestoreRTT(b, ctx, client, 20) // warm-up
		for range costReps {
			rtts = append(rtts, firestoreRTT(b, ctx, client, 20)...)
			runs = append(runs, costSequence(b, ctx, client))
		}
		rtts = append(rtts, firestoreRTT(b, ctx, client, 20)...)
	}
	rtt := median(rtts)
	b.ReportMetric(float64(rtt.Microseconds())/1000, "rtt-ms")

	sec := results.Section(rankCost, fmt.Sprintf("Cost per event (Firestore emulator; counts from Firestore.Stats() and Compute calls at the apply.Compute port; latency median of %d runs)", costReps),
		"event", "transactions (attempts)", "reads", "writes", "Compute calls", "latency", "latency ÷ Firestore RTT")
	first := runs[0]
	for _, name := range first.order {
		c := first.costs[name]
		var lat []time.Duration
		varies := map[string]bool{}
		for _, run := range runs {
			lat = append(lat, run.costs[name].latency)
			varies[run.costs[name].costKey()] = true
		}
		counts := func(v int64, pick func(store.Stats) int64) string {
			lo, hi := v, v
			for _, run := range runs {
				x := pick(run.costs[name].stats)
				lo, hi = min(lo, x), max(hi, x)
			}
			if lo == hi {
				return fmt.Sprint(v)
			}
			return fmt.Sprintf("%d–%d", lo, hi)
		}
		l := median(lat)
		sec.Add(name,
			fmt.Sprintf("%s (%s)", counts(c.stats.Transactions, func(s store.Stats) int64 { return s.Transactions }),
				counts(c.stats.Attempts, func(s store.Stats) int64 { return s.Attempts })),
			counts(c.stats.Reads, func(s store.Stats) int64 { return s.Reads }),
			counts(c.stats.Writes, func(s store.Stats) int64 { return s.Writes }),
			c.calls.String(), ms(l), fmt.Sprintf("%.1f×", float64(l)/float64(rtt)))
		if len(varies) > 1 {
			sec.Note("%s: counts varied across runs: %s", name, strings.Join(slices.Sorted(maps.Keys(varies)), "; "))
		}
	}
	sec.Note("Firestore round trip (one document Get on the emulator, same run): median %s over %d Gets. Reads are billed document reads as the adapter counts them (a query returning nothing counts 1). Compute calls are apply.Compute methods; each mutation is one API request plus its operation wait.", ms(rtt), len(rtts))

	// Targets.
	var extra []string
	for _, name := range first.order {
		if t := first.costs[name].stats.Transactions; t > 1 {
			extra = append(extra, fmt.Sprintf("%s: %d", name, t))
		}
	}
	sec.Target("transactions per event", describe(extra, "1 for every event (0 for a redelivery)"), "1 per event", len(extra) == 0)
	for _, name := range []string{evNodesQuiet, evNodesDeep, evNodesRedeliv} {
		reads := first.costs[name].stats.Reads
		for _, run := range runs {
			reads = max(reads, run.costs[name].stats.Reads)
		}
		sec.Target("Firestore reads: "+name, strconv.FormatInt(reads, 10), "≤ 10, whatever the jobs waiting", reads <= 10)
	}
	pend := first.costs[evPending].calls
	mut := pend.Sum(Mutations...)
	sec.Target("Compute mutations per provisioned dynamic job (2 nodes)",
		fmt.Sprintf("%d (%s)", mut, pend), "≤ 1 resize request", mut <= 1 && pend["CreateResizeRequest"] <= 1)
}

func describe(missed []string, ok string) string {
	if len(missed) == 0 {
		return ok
	}
	return "more than 1: " + strings.Join(missed, "; ")
}
