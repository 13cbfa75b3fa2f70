package event

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// benchSnapshot is a slurm.snapshot of 12 nodes and 10 jobs (about 3 KB),
// the size the chaos workloads' agent publishes.
func benchSnapshot(tb testing.TB) []byte {
	tb.Helper()
	s := SlurmSnapshot{
		Header:  Header{Version: SchemaVersion, Type: TypeSlurmSnapshot, Cluster: "flexvm"},
		TakenAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Config:  &ConfigCheck{SpecSHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	}
	for i := range 12 {
		n := SnapshotNode{Name: fmt.Sprintf("flexvm-a3u-%d", i), Node: slurmstate.Node{State: slurmstate.NodeIdle, Flags: slurmstate.NodeFlags{slurmstate.FlagCloud, slurmstate.FlagPoweredDown}}}
		if i%3 == 1 {
			n.State, n.Flags = slurmstate.NodeAllocated, slurmstate.NodeFlags{slurmstate.FlagCloud}
		}
		if i%4 == 2 {
			n.Flags = append(n.Flags, slurmstate.FlagDrain)
			n.Reason = fmt.Sprintf("flexslurm: health check failed (flexvm-a3u-%d-g3)", i)
		}
		s.Nodes = append(s.Nodes, n)
	}
	for i := range 10 {
		j := SnapshotJob{ID: fmt.Sprint(4200 + i), State: "PENDING", Reason: "Resources", Partition: "a3u", NodeCount: 2, TimeLimitSeconds: 86400}
		if i%2 == 0 {
			j.State, j.Reason, j.Nodes = "RUNNING", "None", []string{fmt.Sprintf("flexvm-a3u-%d", i), fmt.Sprintf("flexvm-a3u-%d", i+1)}
		}
		s.Jobs = append(s.Jobs, j)
	}
	data, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func BenchmarkDecodeSnapshotOrTick(b *testing.B) {
	data := benchSnapshot(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if s, _, err := DecodeSnapshotOrTick(data); err != nil || s == nil {
			b.Fatal(s, err)
		}
	}
}

func BenchmarkFromCloudEvent(b *testing.B) {
	e := pushEvent(b, benchSnapshot(b))
	b.SetBytes(int64(len(e.Data())))
	b.ReportAllocs()
	for b.Loop() {
		if m, err := FromCloudEvent(e); err != nil || len(m.Data) == 0 {
			b.Fatal(m, err)
		}
	}
}

func BenchmarkPeekHeader(b *testing.B) {
	data := benchSnapshot(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := PeekHeader(data); err != nil {
			b.Fatal(err)
		}
	}
}

// pushEvent is the messagePublished CloudEvent of a message carrying
// data, its envelope with every member a push delivery has
// (https://cloud.google.com/pubsub/docs/push).
func pushEvent(tb testing.TB, data []byte) cloudevents.Event {
	tb.Helper()
	env, err := json.Marshal(map[string]any{
		"message": map[string]any{
			"attributes": map[string]string{"kind": "snapshot"},
			"data":       data, // base64, as encoding/json writes []byte
			"messageId":  "17250000000001", "message_id": "17250000000001",
			"publishTime": "2026-11-30T12:00:01.5Z", "publish_time": "2026-11-30T12:00:01.5Z",
		},
		"subscription": "projects/p/subscriptions/slurm-snapshot",
	})
	if err != nil {
		tb.Fatal(err)
	}
	e := cloudevents.New()
	e.SetID("17250000000001")
	e.SetType(PubSubType)
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/slurm-snapshot")
	if err := e.SetData(cloudevents.ApplicationJSON, env); err != nil {
		tb.Fatal(err)
	}
	return e
}
