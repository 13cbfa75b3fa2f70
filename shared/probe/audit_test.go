package probe

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"
)

// LoggingReader sends entries.list for the project with AuditFilter, follows
// pages, and reads the entries Cloud Logging returns (protoPayload as the
// audit log's JSON).
func TestLoggingReader(t *testing.T) {
	since := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	var reqs []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v2/entries:list" {
			t.Errorf("call %s %s, want POST /v2/entries:list", r.Method, r.URL.Path)
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, req)
		w.Header().Set("Content-Type", "application/json")
		if req["pageToken"] == nil {
			io.WriteString(w, `{"entries":[{"logName":"projects/p1/logs/cloudaudit.googleapis.com%2Fsystem_event","timestamp":"2026-12-07T06:11:00.123456Z",
				"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","methodName":"compute.instances.deferredDelete",
				"resourceName":"projects/p1/zones/z1-a/instances/vm","authenticationInfo":{"principalEmail":"system@google.com"}}}],"nextPageToken":"t2"}`)
			return
		}
		io.WriteString(w, `{"entries":[{"logName":"projects/p1/logs/cloudaudit.googleapis.com%2Factivity","timestamp":"2026-12-07T06:11:01Z",
			"protoPayload":{"@type":"type.googleapis.com/google.cloud.audit.AuditLog","methodName":"v1.compute.instances.delete",
			"resourceName":"projects/p1/zones/z1-a/instances/vm","authenticationInfo":{"principalEmail":"42@cloudservices.gserviceaccount.com"}}}]}`)
	}))
	defer srv.Close()
	r, err := NewLoggingReader(context.Background(), "p1", option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	entries, err := r.InstanceEntries(context.Background(), "z1-a", "vm", since)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 {
		t.Fatalf("%d calls, want 2 (two pages)", len(reqs))
	}
	if f := reqs[0]["filter"]; f != AuditFilter("p1", "z1-a", "vm", since) {
		t.Errorf("filter %v", f)
	}
	for _, want := range []string{`protoPayload.resourceName="projects/p1/zones/z1-a/instances/vm"`, `timestamp>="2026-12-07T06:00:00Z"`, "system_event", "activity"} {
		if !strings.Contains(AuditFilter("p1", "z1-a", "vm", since), want) {
			t.Errorf("filter lacks %s", want)
		}
	}
	if rn, _ := reqs[0]["resourceNames"].([]any); len(rn) != 1 || rn[0] != "projects/p1" {
		t.Errorf("resourceNames %v", reqs[0]["resourceNames"])
	}
	if len(entries) != 2 || entries[0].Method != "compute.instances.deferredDelete" || entries[1].Principal != "42@cloudservices.gserviceaccount.com" ||
		!entries[0].Time.Equal(time.Date(2026, 12, 7, 6, 11, 0, 123456000, time.UTC)) {
		t.Errorf("entries %+v", entries)
	}
	if v := DecideRunEndAudit(entries, "vm"); v.Outcome != AuditBoth {
		t.Errorf("verdict %q, want %q", v.Outcome, AuditBoth)
	}
}
