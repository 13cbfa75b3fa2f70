package security_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// syncBuffer collects the harness's JSON log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the log records that name message id.
func (s *syncBuffer) lines(id string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && (rec["message_id"] == id || rec["event_id"] == id) {
			out = append(out, rec)
		}
	}
	return out
}

// newHarness is a harness whose logs are kept, with the example cluster
// applied through its own topic.
func newHarness(t *testing.T) (*harness.Harness, *syncBuffer, *spec.Cluster, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	logs := &syncBuffer{}
	h, err := harness.New(ctx, harness.Options{Log: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	c := functest.ExampleSpec(t)
	if err := h.ScaleUp.Handle(ctx, functest.Eventarc(t, config.TopicClusterSpec, "apply-1", applied(t, h, c, ""), nil, time.Now())); err != nil {
		t.Fatal(err)
	}
	return h, logs, c, ctx
}

// applied is a cluster.applied payload for c; binaryURL, when set, is the
// node binary an attacker would have new nodes download and run as root.
func applied(t *testing.T, h *harness.Harness, c *spec.Cluster, binaryURL string) []byte {
	t.Helper()
	eff, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	node := harness.NodeSettings(c)
	if binaryURL != "" {
		node.BinaryURL = binaryURL
		node.ConfServer = "attacker.example"
	}
	b, err := json.Marshal(event.Cluster{Header: event.Header{Version: 1, Type: event.TypeClusterApply, Cluster: c.ID}, Spec: eff, Node: &node, AppliedAt: h.Clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// payloads are a well-formed payload of every type flexslurm defines (and
// a Compute audit-log entry, about a VM Compute does not show, as one
// that ended), each of which its own topic would accept.
func payloads(t *testing.T, h *harness.Harness, c *spec.Cluster) map[string][]byte {
	hdr := func(typ string) string { return fmt.Sprintf(`"version":1,"type":%q,"cluster":%q`, typ, c.ID) }
	now := h.Clock.Now().UTC().Format(time.RFC3339)
	return map[string][]byte{
		event.TypeClusterApply:    applied(t, h, c, "https://attacker.example/flexslurm"),
		event.TypeJobPending:      []byte(`{` + hdr(event.TypeJobPending) + `,"job_id":"42","partition":"a3u","node_count":1,"nodes":["flexvm-a3u-1"]}`),
		event.TypeJobStarted:      []byte(`{` + hdr(event.TypeJobStarted) + `,"job_id":"42","nodes":["flexvm-a3u-0"]}`),
		event.TypeJobFinished:     []byte(`{` + hdr(event.TypeJobFinished) + `,"job_id":"42","nodes":["flexvm-a3u-0"]}`),
		event.TypeJobCancelled:    []byte(`{` + hdr(event.TypeJobCancelled) + `,"job_id":"42"}`),
		event.TypeNodeSuspend:     []byte(`{` + hdr(event.TypeNodeSuspend) + `,"nodes":["flexvm-a3u-0"]}`),
		event.TypeResumeFailed:    []byte(`{` + hdr(event.TypeResumeFailed) + `,"nodes":["flexvm-a3u-0"]}`),
		event.TypeBootstrapFail:   []byte(`{` + hdr(event.TypeBootstrapFail) + `,"node":"flexvm-a3u-0","vm_name":"flexvm-a3u-0-g1","step":"slurmd"}`),
		event.TypeVersionMismatch: []byte(`{` + hdr(event.TypeVersionMismatch) + `,"node":"flexvm-a3u-0","vm_name":"flexvm-a3u-0-g1","node_version":"v1.1.0","functions_version":"v1.2.0"}`),
		event.TypeHealthFailure:   []byte(`{` + hdr(event.TypeHealthFailure) + `,"node":"flexvm-a3u-0","generation":1,"vm_name":"flexvm-a3u-0-g1","verdict":"FAIL","reasons":["xid 79"],"drained":true}`),
		event.TypeReconcileTick:   []byte(`{` + hdr(event.TypeReconcileTick) + `}`),
		event.TypeSlurmSnapshot:   []byte(`{` + hdr(event.TypeSlurmSnapshot) + `,"taken_at":"` + now + `","nodes":[],"jobs":[]}`),
		event.TypeSlurmCommand:    []byte(`{` + hdr(event.TypeSlurmCommand) + `,"id":"c1","command":"drain","nodes":["flexvm-a3u-0"],"reason":"x"}`),
		event.TypeCommandResult:   []byte(`{` + hdr(event.TypeCommandResult) + `,"id":"c1","command":"drain","ok":true,"at":"` + now + `"}`),
		event.TypeAuditLog: []byte(`{"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","serviceName":"compute.googleapis.com",` +
			`"methodName":"compute.instances.deferredDelete","resourceName":"projects/` + harness.Project + `/zones/us-central1-a/instances/flexvm-a3u-2-g7"},` +
			`"resource":{"type":"gce_instance","labels":{"zone":"us-central1-a","project_id":"` + harness.Project + `"}},` +
			`"logName":"projects/` + harness.Project + `/logs/cloudaudit.googleapis.com%2Fsystem_event","timestamp":"` + now + `"}`),
	}
}

// handles are the payload types each entry point acts on.
var handles = map[string][]string{
	config.EntryScaleUp: {event.TypeClusterApply, event.TypeJobPending, event.TypeJobStarted, event.TypeJobFinished,
		event.TypeJobCancelled, event.TypeNodeSuspend, event.TypeResumeFailed, event.TypeBootstrapFail, event.TypeVersionMismatch},
	config.EntryExpiry:    {event.TypeAuditLog},
	config.EntryRepair:    {event.TypeHealthFailure},
	config.EntryReconcile: {event.TypeReconcileTick, event.TypeSlurmSnapshot},
}

// observed is what an event could change: the cluster's records and every
// Compute call the simulator received.
func observed(t *testing.T, ctx context.Context, h *harness.Harness, cluster string) (*model.State, int) {
	t.Helper()
	st, err := h.Store.Read(ctx, store.Scope{Cluster: cluster, AllPools: true, Slurm: true, JobsOfRequested: true, Jobs: []string{"42"}})
	if err != nil {
		t.Fatal(err)
	}
	return st, len(h.Sim.Calls())
}

// TestAttackForgedTypeOnEveryTopic delivers a well-formed payload of every
// type on every topic to every entry point, as a user who could publish to
// one topic (the Slurm and node accounts may publish to job-pending) would
// try to reach a function or a decision that topic is not for — above all a
// cluster.applied carrying an attacker's node binary and conf server sent to
// job-pending. Every delivery an entry point must not accept from that
// topic is acknowledged, logged as refused with the events_refused metric
// when the entry point handles that type, and changes no record and makes
// no Compute call; every delivery it must accept passes the origin check.
func TestAttackForgedTypeOnEveryTopic(t *testing.T) {
	h, logs, c, ctx := newHarness(t)
	entries := map[string]func(context.Context, cloudevents.Event) error{
		config.EntryScaleUp: h.ScaleUp.Handle, config.EntryExpiry: h.Expiry.Handle,
		config.EntryRepair: h.Repair.Handle, config.EntryReconcile: h.Reconcile.Handle,
	}
	topics := make([]string, 0, len(event.TopicTypes))
	for topic := range event.TopicTypes {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	all := payloads(t, h, c)
	refused, accepted := 0, 0
	for entry, handle := range entries {
		for _, topic := range topics {
			for typ, data := range all {
				accept := slices.Contains(config.EntryTopics[entry], topic) && slices.Contains(event.TopicTypes[topic], typ)
				if entry == config.EntryExpiry {
					// Expiry reads audit-log entries, which carry no type:
					// its origin check is the topic alone.
					accept = topic == config.TopicExpiry
				}
				if accept {
					accepted++
					continue // checked below, once the refusals are known to change nothing
				}
				refused++
				id := fmt.Sprintf("forged-%s-%s-%s", entry, topic, typ)
				before, calls := observed(t, ctx, h, c.ID)
				if err := handle(ctx, functest.Eventarc(t, topic, id, data, nil, time.Now())); err != nil {
					t.Errorf("%s from %s to %s: Handle = %v, want nil (acknowledged, never retried)", typ, topic, entry, err)
				}
				after, callsAfter := observed(t, ctx, h, c.ID)
				if d := cmp.Diff(before, after); d != "" {
					t.Errorf("%s from %s to %s changed the records (-before +after):\n%s", typ, topic, entry, d)
				}
				if callsAfter != calls {
					t.Errorf("%s from %s to %s made %d Compute calls", typ, topic, entry, callsAfter-calls)
				}
				if slices.Contains(handles[entry], typ) && !loggedRefusal(logs.lines(id)) {
					t.Errorf("%s from %s to %s: no \"event refused\" line with metric %s; logged %v", typ, topic, entry, apply.MetricEventsRefused, logs.lines(id))
				}
			}
		}
	}
	// What an entry point accepts from a topic passes the origin check (it
	// may still be malformed or rejected for its content, never refused
	// for where it came from).
	for entry, handle := range entries {
		for _, topic := range config.EntryTopics[entry] {
			for _, typ := range event.TopicTypes[topic] {
				id := fmt.Sprintf("genuine-%s-%s-%s", entry, topic, typ)
				_ = handle(ctx, functest.Eventarc(t, topic, id, all[typ], nil, time.Now()))
				if loggedRefusal(logs.lines(id)) {
					t.Errorf("%s from %s to %s was refused for its origin: %v", typ, topic, entry, logs.lines(id))
				}
			}
		}
	}
	t.Logf("%d forged deliveries refused, %d genuine ones let through", refused, accepted)
	if refused < 100 {
		t.Fatalf("only %d forged deliveries tried", refused)
	}
}

// TestAttackTopicOfAnotherProject: a message from a topic of the same name
// in another project (a subscription or trigger pointed there by mistake
// or by someone who controls that project) is refused.
func TestAttackTopicOfAnotherProject(t *testing.T) {
	h, logs, c, ctx := newHarness(t)
	all := payloads(t, h, c)
	e := functest.Eventarc(t, config.TopicClusterSpec, "other-project", all[event.TypeClusterApply], nil, time.Now())
	e.SetSource("//pubsub.googleapis.com/projects/attacker-project/topics/" + config.TopicClusterSpec)
	before, calls := observed(t, ctx, h, c.ID)
	if err := h.ScaleUp.Handle(ctx, e); err != nil {
		t.Fatalf("Handle = %v, want nil", err)
	}
	after, callsAfter := observed(t, ctx, h, c.ID)
	if d := cmp.Diff(before, after); d != "" || callsAfter != calls {
		t.Errorf("a spec from another project's topic acted: records (-before +after):\n%s; %d Compute calls", d, callsAfter-calls)
	}
	if !loggedRefusal(logs.lines("other-project")) {
		t.Errorf("not logged as refused: %v", logs.lines("other-project"))
	}
	// And a CloudEvent whose source names no topic at all.
	e = functest.Eventarc(t, config.TopicClusterSpec, "no-topic", all[event.TypeClusterApply], nil, time.Now())
	e.SetSource("//pubsub.googleapis.com/")
	if err := h.ScaleUp.Handle(ctx, e); err != nil || !loggedRefusal(logs.lines("no-topic")) {
		t.Errorf("a message from no topic: Handle = %v, logged %v; want nil and a refusal", err, logs.lines("no-topic"))
	}
}

func loggedRefusal(recs []map[string]any) bool {
	for _, r := range recs {
		if r["metric"] == apply.MetricEventsRefused {
			return true
		}
	}
	return false
}
