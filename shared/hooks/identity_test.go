package hooks

import (
	"context"
	"errors"
	"testing"
	"time"
)

type fakeSigner struct{ err error }

func (f fakeSigner) Sign(_ context.Context, cluster string, data []byte, attrs map[string]string) (map[string]string, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := map[string]string{"identity.0": "token-for-" + cluster}
	for k, v := range attrs {
		out[k] = v
	}
	return out, nil
}

type recordingPub struct{ attrs []map[string]string }

func (r *recordingPub) Publish(_ context.Context, _ string, _ []byte, attrs map[string]string) (string, error) {
	r.attrs = append(r.attrs, attrs)
	return "id", nil
}

// TestSigningPublisherSignsReportsAtPublishTime: reports carry the token
// the signer gave for their own cluster; other messages go unsigned; a
// report whose token cannot be had stays spooled, never published without.
func TestSigningPublisherSignsReportsAtPublishTime(t *testing.T) {
	ctx := context.Background()
	rec := &recordingPub{}
	p := SigningPublisher{Pub: rec, Signer: fakeSigner{}}
	if _, err := p.Publish(ctx, "job-pending", []byte(`{"version":1,"type":"job.pending","cluster":"c1","job_id":"1"}`), map[string]string{"type": "job.pending"}); err != nil {
		t.Fatal(err)
	}
	if got := rec.attrs[0]; got["identity.0"] != "token-for-c1" || got["type"] != "job.pending" {
		t.Fatalf("report attributes %v", got)
	}
	if _, err := p.Publish(ctx, "slurm-command-results", []byte(`{"version":1,"type":"slurm.command_result","cluster":"c1"}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.attrs[1]; got["identity.0"] != "" {
		t.Fatalf("a command result was signed: %v", got)
	}
	if _, err := (SigningPublisher{Pub: rec, Signer: fakeSigner{err: errors.New("unreachable")}}).Publish(ctx, "job-pending", []byte(`not json`), nil); err != nil {
		t.Fatalf("a message that is not a report is held back (it would stay spooled for ever): %v", err)
	}

	spool := &Spool{Dir: t.TempDir()}
	rec = &recordingPub{}
	o := &Outbox{Spool: spool, Pub: SigningPublisher{Pub: rec, Signer: fakeSigner{err: errors.New("metadata server unreachable")}}, Timeout: time.Second}
	res, err := o.Send(ctx, []Message{{Topic: "health-failure", Data: []byte(`{"version":1,"type":"health.failure","cluster":"c1","node":"c1-a-0","generation":1,"verdict":"FAIL"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 0 || res.Spooled != 1 || len(rec.attrs) != 0 {
		t.Fatalf("unsigned report: %+v, %d published; want it spooled", res, len(rec.attrs))
	}
}
