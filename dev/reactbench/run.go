package reactbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/dev/local"
	"github.com/flexslurm/flexslurm/dev/localslurm"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// Options configures a run.
type Options struct {
	// Events is how many events of each kind are driven one at a time.
	// Default 50.
	Events int
	// Burst is how many jobs the burst submits at once. Default 200;
	// negative skips the burst.
	Burst int
	// BurstNodes is the pool's number of dynamic nodes. Default 50.
	BurstNodes int
	// StaticNodes is the pool's number of static nodes (the expiries'
	// VMs, in turn). Default 6.
	StaticNodes int
	// CapacityDelay is the simulated wait for capacity of every resize
	// request (not part of any reaction measured). Default 500 ms.
	CapacityDelay time.Duration
	// SpecPath is the spec whose first Flex-Start pool the run resizes to
	// StaticNodes + BurstNodes. Default examples/cluster_config.json.
	SpecPath string
	// RunDir receives the spec, the local system's logs and Slurm's.
	// Default .run/reactbench.
	RunDir string
	// Exe is the flexslurm binary the functions and hooks run. Default
	// os.Executable().
	Exe string
	// Slurm is the local Slurm release (dev/local). Default 22.05.
	Slurm string
	// Log receives progress and the local system's timeline. Default
	// io.Discard.
	Log io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if o.Events <= 0 {
		o.Events = 50
	}
	if o.Burst == 0 {
		o.Burst = 200
	}
	if o.BurstNodes <= 0 {
		o.BurstNodes = 50
	}
	if o.StaticNodes <= 0 {
		o.StaticNodes = 6
	}
	if o.CapacityDelay <= 0 {
		o.CapacityDelay = 500 * time.Millisecond
	}
	if o.SpecPath == "" {
		o.SpecPath = "examples/cluster_config.json"
	}
	if o.RunDir == "" {
		o.RunDir = filepath.Join(".run", "reactbench")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, err
		}
		o.Exe = exe
	}
	return o, nil
}

// Result is a run's phases and what it ran on.
type Result struct {
	Opts           Options
	Phases         []Phase
	Started, Ended time.Time
	// Boot is the simulated boot subtracted from every registration.
	Boot time.Duration
	// BurstCompleted counts the burst's jobs that completed (listed
	// COMPLETED, or no longer listed: ended before MinJobAge), and
	// BurstTook how long the burst took.
	BurstCompleted int
	BurstTook      time.Duration
}

// stateWatchEvery is the local system's timeline state watch period
// during a run.
const stateWatchEvery = 5 * time.Second

// run is one run's state.
type run struct {
	o      Options
	sys    *local.System
	r      *slurm.Runner
	clk    *clock.Scaled
	zone   string
	part   string
	static []string
	dyn    []string

	mu     sync.Mutex
	vms    map[string]VM
	health []Message
	expiry []Message
}

// Run starts the local system (real Slurm), drives the events one at a
// time, then the burst, and pairs every event with its end from the
// components' records.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
		return nil, err
	}
	specPath, err := writeSpec(o)
	if err != nil {
		return nil, err
	}
	res := &Result{Opts: o, Started: time.Now(), Boot: localslurm.MinNodeStartDelay}
	// The timeline's state watch reads every node and job from the
	// Firestore emulator the functions use; the run reads its times from
	// logs and the simulator, so the watch only prints, and at its demo
	// period (150 ms) it would be the emulator's largest client.
	sys, err := local.Start(ctx, local.Options{SpecPath: specPath, Speedup: 1, CapacityDelay: o.CapacityDelay,
		RunDir: filepath.Join(o.RunDir, "local"), Exe: o.Exe, Out: o.Log, Slurm: o.Slurm,
		StateWatchEvery: stateWatchEvery})
	if sys != nil {
		defer sys.Stop()
	}
	if err != nil {
		return nil, err
	}
	rn := &run{o: o, sys: sys, r: sys.SlurmRunner(), clk: sys.Clock, vms: map[string]VM{}}
	if rn.r == nil {
		return nil, errors.New("reactbench needs the local Slurm")
	}
	pool := sys.Spec.FlexPools()[0]
	rn.zone = pool.Zone
	for i := 0; i < pool.MaxNodeCount; i++ {
		n := model.NodeName(sys.Spec.ID, pool.ID, i)
		if i < pool.MinNodeCount {
			rn.static = append(rn.static, n)
		} else {
			rn.dyn = append(rn.dyn, n)
		}
	}
	bg, stop := context.WithCancel(ctx)
	defer stop()
	for sub, topic := range map[string]string{"reactbench-health": config.TopicHealthFailure, "reactbench-expiry": config.TopicExpiry} {
		if err := sys.PubSub.EnsurePullSubscription(ctx, sub, topic); err != nil {
			return nil, err
		}
		go rn.collect(bg, sub)
	}
	go rn.watchVMs(bg)
	rn.say("waiting for the static nodes %v to register", rn.static)
	for _, n := range rn.static {
		if !rn.waitNode(ctx, n, 180*time.Second, slurm.NodeInfo.Ready) {
			return nil, fmt.Errorf("static node %s did not register within 180 s (see %s)", n, o.RunDir)
		}
	}
	ni, err := rn.r.ShowNode(ctx, rn.dyn[0])
	if err != nil || len(ni.Partitions) == 0 {
		return nil, fmt.Errorf("node %s's partition: %v", rn.dyn[0], err)
	}
	rn.part = ni.Partitions[0]

	from := time.Now()
	if err := rn.single(ctx); err != nil {
		return nil, err
	}
	singleTo := time.Now()
	burstFrom := singleTo
	if o.Burst > 0 {
		// Let the last one-at-a-time VMs end before the burst.
		time.Sleep(5 * time.Second)
		burstFrom = time.Now()
		t0 := time.Now()
		done, err := rn.burst(ctx)
		if err != nil {
			return nil, err
		}
		res.BurstCompleted, res.BurstTook = done, time.Since(t0)
	}
	burstTo := time.Now()
	// Records settle: a last message is pulled, a last VM seen.
	time.Sleep(3 * time.Second)
	stop()
	recs, err := rn.records()
	if err != nil {
		return nil, err
	}
	res.Phases = append(res.Phases, recs.Pair("one at a time", from, singleTo, res.Boot))
	if o.Burst > 0 {
		res.Phases = append(res.Phases, recs.Pair(fmt.Sprintf("burst of %d jobs", o.Burst), burstFrom, burstTo, res.Boot))
	}
	res.Ended = time.Now()
	return res, nil
}

func (rn *run) say(format string, args ...any) {
	fmt.Fprintf(rn.o.Log, "reactbench %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// writeSpec writes the spec with its first Flex-Start pool resized.
func writeSpec(o Options) (string, error) {
	raw, err := os.ReadFile(o.SpecPath)
	if err != nil {
		return "", err
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", fmt.Errorf("%s: %w", o.SpecPath, err)
	}
	pools, _ := c["node_pools"].([]any)
	found := false
	for _, p := range pools {
		m, _ := p.(map[string]any)
		if m == nil || m["provisioning_model"] != "FLEX_START" {
			continue
		}
		m["scaling_spec"] = map[string]any{"min_node_count": o.StaticNodes, "max_node_count": o.StaticNodes + o.BurstNodes}
		found = true
		break
	}
	if !found {
		return "", fmt.Errorf("%s has no Flex-Start pool", o.SpecPath)
	}
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	path, err := filepath.Abs(filepath.Join(o.RunDir, "cluster_config.json"))
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, out, 0o644)
}

// wall converts a time of the simulated clock to the wall clock.
func (rn *run) wall(t time.Time) time.Time {
	return rn.clk.WallOrigin.Add(time.Duration(float64(t.Sub(rn.clk.Origin)) / rn.clk.Factor))
}

var instanceRef = regexp.MustCompile(`instances/([a-z][-a-z0-9]*[a-z0-9])`)

// collect pulls sub's messages and keeps their publish times.
func (rn *run) collect(ctx context.Context, sub string) {
	for ctx.Err() == nil {
		msgs, err := rn.sys.PubSub.Pull(ctx, sub, 100, time.Second)
		if err != nil {
			if ctx.Err() == nil {
				rn.say("pulling %s: %v", sub, err)
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		rn.mu.Lock()
		for _, m := range msgs {
			switch sub {
			case "reactbench-health":
				var h struct {
					Node       string `json:"node"`
					Generation int64  `json:"generation"`
				}
				if json.Unmarshal(m.Data, &h) == nil && h.Node != "" {
					rn.health = append(rn.health, Message{Node: h.Node, VM: model.VMName(h.Node, h.Generation), Published: m.PublishTime})
				}
			case "reactbench-expiry":
				// The expiry topic receives every audit entry of the sink;
				// a run's end is compute.instances.deferredDelete.
				if !bytes.Contains(m.Data, []byte(`"compute.instances.deferredDelete"`)) {
					continue
				}
				if ref := instanceRef.FindSubmatch(m.Data); ref != nil {
					vm := string(ref[1])
					if node, _, _, _, ok := naming.ParseVMName(vm); ok {
						rn.expiry = append(rn.expiry, Message{Node: node, VM: vm, Published: m.PublishTime})
					}
				}
			}
		}
		rn.mu.Unlock()
	}
}

// watchVMs keeps every VM's RUNNING time (its creationTimestamp: the
// simulator creates a VM RUNNING) while it exists.
func (rn *run) watchVMs(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		listed := map[string]bool{}
		for _, in := range rn.sys.Sim.Instances() {
			node, _, _, _, ok := naming.ParseVMName(in.Name)
			if !ok {
				continue
			}
			listed[in.Name] = true
			rn.mu.Lock()
			if _, seen := rn.vms[in.Name]; !seen {
				rn.vms[in.Name] = VM{Name: in.Name, Node: node, Running: rn.wall(in.Created)}
			}
			rn.mu.Unlock()
		}
		now := time.Now()
		rn.mu.Lock()
		for name, v := range rn.vms {
			if !listed[name] && v.Gone.IsZero() {
				v.Gone = now
				rn.vms[name] = v
			}
		}
		rn.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// records gathers the run's records.
func (rn *run) records() (Records, error) {
	var r Records
	f, err := os.Open(rn.sys.SlurmctldLog())
	if err != nil {
		return r, err
	}
	defer f.Close()
	if r.Ctld, err = ParseCtldLog(f, time.Local); err != nil {
		return r, err
	}
	h, err := os.Open(filepath.Join(rn.sys.SlurmHookLogDir(), "hooks-slurm.log"))
	if err != nil {
		return r, err
	}
	defer h.Close()
	if r.Resume, err = ParseHookLog(h); err != nil {
		return r, err
	}
	for _, q := range rn.sys.Sim.ResizeRequestHistory() {
		names := q.Instances
		if len(names) == 0 {
			names = q.Provisioned
		}
		for _, vm := range names {
			if node, _, _, _, ok := naming.ParseVMName(vm); ok {
				r.Requests = append(r.Requests, Request{Name: q.Name, Node: node, Created: rn.wall(q.Created)})
			}
		}
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	for _, v := range rn.vms {
		r.VMs = append(r.VMs, v)
	}
	r.Health = append(r.Health, rn.health...)
	r.Expiry = append(r.Expiry, rn.expiry...)
	return r, nil
}

// waitNode waits until cond holds for node.
func (rn *run) waitNode(ctx context.Context, node string, timeout time.Duration, cond func(slurm.NodeInfo) bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := rn.r.ShowNode(cctx, node)
		cancel()
		if err == nil && cond(n) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// job returns a job's state.
func (rn *run) job(ctx context.Context, id string) (slurm.JobInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return rn.r.ShowJob(cctx, id)
}

func (rn *run) waitJob(ctx context.Context, id string, timeout time.Duration, cond func(slurm.JobInfo) bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if j, err := rn.job(ctx, id); err == nil && cond(j) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (rn *run) scontrol(ctx context.Context, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := rn.r.Scontrol(cctx, args...)
	return err
}

func (rn *run) scancel(ctx context.Context, ids ...string) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := rn.r.Run(cctx, "scancel", ids...); err != nil {
		rn.say("scancel %v: %v", ids, err)
	}
}

// poweredDown: a node Slurm has powered down and may power up again.
func poweredDown(n slurm.NodeInfo) bool {
	return n.Has(slurmstate.FlagPoweredDown) && !n.Has(slurmstate.FlagPoweringDown) && !n.Has(slurmstate.FlagPowerDown) && !n.DrainSet() &&
		n.State == slurmstate.NodeIdle
}

func idleReady(n slurm.NodeInfo) bool {
	return n.Ready() && n.State == slurmstate.NodeIdle && !n.Has(slurmstate.FlagCompleting) && !n.DrainSet()
}

// currentVM returns the node's VM that is RUNNING, "" for none.
func (rn *run) currentVM(node string) string {
	for _, in := range rn.sys.Sim.Instances() {
		if n, _, _, _, ok := naming.ParseVMName(in.Name); ok && n == node && in.Status == "RUNNING" {
			return in.Name
		}
	}
	return ""
}

// single drives the events one at a time: on each dynamic node in turn, a
// job powers the node up (resume, registration), then a GPU fault fails
// the prolog of the next job there (health); then the static nodes
// expire in turn (expiry).
func (rn *run) single(ctx context.Context) error {
	n := rn.o.Events
	for i := 0; i < n; i++ {
		node := rn.dyn[i%len(rn.dyn)]
		if !rn.waitNode(ctx, node, 90*time.Second, poweredDown) {
			return fmt.Errorf("node %s was not powered down within 90 s", node)
		}
		id, err := rn.sys.Sbatch(ctx, "true", "-p", rn.part, "-N", "1", "-w", node, "-t", "5", "-J", "react-up")
		if err != nil {
			return err
		}
		if !rn.waitJob(ctx, id, 120*time.Second, func(j slurm.JobInfo) bool { return j.State == slurmstate.JobCompleted }) {
			return fmt.Errorf("job %s on %s did not complete within 120 s", id, node)
		}
		if !rn.waitNode(ctx, node, 60*time.Second, idleReady) {
			return fmt.Errorf("node %s not idle after job %s", node, id)
		}
		if err := rn.sys.InjectGPUFault(node); err != nil {
			return err
		}
		since := rn.sys.Clock.Now()
		bad, err := rn.sys.Sbatch(ctx, "true", "-p", rn.part, "-N", "1", "-w", node, "-t", "5", "-J", "react-fault")
		if err != nil {
			return err
		}
		// The reaction's end: the node drained and its replacement
		// requested. The node is then powered down at once: each event
		// has a node of its own (round robin over the dynamic nodes),
		// so the replacement's coming and going overlaps no later event
		// on this node.
		if !rn.waitNode(ctx, node, 120*time.Second, func(n slurm.NodeInfo) bool {
			return n.DrainSet() && rn.requestedSince(node, since)
		}) {
			return fmt.Errorf("node %s was not drained and replaced within 120 s of the fault (job %s)", node, bad)
		}
		rn.scancel(ctx, bad)
		if err := rn.scontrol(ctx, "update", "nodename="+node, "state=power_down", "reason=reactbench"); err != nil {
			return fmt.Errorf("powering %s down: %w", node, err)
		}
		rn.say("one at a time %d/%d: %s up, fault, replacement requested, powered down", i+1, n, node)
	}
	for i := 0; i < n; i++ {
		node := rn.static[i%len(rn.static)]
		if err := rn.expireOnce(ctx, node); err != nil {
			return err
		}
		rn.say("expiry %d/%d: %s", i+1, n, node)
	}
	return nil
}

// expireOnce waits for the static node's VM to run and its slurmd to
// register, ends the VM at its max run duration and waits until the
// successor is requested. The static nodes take turns, so that the
// successor's boot overlaps the next node's expiry, not its own.
func (rn *run) expireOnce(ctx context.Context, node string) error {
	var vm string
	if !rn.waitNode(ctx, node, 120*time.Second, func(n slurm.NodeInfo) bool {
		vm = rn.currentVM(node)
		return vm != "" && n.Ready()
	}) {
		return fmt.Errorf("static node %s has no registered VM within 120 s", node)
	}
	since := rn.sys.Clock.Now()
	if err := rn.sys.Sim.ExpireNow(rn.zone, vm); err != nil {
		return err
	}
	deadline := time.Now().Add(120 * time.Second)
	for !rn.requestedSince(node, since) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("static node %s: no successor of %s requested within 120 s", node, vm)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// requestedSince reports whether Compute holds a resize request for a VM
// of node created at or after since (simulated clock).
func (rn *run) requestedSince(node string, since time.Time) bool {
	for _, q := range rn.sys.Sim.ResizeRequestHistory() {
		if q.Created.Before(since) {
			continue
		}
		names := q.Instances
		if len(names) == 0 {
			names = q.Provisioned
		}
		for _, vm := range names {
			if n, _, _, _, ok := naming.ParseVMName(vm); ok && n == node {
				return true
			}
		}
	}
	return false
}

type jobState struct{ state, reason string }

// burstStates returns the state of every burst job slurmctld still knows
// (squeue -t all: ended jobs too, for MinJobAge).
func (rn *run) burstStates(ctx context.Context) (map[string]jobState, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := rn.r.Run(cctx, "squeue", "-h", "-t", "all", "-n", "react-burst", "-o", "%i|%T|%r")
	if err != nil {
		return nil, err
	}
	states := map[string]jobState{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(l, "|", 3)
		if len(f) == 3 {
			states[strings.TrimSpace(f[0])] = jobState{strings.TrimSpace(f[1]), strings.TrimSpace(f[2])}
		}
	}
	return states, nil
}

// burst submits the burst's jobs at once (3 s each, one node, Slurm's
// choice among the dynamic nodes) and, while they run, faults the host of
// every dynamic node once (the next prolog there fails) and expires the
// static nodes in turn. It returns the jobs completed.
func (rn *run) burst(ctx context.Context) (int, error) {
	rn.say("burst: submitting %d jobs", rn.o.Burst)
	excl := slurm.CompressHostlist(rn.static)
	var ids []string
	for i := 0; i < rn.o.Burst; i++ {
		id, err := rn.sys.Sbatch(ctx, "sleep 3", "-p", rn.part, "-N", "1", "-x", excl, "-t", "5", "-J", "react-burst")
		if err != nil {
			return 0, err
		}
		ids = append(ids, id)
	}
	bctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; bctx.Err() == nil && i < rn.o.Events; i++ {
			if err := rn.expireOnce(bctx, rn.static[i%len(rn.static)]); err != nil && bctx.Err() == nil {
				rn.say("burst expiry: %v", err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		faulted := map[string]bool{} // node → its host faulted (once a node)
		for bctx.Err() == nil && len(faulted) < rn.o.Events {
			nodes, err := rn.r.ShowNodes(bctx, rn.dyn)
			if err == nil {
				for _, n := range nodes {
					vm := rn.currentVM(n.Name)
					if vm == "" || faulted[n.Name] || !n.Ready() || n.DrainSet() || n.State == slurmstate.NodeIdle {
						continue
					}
					// A job runs there: the next job's prolog fails.
					if len(faulted) < rn.o.Events && rn.sys.InjectGPUFault(n.Name) == nil {
						faulted[n.Name] = true
					}
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(10 * time.Minute)
	completed := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		states, err := rn.burstStates(ctx)
		if err == nil && len(states) > 0 {
			completed = 0
			open := 0
			for id, st := range states {
				switch {
				case st.state == "COMPLETED":
					completed++
				case st.state == "PENDING" && strings.Contains(strings.ToLower(st.reason), "held"):
					// Held after a failed prolog: released, as its user would.
					_ = rn.scontrol(ctx, "release", id)
					open++
				case st.state == "PENDING" || st.state == "RUNNING" || st.state == "CONFIGURING" || st.state == "COMPLETING" || st.state == "REQUEUED":
					open++
				}
			}
			// A job slurmctld no longer lists ended more than MinJobAge
			// ago: every burst job ended cleanly or it would be listed.
			completed = len(ids) - open - (len(states) - open - completed)
			if open == 0 {
				break
			}
		}
		time.Sleep(2 * time.Second)
	}
	stop()
	wg.Wait()
	rn.scancel(ctx, ids...)
	rn.say("burst: %d of %d jobs completed", completed, len(ids))
	return completed, nil
}
