package event

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// payloadTypes are fresh values of every payload type decodeStrictRest reads.
var payloadTypes = map[string]func() any{
	"snapshot":  func() any { return &SlurmSnapshot{} },
	"job":       func() any { return &Job{} },
	"health":    func() any { return &Health{} },
	"node":      func() any { return &Node{} },
	"bootstrap": func() any { return &Bootstrap{} },
	"command":   func() any { return &SlurmCommand{} },
	"cluster":   func() any { return &Cluster{} },
	"tick":      func() any { return &Tick{} },
}

// knownNames are the JSON member names of every payload type, nested
// types included, in lower case.
var knownNames = func() map[string]bool {
	names := map[string]bool{}
	var walk func(t reflect.Type)
	seen := map[reflect.Type]bool{}
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				names[strings.ToLower(name)] = true
			}
			if f.IsExported() {
				walk(f.Type)
			}
		}
	}
	for _, v := range payloadTypes {
		walk(reflect.TypeOf(v()))
	}
	walk(reflect.TypeFor[nodeconfig.Settings]())
	walk(reflect.TypeFor[pushEnvelope]())
	return names
}()

// v2Stricter tells why encoding/json/v2 may refuse the first JSON value of
// data where encoding/json accepted it — a member named twice, invalid
// UTF-8, a member whose name is a known one in another case — or "" when
// none of these applies.
func v2Stricter(data []byte) string {
	dec := jsontext.NewDecoder(strings.NewReader(string(data)), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	v, err := dec.ReadValue()
	if err != nil {
		return ""
	}
	if !v.IsValid() {
		return "duplicate name or invalid UTF-8"
	}
	var tree any
	if json.Unmarshal(v, &tree) != nil {
		return ""
	}
	var variant func(any) bool
	variant = func(x any) bool {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				if !knownNames[k] && knownNames[strings.ToLower(k)] || variant(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if variant(e) {
					return true
				}
			}
		}
		return false
	}
	if variant(tree) {
		return "a known name in another case"
	}
	return ""
}

// badTime reports whether err is v2's refusal of a time that is not
// RFC 3339 — a one-digit hour, a comma before the fraction, an offset of
// 24 hours — which time.Time's UnmarshalJSON (v1) took.
func badTime(err error) bool {
	var serr *jsonv2.SemanticError
	return errors.As(err, &serr) && serr.GoType == reflect.TypeFor[time.Time]()
}

// escapedTime reports whether v1 refused data for a time written with a
// JSON escape, which time.Time's UnmarshalJSON does not unescape
// (https://go.dev/issue/47353) and v2 does.
func escapedTime(data []byte, v1err error) bool {
	var perr *time.ParseError
	return errors.As(v1err, &perr) && strings.Contains(perr.Value, `\`)
}

// checkAgainstV1 checks decodeStrictRest and PeekHeader against
// encoding/json's decoders on data: what v2 accepts, v1 accepted, with the
// same value; what v1 accepted and v2 refuses is refused for a reason of
// v2Stricter.
func checkAgainstV1(t *testing.T, data []byte) {
	t.Helper()
	if len(data) > MaxPayloadBytes {
		return
	}
	why := v2Stricter(data)
	for name, fresh := range payloadTypes {
		v1, v2 := fresh(), fresh()
		rest1, err1 := v1DecodeStrictRest(data, v1)
		rest2, err2 := decodeStrictRest(data, v2)
		switch {
		case err2 == nil && err1 != nil && !escapedTime(data, err1):
			t.Errorf("%s %q: v2 accepts what v1 refused (%v)", name, data, err1)
		case err2 == nil && err1 != nil:
		case err2 == nil:
			if rest1 != rest2 {
				t.Errorf("%s %q: rest %t, v1 said %t", name, data, rest2, rest1)
			}
			if diff := cmp.Diff(v1, v2); diff != "" {
				t.Errorf("%s %q: value (-v1 +v2):\n%s", name, data, diff)
			}
		case err1 == nil && why == "" && !badTime(err2):
			t.Errorf("%s %q: v2 refuses what v1 accepted: %v", name, data, err2)
		}
		if err2 != nil && !errors.Is(err2, ErrMalformed) {
			t.Errorf("%s %q: error %v does not wrap ErrMalformed", name, data, err2)
		}
	}
	h1, err1 := v1PeekHeader(data)
	h2, err2 := PeekHeader(data)
	if err2 == nil {
		err2 = checkHeader(h2)
	}
	if err1 == nil {
		err1 = checkHeader(h1)
	}
	// A header member in another case was v1's; v2 ignores it as a member
	// of another payload type, and the strict decode that follows refuses
	// it (above).
	switch {
	case why != "":
	case err2 == nil && err1 != nil:
		t.Errorf("header %q: v2 accepts what v1 refused (%v)", data, err1)
	case err2 == nil && h1 != h2:
		t.Errorf("header %q: %+v, v1 read %+v", data, h2, h1)
	case err1 == nil && err2 != nil:
		t.Errorf("header %q: v2 refuses what v1 accepted: %v", data, err2)
	}
}

// TestDecodeAgreesWithV1: over payloads of every kind spoiled every way
// (decodeSamples), the strict decode and the header agree with
// encoding/json's, except where v2 is meant to be stricter.
func TestDecodeAgreesWithV1(t *testing.T) {
	samples := decodeSamples()
	for _, s := range strictSamples {
		samples = append(samples, []byte(s.data))
	}
	for _, data := range samples {
		checkAgainstV1(t, data)
	}
}

func FuzzDecodeAgreesWithV1(f *testing.F) {
	for _, data := range decodeSamples() {
		f.Add(data)
	}
	for _, s := range strictSamples {
		f.Add([]byte(s.data))
	}
	f.Fuzz(checkAgainstV1)
}

// strictSamples are payloads encoding/json accepted and v2 refuses, with
// what the error must say.
var strictSamples = []struct {
	name, data string
	want       []string // substrings of the error
}{
	{"a known name in another case", `{"version":1,"type":"node.suspend","cluster":"flexvm","Nodes":["flexvm-a3u-1"]}`,
		[]string{`unknown object member name "Nodes"`}},
	{"a header name in another case", `{"version":1,"type":"node.suspend","CLUSTER":"flexvm","nodes":["flexvm-a3u-1"]}`,
		[]string{`unknown object member name "CLUSTER"`}},
	{"a nested name in another case", `{"version":1,"type":"slurm.snapshot","cluster":"flexvm","taken_at":"2026-11-30T12:00:00Z","nodes":[{"name":"flexvm-a3u-1","State":"idle"}],"jobs":[]}`,
		[]string{`unknown object member name "State"`, `within "/nodes/0"`}},
	{"a member named twice", `{"version":1,"type":"node.suspend","cluster":"flexvm","nodes":["flexvm-a3u-1"],"nodes":["flexvm-a3u-2"]}`,
		[]string{`duplicate object member name "nodes"`}},
	{"a header member named twice", `{"version":1,"version":1,"type":"node.suspend","cluster":"flexvm","nodes":["flexvm-a3u-1"]}`,
		[]string{`duplicate object member name "version"`}},
	{"invalid UTF-8", "{\"version\":1,\"type\":\"node.suspend\",\"cluster\":\"flexvm\",\"nodes\":[\"flexvm-a3u-1\"],\"reason\":\"bad \xff byte\"}",
		[]string{"invalid UTF-8", `within "/reason"`}},
	{"a lone surrogate", `{"version":1,"type":"node.suspend","cluster":"flexvm","nodes":["flexvm-a3u-1"],"reason":"bad \ud800 escape"}`,
		[]string{"surrogate", `within "/reason"`}},
}

// TestStricterThanV1: a payload with a name in another case, a member
// named twice or invalid UTF-8 — which encoding/json decoded — is
// malformed, and the error names the member and where it is; the same
// payload written as its producers write it decodes.
func TestStricterThanV1(t *testing.T) {
	for _, s := range strictSamples {
		t.Run(s.name, func(t *testing.T) {
			if v2Stricter([]byte(s.data)) == "" {
				t.Fatalf("v2Stricter does not see why %s is refused", s.data)
			}
			snapshot := strings.Contains(s.data, TypeSlurmSnapshot)
			var v1 any = &Node{}
			if snapshot {
				v1 = &SlurmSnapshot{}
			}
			if _, err := v1DecodeStrictRest([]byte(s.data), v1); err != nil {
				t.Fatalf("encoding/json refused it too: %v", err)
			}
			var err error
			if snapshot {
				_, _, err = DecodeSnapshotOrTick([]byte(s.data))
			} else {
				_, err = DecodeNode([]byte(s.data))
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v, want ErrMalformed", err)
			}
			for _, w := range s.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	good := `{"version":1,"type":"node.suspend","cluster":"flexvm","nodes":["flexvm-a3u-1"],"reason":"ok é \u00e9"}`
	if n, err := DecodeNode([]byte(good)); err != nil || n.Reason != "ok é é" {
		t.Errorf("DecodeNode(%s) = %+v, %v", good, n, err)
	}
}

// TestDecodeErrorsNameTheMember: a malformed payload's error names the
// member and its place, and wraps the JSON error.
func TestDecodeErrorsNameTheMember(t *testing.T) {
	const head = `{"version":1,"type":"slurm.snapshot","cluster":"flexvm"`
	for _, c := range []struct{ data, want string }{
		{`{"version":"1","type":"slurm.snapshot","cluster":"flexvm"}`, `within "/version"`},
		{head + `,"nodes":[{"name":"a","state":"idle"},{"name":"b","stat":"idle"}]}`, `unknown object member name "stat" within "/nodes/1"`},
		{head + `,"taken_at":"yesterday"}`, `within "/taken_at"`},
		{head + `,"nodes":[{"name":"a",}]}`, fmt.Sprintf(`after offset %d`, len(head)+len(`,"nodes":[{"name":"a"`))},
		{head + `} x`, fmt.Sprintf(`trailing data after the JSON payload at byte %d`, len(head)+2)},
	} {
		_, err := DecodeSnapshot([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.data, err, c.want)
		}
		var serr *jsonv2.SemanticError
		var xerr *jsontext.SyntacticError
		if !strings.Contains(c.want, "trailing") && !errors.As(err, &serr) && !errors.As(err, &xerr) {
			t.Errorf("%s: error %v wraps no JSON error", c.data, err)
		}
	}
}

// envelopeV1 is FromCloudEvent's reading of an envelope with encoding/json.
func envelopeV1(data []byte) (*Message, error) {
	var env v1Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, err
	}
	m := &Message{Data: env.Message.Data, Attributes: env.Message.Attributes, ID: env.Message.MessageID}
	if m.ID == "" {
		m.ID = env.Message.MessageID2
	}
	if m.ID == "" {
		m.ID = "id"
	}
	if t, err := time.Parse(time.RFC3339Nano, env.Message.PublishTime); err == nil {
		m.PublishTime = t
	}
	m.Topic = "projects/p/topics/t"
	return m, nil
}

// envelopeV1Only tells why encoding/json read an envelope differently:
// a name of the envelope in another case (which it matched), or a data
// that is a JSON array of bytes; "" when neither applies.
func envelopeV1Only(data []byte) string {
	var tree any
	if json.Unmarshal(data, &tree) != nil {
		return ""
	}
	top, _ := tree.(map[string]any)
	for k, v := range top {
		if strings.EqualFold(k, "message") && k != "message" {
			return "message in another case"
		}
		if k != "message" {
			continue
		}
		msg, _ := v.(map[string]any)
		for k, v := range msg {
			for _, n := range []string{"data", "attributes", "messageId", "message_id", "publishTime"} {
				if strings.EqualFold(k, n) && k != n {
					return "a member in another case"
				}
			}
			if _, ok := v.([]any); ok && k == "data" {
				return "data as an array"
			}
		}
	}
	return ""
}

func checkEnvelopeAgainstV1(t *testing.T, data []byte) {
	t.Helper()
	e := cloudevents.New()
	e.SetID("id")
	e.SetType(PubSubType)
	e.SetSource("//pubsub.googleapis.com/projects/p/topics/t")
	if err := e.SetData(cloudevents.ApplicationJSON, data); err != nil || len(e.Data()) > 2*MaxPayloadBytes {
		return
	}
	m1, err1 := envelopeV1(e.Data())
	m2, err2 := FromCloudEvent(e)
	why := envelopeV1Only(e.Data())
	switch {
	case err2 != nil && !errors.Is(err2, ErrMalformed):
		t.Errorf("%q: error %v does not wrap ErrMalformed", data, err2)
	case err2 == nil && err1 != nil && why == "":
		t.Errorf("%q: v2 accepts what v1 refused (%v)", data, err1)
	case err1 == nil && err2 != nil && why == "":
		t.Errorf("%q: v2 refuses what v1 accepted: %v", data, err2)
	case err1 == nil && err2 == nil && why == "":
		if diff := cmp.Diff(m1, m2); diff != "" {
			t.Errorf("%q: message (-v1 +v2):\n%s", data, diff)
		}
	}
}

// envelopeSamples are push envelopes: as Pub/Sub writes them, and spoiled.
func envelopeSamples() [][]byte {
	data := base64.StdEncoding.EncodeToString([]byte(`{"version":1,"type":"reconcile.tick"}`))
	full := fmt.Sprintf(`{"message":{"attributes":{"k":"v"},"data":%q,"messageId":"11","message_id":"11","publishTime":"2026-11-30T12:00:01.5Z","publish_time":"2026-11-30T12:00:01.5Z","@type":"type.googleapis.com/google.pubsub.v1.PubsubMessage"},"subscription":"projects/p/subscriptions/s"}`, data)
	out := [][]byte{[]byte(full)}
	for _, r := range [][2]string{
		{`"messageId":"11",`, ``},
		{`"messageId":"11","message_id":"11",`, ``},
		{`"messageId"`, `"MessageId"`},
		{`"message":`, `"Message":`},
		{`"data"`, `"Data"`},
		{`"messageId":"11"`, `"messageId":"11","messageId":"12"`},
		{`"k":"v"`, "\"k\":\"v\xff\""},
		{`"k":"v"`, `"k":null`},
		{`"k":"v"`, `"k":1`},
		{data, data[:len(data)-2]},
		{data, data[:8] + `\n` + data[8:]},
		{data, ``},
		{`"` + data + `"`, `null`},
		{`"` + data + `"`, `[1,2,3]`},
		{`"publishTime":"2026-11-30T12:00:01.5Z"`, `"publishTime":"yesterday"`},
		{`"publishTime":"2026-11-30T12:00:01.5Z"`, `"publishTime":1`},
		{`"subscription":"projects/p/subscriptions/s"`, `"subscription":7`},
	} {
		out = append(out, []byte(strings.Replace(full, r[0], r[1], 1)))
	}
	return append(out, []byte(`null`), []byte(`{}`), []byte(`[]`), []byte(`{"message":null}`), []byte(full+"x"))
}

// TestEnvelopeAgreesWithV1: FromCloudEvent reads every envelope as it did
// with encoding/json, except names in another case (now unknown members,
// ignored) and a data that is an array of numbers (now refused): Pub/Sub
// sends neither.
func TestEnvelopeAgreesWithV1(t *testing.T) {
	for _, data := range envelopeSamples() {
		checkEnvelopeAgainstV1(t, data)
	}
	// What Pub/Sub sends decodes to the message.
	m, err := FromCloudEvent(pushEvent(t, []byte(`{"version":1}`)))
	want := &Message{ID: "17250000000001", Data: []byte(`{"version":1}`), Attributes: map[string]string{"kind": "snapshot"},
		PublishTime: time.Date(2026, 11, 30, 12, 0, 1, 5e8, time.UTC), Topic: "projects/p/topics/slurm-snapshot"}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func FuzzEnvelopeAgreesWithV1(f *testing.F) {
	for _, data := range envelopeSamples() {
		f.Add(data)
	}
	f.Fuzz(checkEnvelopeAgainstV1)
}

// TestTimesAreRFC3339: a time must be RFC 3339 (docs/events.md): one that
// time.Time's UnmarshalJSON took although it is not — a one-digit hour,
// a comma before the fraction, an offset of 24 hours — is malformed and
// the error names the member; a time written with a JSON escape is the
// string it escapes, which v1 refused (https://go.dev/issue/47353).
func TestTimesAreRFC3339(t *testing.T) {
	const head = `{"version":1,"type":"slurm.snapshot","cluster":"flexvm","taken_at":`
	for _, bad := range []string{`"2026-11-30T1:00:00Z"`, `"2026-11-30T12:00:00,5Z"`, `"2026-11-30T12:00:00+24:00"`} {
		data := []byte(head + bad + `}`)
		var v1 SlurmSnapshot
		if _, err := v1DecodeStrictRest(data, &v1); err != nil {
			t.Errorf("%s: encoding/json refused it too: %v", data, err)
		}
		_, err := DecodeSnapshot(data)
		if !errors.Is(err, ErrMalformed) || !badTime(err) || !strings.Contains(err.Error(), `within "/taken_at"`) {
			t.Errorf("%s: error %v, want a malformed taken_at", data, err)
		}
	}
	s, err := DecodeSnapshot([]byte(head + `"2026-11-30T12:00:00\u005a"}`))
	if err != nil || !s.TakenAt.Equal(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("escaped Z: %+v, %v", s, err)
	}
}

// TestEnvelopeData: message.data decodes as encoding/json decoded a
// []byte — line breaks in the base64 skipped, "" empty, null none — and a
// bad one is an error naming it.
func TestEnvelopeData(t *testing.T) {
	for _, c := range []struct {
		data    string
		want    []byte
		wantErr string
	}{
		{`"eyJ2ZXJzaW9uIjox\r\nfQ=="`, []byte(`{"version":1}`), ""},
		{`"eyJ2ZXJzaW9uIjox\u0066Q=="`, []byte(`{"version":1}`), ""},
		{`""`, []byte{}, ""},
		{`null`, nil, ""},
		{`"eyJ2ZXJzaW9uIjoxfQ"`, nil, `within "/message/data": illegal base64 data at input byte 16`},
		{`[1,2]`, nil, `within "/message/data": an array, not a base64 string`},
		{`7`, nil, `within "/message/data": 7, not a base64 string`},
	} {
		e := cloudevents.New()
		e.SetID("id")
		e.SetType(PubSubType)
		if err := e.SetData(cloudevents.ApplicationJSON, []byte(`{"message":{"data":`+c.data+`}}`)); err != nil {
			t.Fatal(err)
		}
		m, err := FromCloudEvent(e)
		switch {
		case c.wantErr != "":
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("data %s: error %v, want it to say %q", c.data, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("data %s: %v", c.data, err)
		default:
			if diff := cmp.Diff(c.want, m.Data); diff != "" || (c.want == nil) != (m.Data == nil) {
				t.Errorf("data %s: %q, want %q", c.data, m.Data, c.want)
			}
		}
	}
}
