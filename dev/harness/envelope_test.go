package harness

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
)

// TestCloudEventEnvelope: the envelope CloudEvent builds is, byte for byte,
// encoding/json's encoding of the map a Pub/Sub push envelope is (keys
// sorted), and decodes back to the message.
func TestCloudEventEnvelope(t *testing.T) {
	for _, c := range []struct {
		data      []byte
		attrs     map[string]string
		topic, id string
	}{
		{[]byte(`{"version":1,"type":"reconcile.tick"}`), nil, "topic-x", "id-1"},
		{nil, nil, "topic-x", "id-1"},
		{[]byte{}, map[string]string{}, "topic-x", "id-1"},
		{[]byte("<\u2028&\xff>"), map[string]string{"b": "2", "a": "<1>"}, "topic-x", "id-1"},
		{[]byte("x"), nil, "topic-x", `id "2" <&> \ \x7f`},
		{[]byte("x"), nil, "topic-\u2028\xff", "id-3\n"},
		{[]byte("abcd"), nil, "t", ""},
	} {
		e := CloudEvent(c.topic, c.id, c.data, c.attrs)
		want, err := json.Marshal(map[string]any{
			"message": map[string]any{
				"data":       base64.StdEncoding.EncodeToString(c.data),
				"attributes": c.attrs,
				"messageId":  c.id,
			},
			"subscription": "projects/" + Project + "/subscriptions/" + c.topic,
		})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(want), string(e.Data())); d != "" {
			t.Errorf("envelope of %q (-map +CloudEvent):\n%s", c.data, d)
		}
		m, err := event.FromCloudEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		// (The source URL escapes a topic that is not ASCII.)
		ascii := !strings.ContainsFunc(c.topic, func(r rune) bool { return r > 0x7e })
		if string(m.Data) != string(c.data) || m.ID != c.id || (ascii && m.Topic != "projects/"+Project+"/topics/"+c.topic) {
			t.Errorf("decoded %+v, want data %q", m, c.data)
		}
	}
}

// TestCloudEventSource: the event CloudEvent builds, with its source
// parsed once per URL, is the one SetSource gives, for the first and
// later events of a topic, and for a source that does not parse.
func TestCloudEventSource(t *testing.T) {
	for _, topic := range []string{"topic-x", "topic-x", "topic-\u2028\xff", "t%zz", "t%zz", ""} {
		for _, id := range []string{"id-1", "", " id-2\n"} {
			got := CloudEvent(topic, id, []byte("x"), nil)
			want := cloudevents.New()
			want.SetID(id)
			want.SetType(event.PubSubType)
			want.SetSource("//pubsub.googleapis.com/projects/" + Project + "/topics/" + topic)
			want.SetDataContentType(cloudevents.ApplicationJSON)
			want.DataEncoded = got.DataEncoded
			if d := cmp.Diff(want.String(), got.String()); d != "" {
				t.Errorf("topic %q, id %q (-SetSource +CloudEvent):\n%s", topic, id, d)
			}
			if d := cmp.Diff(fmt.Sprint(want.FieldErrors), fmt.Sprint(got.FieldErrors)); d != "" {
				t.Errorf("topic %q, id %q: field errors (-SetSource +CloudEvent):\n%s", topic, id, d)
			}
		}
	}
}

// BenchmarkCloudEvent compares CloudEvent's direct envelope (an id and
// topic that need no escaping, no attributes) with the encoder it falls
// back to (an id that needs escaping), for a snapshot-sized payload.
func BenchmarkCloudEvent(b *testing.B) {
	data := []byte(strings.Repeat(`{"name":"flexvm-a3u-1","state":"IDLE","flags":["CLOUD","POWERED_DOWN"]},`, 12))
	for _, c := range []struct{ name, id string }{{"direct", "msg-123"}, {"encoder", "msg-<123>"}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				CloudEvent("flexslurm-slurm-snapshot", c.id, data, nil)
			}
		})
	}
}
