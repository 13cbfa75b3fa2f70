package harness

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

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
