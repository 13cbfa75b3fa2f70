package gce_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// bodies records the JSON bodies of the calls whose path ends in suffix.
type bodies struct {
	mu  sync.Mutex
	got map[string][]map[string]any
}

func (b *bodies) add(path string, body []byte) {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got[path] = append(b.got[path], m)
}

func (b *bodies) of(suffix string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for p, ms := range b.got {
		if strings.HasSuffix(p, suffix) {
			out = append(out, ms...)
		}
	}
	return out
}

// TestWorkloadPolicyRequests: the adapter's resourcePolicies.insert body is
// exactly Google's REST example ({name, description, workloadPolicy: {type
// HIGH_THROUGHPUT[, maxTopologyDistance]}}), a second ensure of the same
// policy is done, one of that name with other fields is refused as an
// invalid spec, and a MIG created with a workload policy sends
// resourcePolicies.workloadPolicy and is accepted by the simulator.
func TestWorkloadPolicyRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim := computesim.New(computesim.Options{Project: project}, clock.NewManual(t0))
	rec := &bodies{got: map[string][]map[string]any{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost {
			rec.add(r.URL.Path, body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sim.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := gce.New(ctx, project, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	w := gce.WorkloadPolicySpec{Region: "us-central1", Name: "fs-c1-h200-wp-block", Description: "flexslurm workload policy of pool h200 of cluster c1", MaxTopologyDistance: "BLOCK"}
	if err := c.EnsureWorkloadPolicy(ctx, w, rid("wp")); err != nil {
		t.Fatal(err)
	}
	sent := rec.of("/regions/us-central1/resourcePolicies")
	want := map[string]any{"name": w.Name, "description": w.Description, "workloadPolicy": map[string]any{"type": "HIGH_THROUGHPUT", "maxTopologyDistance": "BLOCK"}}
	if len(sent) != 1 || !jsonEqual(sent[0], want) {
		t.Errorf("resourcePolicies.insert bodies = %v, want [%v]", sent, want)
	}
	if err := c.EnsureWorkloadPolicy(ctx, w, rid("wp again")); err != nil {
		t.Errorf("ensuring the same policy again: %v", err)
	}
	other := w
	other.MaxTopologyDistance = "CLUSTER"
	if err := c.EnsureWorkloadPolicy(ctx, other, rid("wp other")); !errors.Is(err, gce.ErrInvalidSpec) || !strings.Contains(err.Error(), "not the pool's") {
		t.Errorf("a policy of that name with another distance: %v, want ErrInvalidSpec", err)
	}
	best := gce.WorkloadPolicySpec{Region: "us-central1", Name: "fs-c1-h200-wp-any", Description: w.Description}
	if err := c.EnsureWorkloadPolicy(ctx, best, rid("wp any")); err != nil {
		t.Fatal(err)
	}
	for _, b := range rec.of("/regions/us-central1/resourcePolicies") {
		if b["name"] == best.Name && !jsonEqual(b["workloadPolicy"], map[string]any{"type": "HIGH_THROUGHPUT"}) {
			t.Errorf("best-effort policy sent %v, want no maxTopologyDistance", b["workloadPolicy"])
		}
	}

	if err := c.EnsureInstanceTemplate(ctx, flexSpec("c1-h200-v1"), rid("tpl")); err != nil {
		t.Fatal(err)
	}
	m := gce.MIGSpec{Zone: zone, Name: "fs-c1-h200-r0123456789", Template: "c1-h200-v1", WorkloadPolicy: "regions/us-central1/resourcePolicies/" + w.Name}
	if err := c.EnsureMIG(ctx, m, rid("mig")); err != nil {
		t.Fatal(err)
	}
	migs := rec.of("/zones/" + zone + "/instanceGroupManagers")
	if len(migs) != 1 || !jsonEqual(migs[0]["resourcePolicies"], map[string]any{"workloadPolicy": m.WorkloadPolicy}) {
		t.Errorf("MIG insert bodies = %v, want resourcePolicies.workloadPolicy %s", migs, m.WorkloadPolicy)
	}
	plain := gce.MIGSpec{Zone: zone, Name: "fs-c1-h200-r9876543210", Template: "c1-h200-v1"}
	if err := c.EnsureMIG(ctx, plain, rid("mig plain")); err != nil {
		t.Fatal(err)
	}
	for _, b := range rec.of("/zones/" + zone + "/instanceGroupManagers") {
		if b["name"] == plain.Name && b["resourcePolicies"] != nil {
			t.Errorf("a MIG without a policy sent resourcePolicies %v", b["resourcePolicies"])
		}
	}
	if err := c.DeleteMIG(ctx, zone, m.Name, rid("del mig")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteWorkloadPolicy(ctx, "us-central1", w.Name, rid("del wp")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteWorkloadPolicy(ctx, "us-central1", w.Name, rid("del wp again")); err != nil {
		t.Errorf("deleting a policy already gone: %v", err)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
