package api

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// Unconfigured (no project), the entry point answers every request with a
// google.rpc-shaped UNAVAILABLE that says why, and builds nothing.
func TestEntryUnconfigured(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	w := httptest.NewRecorder()
	Entry(w, httptest.NewRequest("GET", "/v1beta1/projects/p/locations/us-central1/modelDevelopmentClusters", nil))
	var body struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, w.Body.String())
	}
	if w.Code != 503 || body.Error.Code != 503 || body.Error.Status != "UNAVAILABLE" || body.Error.Message == "" {
		t.Fatalf("HTTP %d %+v", w.Code, body.Error)
	}
	if server != nil {
		t.Fatal("a server was built without a configuration")
	}
}
