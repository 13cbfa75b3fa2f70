package api_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/harness/functest"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/api"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/status"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestMetricsLocal: the local system's /metrics — the API as `flexslurm
// local` builds it, reading the functions' log files (LogLatencies over
// EntryLogs of the run directory) and peeking the dead-letter
// subscriptions on the Pub/Sub emulator — serves the decision latencies
// ScaleUp logged while it applied the example cluster (a histogram by
// cluster and flow, flexslurm_decision_latency_seconds as deploy/
// metrics.tf names it) and each dead-letter subscription's messages under
// the PromQL name of Pub/Sub's metric (2 held, 0 held; one without a
// subscription left out).
func TestMetricsLocal(t *testing.T) {
	testenv.PubSub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	project := testenv.Project()
	ps, err := pubsub.New(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	full, empty, absent := testenv.UniqueID(t), testenv.UniqueID(t), testenv.UniqueID(t)
	for topic, n := range map[string]int{full: 2, empty: 0} {
		dl := status.DeadLetterTopic(topic)
		if err := ps.EnsureTopic(ctx, dl); err != nil {
			t.Fatal(err)
		}
		if err := ps.EnsurePullSubscription(ctx, status.DeadLetterSubscription(topic), dl); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if _, err := ps.Publish(ctx, dl, []byte{byte('0' + i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}

	// ScaleUp's log in the run directory, written as the functions write
	// theirs.
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "ScaleUp.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := harness.New(ctx, harness.Options{Log: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if err := h.Apply(ctx, functest.ExampleSpec(t)); err != nil {
		t.Fatal(err)
	}

	srv := api.New(api.Deps{
		Store: h.Store, State: store.NewMemoryAPIState(), Project: project, Log: slog.New(slog.DiscardHandler),
		Latencies:   api.LogLatencies(api.EntryLogs(dir)...),
		DeadLetters: api.PeekDeadLetters(ps.SubscriptionAdmin(), project, []string{full, empty, absent}),
	})
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil).WithContext(ctx))
	out := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("GET /metrics: HTTP %d\n%s", w.Code, out)
	}
	for _, want := range []string{
		"# TYPE flexslurm_decision_latency_seconds histogram",
		`pubsub_googleapis_com:subscription_num_undelivered_messages{subscription_id="` + full + `-dead-letter"} 2`,
		`pubsub_googleapis_com:subscription_num_undelivered_messages{subscription_id="` + empty + `-dead-letter"} 0`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, absent) {
		t.Errorf("a topic without a dead-letter subscription is listed:\n%s", out)
	}
	count := regexp.MustCompile(`(?m)^flexslurm_decision_latency_seconds_count\{cluster="flexvm",flow="flex\.scaleup"\} (\d+)$`).FindStringSubmatch(out)
	sum := regexp.MustCompile(`(?m)^flexslurm_decision_latency_seconds_sum\{cluster="flexvm",flow="flex\.scaleup"\} (\S+)$`).FindStringSubmatch(out)
	inf := regexp.MustCompile(`(?m)^flexslurm_decision_latency_seconds_bucket\{cluster="flexvm",flow="flex\.scaleup",le="\+Inf"\} (\d+)$`).FindStringSubmatch(out)
	if count == nil || sum == nil || inf == nil {
		t.Fatalf("no decision latency of flexvm's flex.scaleup in\n%s", out)
	}
	n, _ := strconv.Atoi(count[1])
	s, _ := strconv.ParseFloat(sum[1], 64)
	if n < 1 || inf[1] != count[1] || s <= 0 {
		t.Errorf("decision latency: count %s, +Inf bucket %s, sum %s: want at least one sample, all in the buckets, a positive sum", count[1], inf[1], sum[1])
	}
}
