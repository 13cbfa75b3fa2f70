package harness

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/event"
)

// TestCloudEventEnvelope: the envelope CloudEvent builds is, byte for byte,
// encoding/json's encoding of the map a Pub/Sub push envelope is (keys
// sorted), and decodes back to the message.
func TestCloudEventEnvelope(t *testing.T) {
	for _, c := range []struct {
		data  []byte
		attrs map[string]string
	}{
		{[]byte(`{"version":1,"type":"reconcile.tick"}`), nil},
		{nil, nil},
		{[]byte{}, map[string]string{}},
		{[]byte("<\u2028&\xff>"), map[string]string{"b": "2", "a": "<1>"}},
	} {
		e := CloudEvent("topic-x", "id-1", c.data, c.attrs)
		want, err := json.Marshal(map[string]any{
			"message": map[string]any{
				"data":       base64.StdEncoding.EncodeToString(c.data),
				"attributes": c.attrs,
				"messageId":  "id-1",
			},
			"subscription": "projects/" + Project + "/subscriptions/topic-x",
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
		if string(m.Data) != string(c.data) || m.ID != "id-1" || m.Topic != "projects/"+Project+"/topics/topic-x" {
			t.Errorf("decoded %+v, want data %q", m, c.data)
		}
	}
}
