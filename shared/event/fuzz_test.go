package event

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
)

// Fuzz targets: every decoder must return a value or an error wrapping
// ErrMalformed for any input — never panic, never accept a payload above
// MaxPayloadBytes. Seed corpora are the documented examples (f.Add) plus
// files under testdata/fuzz/.

func FuzzDecodeJob(f *testing.F) {
	f.Add([]byte(`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"4242","partition":"a3u","node_count":2,"nodes":["flexvm-a3u-1","flexvm-a3u-2"]}`))
	f.Add([]byte(`{"version":1,"type":"job.finished","cluster":"flexvm","job_id":"12_3"}`))
	f.Add([]byte(`{"version":1,"type":"job.pending","cluster":"flexvm","job_id":"1","node_count":-1}`))
	f.Add([]byte(`{"version":1,"type":"job.finished","cluster":"flexvm","job_id":"7","nodes":["flexvm-a3u-1"],"nodes_up":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := DecodeJob(data)
		if err == nil && (j == nil || !jobIDRe.MatchString(j.JobID) || j.NodeCount < 0 ||
			(j.NodesUp && (j.Type != TypeJobFinished || len(j.Nodes) == 0))) {
			t.Fatalf("accepted an invalid job: %+v", j)
		}
	})
}

func FuzzDecodeHealth(f *testing.F) {
	f.Add([]byte(`{"version":1,"type":"health.failure","cluster":"flexvm","node":"flexvm-a3u-1","generation":2,"job_id":"7","job_state":"requeued","verdict":"FAIL","reasons":["GPU 3: ECC"]}`))
	f.Add([]byte(`{"version":1,"type":"health.failure","cluster":"flexvm","node":"../../etc","verdict":"FAIL"}`))
	f.Add([]byte(`{"version":1,"type":"health.failure","cluster":"flexvm","node":"flexvm-a3u-1","verdict":"INCONCLUSIVE","drained":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHealth(data)
		if err == nil && (!ValidNodeName(h.Node) || len(h.Reasons) > MaxHealthReasons ||
			(h.Verdict != VerdictFail && h.Verdict != VerdictInconclusive) || (h.Drained && h.Verdict != VerdictFail)) {
			t.Fatalf("accepted an invalid health event: %+v", h)
		}
	})
}

func FuzzDecodeAudit(f *testing.F) {
	f.Add([]byte(`{"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","serviceName":"compute.googleapis.com","methodName":"compute.instances.deferredDelete","resourceName":"projects/p/zones/us-central1-a/instances/flexvm-a3u-0-g1","authenticationInfo":{"principalEmail":"system@google.com"}},"resource":{"type":"gce_instance","labels":{"instance_id":"1"}},"timestamp":"2026-11-30T12:00:00Z","logName":"projects/p/logs/cloudaudit.googleapis.com%2Fsystem_event","operation":{"id":"x","first":true,"last":true}}`))
	f.Add([]byte(`{"protoPayload":{"serviceName":"compute.googleapis.com","methodName":"v1.compute.instances.delete","resourceName":"projects/p/zones/z/instances/a"},"timestamp":"not a time"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := DecodeAudit(data)
		if err == nil && (a.Instance == "" || a.Zone == "" || a.Kind == "") {
			t.Fatalf("accepted an entry without an instance: %+v", a)
		}
	})
}

func FuzzDecodeNodeAndSnapshot(f *testing.F) {
	f.Add([]byte(`{"version":1,"type":"node.suspend","cluster":"flexvm","nodes":["flexvm-a3u-1"]}`))
	f.Add([]byte(`{"version":1,"type":"slurm.snapshot","cluster":"flexvm","taken_at":"2026-11-30T12:00:00Z","nodes":[{"name":"flexvm-a3u-1","state":"idle","flags":["CLOUD"]}],"jobs":[{"id":"1","state":"PENDING"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if n, err := DecodeNode(data); err == nil && len(n.Nodes) == 0 {
			t.Fatal("accepted a node event without nodes")
		}
		_, _ = DecodeSnapshot(data)
		_, _ = DecodeSlurmCommand(data)
		_, _ = DecodeCluster(data)
		_, _ = DecodeTick(data)
	})
}

func FuzzFromCloudEvent(f *testing.F) {
	env, _ := json.Marshal(map[string]any{"message": map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(`{"version":1}`)), "messageId": "1", "publishTime": "2026-11-30T12:00:00Z"}, "subscription": "projects/p/subscriptions/s"})
	f.Add(env)
	f.Add([]byte(`{"message":{"data":"!!!not base64"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := cloudevents.New()
		e.SetID("id")
		e.SetType(PubSubType)
		e.SetSource("//pubsub.googleapis.com/projects/p/topics/t")
		if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil {
			return
		}
		m, err := FromCloudEvent(e)
		if err == nil && m.ID == "" {
			t.Fatal("a decoded message has no id")
		}
	})
}
