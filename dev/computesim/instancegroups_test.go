package computesim

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// TestInstanceGroupsAndAutoscalersList: what gcloud's `instance-groups
// managed list` reads besides the MIGs — each MIG's instance group, of the
// same name, with its member count, and the zone's autoscalers (none).
func TestInstanceGroupsAndAutoscalersList(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	if err := e.insertRR("pool", &computepb.InstanceGroupManagerResizeRequest{Name: proto.String("rr"),
		Instances:            []*computepb.PerInstanceConfig{{Name: proto.String("pool-0")}},
		RequestedRunDuration: &computepb.Duration{Seconds: proto.Int64(3600)}}, ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	get := func(path string, out any) {
		t.Helper()
		resp, err := http.Get(e.srv.URL + "/compute/v1/projects/" + testProject + "/zones/" + testZone + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: HTTP %d %s", path, resp.StatusCode, raw)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
	var groups struct {
		Items []struct {
			Name string `json:"name"`
			Size int    `json:"size"`
		} `json:"items"`
	}
	get("/instanceGroups", &groups)
	if len(groups.Items) != 1 || groups.Items[0].Name != "pool" || groups.Items[0].Size != 1 {
		t.Errorf("instance groups %+v, want pool with its one VM", groups.Items)
	}
	var autoscalers struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	get("/autoscalers", &autoscalers)
	if autoscalers.Kind != "compute#autoscalerList" || len(autoscalers.Items) != 0 {
		t.Errorf("autoscalers %+v, want an empty list", autoscalers)
	}
}
