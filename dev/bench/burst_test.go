package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// The burst: burstJobs single-node jobs spread evenly over burstPools
// pools (one partition each) of burstMaxNodes nodes, each job-pending event
// naming the node Slurm allocated to the job (as ResumeProgram reports it),
// delivered 1–3 times, shuffled with burstSeed, to burstWorkers concurrent
// function instances.
const (
	burstJobs     = 1000
	burstPools    = 10
	burstMaxNodes = 100
	burstSeed     = 9
)

// burstNode is the node Slurm allocated to job i of the burst: pool i mod
// burstPools, slot i / burstPools.
func burstNode(i int) string {
	return model.NodeName("flexvm", PoolID(i%burstPools, burstPools), i/burstPools)
}

// burstWorkers lists the numbers of concurrent function instances to run
// the burst with: 8, then 1 as the uncontended reference.
// FLEXSLURM_BENCH_BURST_WORKERS (e.g. "16,4") overrides it.
func burstWorkers() []int {
	var out []int
	for _, f := range strings.Split(os.Getenv("FLEXSLURM_BENCH_BURST_WORKERS"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []int{8, 1}
	}
	return out
}

// burstResult is what one burst run measured.
type burstResult struct {
	workers, deliveries, redelivers int
	elapsed                         time.Duration
	attempts, commits               int64
	committed, duplicate, failed    int64
	reads, writes                   int64
	vms, requests, waiting          int
	calls                           Calls
}

// outcomeStore counts how each Update ended; with the adapter's attempt
// counter it tells retried (aborted) attempts from final ones.
type outcomeStore struct {
	*store.Firestore
	committed, duplicate, failed atomic.Int64
}

// Update implements store.Store.
func (s *outcomeStore) Update(ctx context.Context, scope store.Scope, fn func(st *model.State) error) error {
	err := s.Firestore.Update(ctx, scope, fn)
	switch {
	case err == nil:
		s.committed.Add(1)
	case errors.Is(err, store.ErrDuplicateEvent):
		s.duplicate.Add(1)
	default:
		s.failed.Add(1)
	}
	return err
}

// delivery is one Pub/Sub delivery of a message.
type delivery struct {
	id   string
	data []byte
}

// BenchmarkBurst delivers 1,000 job-pending events (each 1–3 times,
// shuffled), each naming the one node Slurm allocated to its job, for 1,000
// nodes over 10 pools to concurrent function instances on the Firestore
// emulator. Exactly the needed VMs must result: each job's node backed by
// one VM (generation 1), one resize request per job, every event applied
// exactly once. As the burst goes on, up to 100 jobs wait for capacity in
// each pool. It runs once per entry of burstWorkers.
func BenchmarkBurst(b *testing.B) {
	client := firestoreClient(b)
	lock := lockWait(b, client)
	var runs []burstResult
	for _, w := range burstWorkers() {
		b.Run(fmt.Sprintf("instances=%d", w), func(b *testing.B) {
			var r burstResult
			for b.Loop() {
				r = runBurst(b, client, w)
			}
			b.ReportMetric(r.elapsed.Seconds(), "burst-s")
			b.ReportMetric(float64(r.attempts-(r.committed+r.duplicate+r.failed)), "aborted-attempts")
			b.ReportMetric(float64(r.deliveries)/r.elapsed.Seconds(), "deliveries/s")
			runs = append(runs, r)
		})
	}
	if len(runs) == 0 {
		return
	}
	cols := []string{"measurement"}
	for _, r := range runs {
		cols = append(cols, fmt.Sprintf("%d instance(s)", r.workers))
	}
	sec := results.Section(rankBurst, fmt.Sprintf("Burst (Firestore emulator): %d job-pending events for single-node jobs, each naming the node Slurm allocated (as ResumeProgram reports it), each delivered 1–3 times and shuffled (seed %d), %d pools × %d nodes (min 0), one partition per pool, job i on slot i/%d of pool i mod %d; concurrent function instances are goroutines calling the handlers", burstJobs, burstSeed, burstPools, burstMaxNodes, burstPools, burstPools),
		cols...)
	sec.Note("The emulator locks pessimistically: two transactions that read the same document and then write it wait for each other until the emulator's lock timeout aborts one; measured in this run: the first of two such transactions committed after %s. A job-pending transaction that names its nodes reads the cluster and pool records without writing them, and writes only its own job, nodes and event marker: concurrent events of one pool wait for each other only when they name the same job or node.", secs(lock.Seconds()))
	row := func(name string, f func(r burstResult) string) {
		cells := []string{name}
		for _, r := range runs {
			cells = append(cells, f(r))
		}
		sec.Add(cells...)
	}
	row("deliveries (events + redeliveries of the same message id)", func(r burstResult) string {
		return fmt.Sprintf("%d (%d + %d)", r.deliveries, burstJobs, r.deliveries-burstJobs)
	})
	row("total time", func(r burstResult) string {
		return fmt.Sprintf("%.1f s (%.1f deliveries/s)", r.elapsed.Seconds(), float64(r.deliveries)/r.elapsed.Seconds())
	})
	row("transactions committed (Stats().Transactions)", func(r burstResult) string { return strconv.FormatInt(r.commits, 10) })
	row("transaction attempts (Stats().Attempts)", func(r burstResult) string { return strconv.FormatInt(r.attempts, 10) })
	row("Attempts − Transactions", func(r burstResult) string { return strconv.FormatInt(r.attempts-r.commits, 10) })
	row("of which: duplicate deliveries detected (marker found, nothing written)", func(r burstResult) string { return strconv.FormatInt(r.duplicate, 10) })
	row("of which: aborted attempts, retried by the adapter", func(r burstResult) string {
		return strconv.FormatInt(r.attempts-(r.committed+r.duplicate+r.failed), 10)
	})
	row("updates failed after every attempt (delivery returned an error, redelivered)", func(r burstResult) string {
		return fmt.Sprintf("%d (%d redeliveries)", r.failed, r.redelivers)
	})
	row("Firestore reads / writes (a job-pending transaction naming its node reads the cluster, its pool's record, its job and its node: reads per delivery do not grow with the jobs waiting)", func(r burstResult) string {
		return fmt.Sprintf("%d / %d (%.0f reads per delivery)", r.reads, r.writes, float64(r.reads)/float64(r.deliveries))
	})
	row("VMs after capacity arrived", func(r burstResult) string { return fmt.Sprintf("%d, one per node, all generation 1", r.vms) })
	row("resize requests created", func(r burstResult) string { return fmt.Sprintf("%d, one per provisioned job", r.requests) })
	row("Compute calls (a redelivery replays its own stored request: same name and request id, nothing created)", func(r burstResult) string { return r.calls.String() })
	row("jobs left without nodes", func(r burstResult) string { return strconv.Itoa(r.waiting) })
	for _, r := range runs {
		perJob := float64(r.calls["CreateResizeRequest"]) / float64(max(r.requests, 1))
		sec.Target(fmt.Sprintf("burst, %d instance(s): Compute mutations per provisioned job", r.workers),
			fmt.Sprintf("1 resize request created per job, but %.1f CreateResizeRequest calls per job (%d calls for %d jobs; %s)", perJob, r.calls["CreateResizeRequest"], r.requests, r.calls),
			"≤ 1 resize request", perJob <= 1)
		sec.Target(fmt.Sprintf("burst, %d instance(s): exactly the needed VMs, no duplicates", r.workers),
			fmt.Sprintf("%d VMs for %d nodes, %d resize requests, %d commits for %d events, in %.1f s", r.vms, burstPools*burstMaxNodes, r.requests, r.commits, burstJobs, r.elapsed.Seconds()),
			fmt.Sprintf("%d VMs, one per job's node; each event applied once", burstPools*burstMaxNodes), r.vms == burstPools*burstMaxNodes && r.commits == burstJobs && r.requests == burstPools*burstMaxNodes)
		perDelivery := float64(r.reads) / float64(r.deliveries)
		sec.Target(fmt.Sprintf("burst, %d instance(s): Firestore reads per job-pending delivery, up to %d jobs waiting per pool", r.workers, burstJobs/burstPools),
			fmt.Sprintf("%.1f (%d reads for %d deliveries)", perDelivery, r.reads, r.deliveries), "≤ 10, whatever the jobs waiting", perDelivery <= 10)
	}
	// More instances must not be slower: job events of one pool share no
	// document they write.
	var one, most *burstResult
	for i := range runs {
		r := &runs[i]
		if r.workers == 1 {
			one = r
		}
		if r.workers > 1 && (most == nil || r.workers > most.workers) {
			most = r
		}
	}
	if one != nil && most != nil {
		sec.Target(fmt.Sprintf("burst: %d instances at least as fast as 1", most.workers),
			fmt.Sprintf("%.1f s with %d, %.1f s with 1 (%.2f×)", most.elapsed.Seconds(), most.workers, one.elapsed.Seconds(), one.elapsed.Seconds()/most.elapsed.Seconds()),
			"≤ the time with 1", most.elapsed <= one.elapsed)
	}
}

// runBurst runs the burst once with the given number of function instances
// and checks its outcome.
func runBurst(b *testing.B, client *firestore.Client, workers int) burstResult {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	fs := &outcomeStore{Firestore: store.NewFirestoreFromClient(client, store.WithRoot(testenv.UniqueID(b)+"_"))}
	var counter *CountingCompute
	h, err := harness.New(ctx, harness.Options{Store: fs,
		Sim:     computesim.Options{CapacityDelay: func(string, string) time.Duration { return 20 * time.Minute }},
		Compute: func(c apply.Compute) apply.Compute { counter = NewCountingCompute(c); return counter }})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	if err := h.Apply(ctx, flexSpec(b, burstPools, burstMaxNodes)); err != nil {
		b.Fatal(err)
	}
	// The messages: job i is pending in pool i mod 10, delivered 1–3 times.
	rng := rand.New(rand.NewPCG(burstSeed, burstSeed))
	var queue []delivery
	for i := range burstJobs {
		data, err := json.Marshal(event.Job{Header: event.Header{Version: 1, Type: event.TypeJobPending, Cluster: "flexvm"},
			JobID: strconv.Itoa(1000 + i), Partition: PoolID(i%burstPools, burstPools), NodeCount: 1, Nodes: []string{burstNode(i)}})
		if err != nil {
			b.Fatal(err)
		}
		for range 1 + rng.IntN(3) {
			queue = append(queue, delivery{id: fmt.Sprintf("burst-%d", i), data: data})
		}
	}
	rng.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
	deliveries := len(queue)

	s0, calls0 := fs.Stats(), counter.Calls()
	c0, d0, f0 := fs.committed.Load(), fs.duplicate.Load(), fs.failed.Load()
	var (
		mu         sync.Mutex
		inflight   int
		redelivers int
		lastErr    error
		wg         sync.WaitGroup
	)
	// A failed delivery goes back to the end of the queue, as Pub/Sub
	// redelivers an unacknowledged message.
	next := func() (delivery, bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(queue) == 0 {
			return delivery{}, false, inflight == 0
		}
		d := queue[0]
		queue = queue[1:]
		inflight++
		return d, true, false
	}
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				d, ok, done := next()
				if done {
					return
				}
				if !ok {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				err := h.Deliver(ctx, config.TopicJobs, d.id, d.data)
				mu.Lock()
				inflight--
				if err != nil {
					redelivers++
					lastErr = err
					queue = append(queue, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		b.Fatalf("burst did not finish: %v (last delivery error: %v)", ctx.Err(), lastErr)
	}
	s1, calls := fs.Stats(), counter.Calls().Sub(calls0)
	committed, duplicate, failed := fs.committed.Load()-c0, fs.duplicate.Load()-d0, fs.failed.Load()-f0

	// Let the capacity arrive, then check the outcome.
	if err := h.Advance(ctx, time.Hour); err != nil {
		b.Fatal(err)
	}
	vms, requests, waiting := checkBurst(b, ctx, h)
	return burstResult{
		workers: workers, deliveries: deliveries, redelivers: redelivers, elapsed: elapsed,
		attempts: s1.Attempts - s0.Attempts, commits: s1.Transactions - s0.Transactions,
		committed: committed, duplicate: duplicate, failed: failed,
		reads: s1.Reads - s0.Reads, writes: s1.Writes - s0.Writes,
		vms: vms, requests: requests, waiting: waiting, calls: calls,
	}
}

// lockWait runs two transactions that both read one document and then both
// write it, and returns how long the first took to commit: the emulator's
// lock timeout, after which it aborts the other.
func lockWait(tb testing.TB, client *firestore.Client) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doc := client.Collection(testenv.UniqueID(tb) + "_lock").Doc("contended")
	if _, err := doc.Set(ctx, map[string]any{"n": 0}); err != nil {
		tb.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first time.Duration
		both  = make(chan struct{})
		read  sync.WaitGroup
	)
	read.Add(2)
	go func() { read.Wait(); close(both) }()
	start := time.Now()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attempt := 0
			err := client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
				attempt++
				s, err := tx.Get(doc)
				if err != nil {
					return err
				}
				if attempt == 1 {
					read.Done()
					select { // both have read before either writes
					case <-both:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				n, err := s.DataAt("n")
				if err != nil {
					return err
				}
				return tx.Set(doc, map[string]any{"n": n.(int64) + 1})
			}, firestore.MaxAttempts(20))
			if err != nil {
				tb.Error(err)
				return
			}
			mu.Lock()
			if first == 0 {
				first = time.Since(start)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return first
}

// checkBurst asserts the burst's outcome and returns the VM count, the
// resize request count and the number of jobs left waiting.
func checkBurst(tb testing.TB, ctx context.Context, h *harness.Harness) (vms, requests, waiting int) {
	tb.Helper()
	want := map[string]bool{}
	for p := range burstPools {
		for i := range burstMaxNodes {
			want[model.VMName(model.NodeName("flexvm", PoolID(p, burstPools), i), 1)] = true
		}
	}
	got := h.VMs()
	seen := map[string]bool{}
	for _, vm := range got {
		if !want[vm] {
			tb.Errorf("unexpected VM %s (a node backed twice, or a slot beyond max_node_count)", vm)
		}
		if seen[vm] {
			tb.Errorf("VM %s listed twice", vm)
		}
		seen[vm] = true
	}
	if len(got) != len(want) {
		tb.Errorf("%d VMs, want %d (every node backed once)", len(got), len(want))
	}
	rrs := h.Sim.ResizeRequestHistory()
	rrSeen := map[string]bool{}
	for _, rr := range rrs {
		if rrSeen[rr.Name] {
			tb.Errorf("resize request %s created twice", rr.Name)
		}
		rrSeen[rr.Name] = true
		if len(rr.Instances) != 1 {
			tb.Errorf("resize request %s asks for %d VMs, want 1 (single-node jobs)", rr.Name, len(rr.Instances))
		}
	}
	st, err := h.Store.Read(ctx, store.Scope{Cluster: "flexvm", AllPools: true})
	if err != nil {
		tb.Fatal(err)
	}
	byNode := map[string]string{}
	provisioned := 0
	for _, j := range st.Jobs {
		if j.State != model.JobPending {
			tb.Errorf("job %s is %s, want pending", j.ID, j.State)
		}
		if len(j.Nodes) == 0 {
			waiting++
			continue
		}
		if i, err := strconv.Atoi(j.ID); err != nil || len(j.Nodes) != 1 || j.Nodes[0] != burstNode(i-1000) {
			tb.Errorf("job %s names nodes %v, want the node Slurm allocated to it", j.ID, j.Nodes)
		}
		provisioned++
		for _, n := range j.Nodes {
			if other, ok := byNode[n]; ok {
				tb.Errorf("node %s given to jobs %s and %s", n, other, j.ID)
			}
			byNode[n] = j.ID
		}
	}
	if len(st.Jobs) != burstJobs {
		tb.Errorf("%d job records, want %d", len(st.Jobs), burstJobs)
	}
	if provisioned != len(want) || len(rrs) != provisioned {
		tb.Errorf("%d jobs provisioned with %d resize requests, want %d and %d", provisioned, len(rrs), len(want), len(want))
	}
	for name, n := range st.Nodes {
		if n.Generation != 1 || !n.Phase.Serving() || byNode[name] != n.JobID {
			tb.Errorf("node %s: generation %d, %s, job %q (jobs name %q)", name, n.Generation, n.Phase, n.JobID, byNode[name])
		}
	}
	return len(got), len(rrs), waiting
}
