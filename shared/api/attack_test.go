package api_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/event"
)

// TestAttackAPIBodyPlantsNodeSettings: a caller with the invoker role tries
// to make new nodes download its own binary or talk to its own slurmctld by
// putting node settings (binary_url, conf_server, node, a startup script,
// a runtime service account) into a create body (update parses the same
// way). Each is refused with
// INVALID_ARGUMENT naming the field, nothing is published, and the spec a
// valid request publishes carries the deployment's node settings only.
func TestAttackAPIBodyPlantsNodeSettings(t *testing.T) {
	e := newEnv(t)
	plant := func(path []string, value any) []byte {
		var c map[string]any
		if err := json.Unmarshal(example(t), &c); err != nil {
			t.Fatal(err)
		}
		var m map[string]any = c
		for _, k := range path[:len(path)-1] {
			switch v := m[k].(type) {
			case []any:
				m = v[1].(map[string]any)
			case map[string]any:
				m = v
			}
		}
		m[path[len(path)-1]] = value
		b, _ := json.Marshal(c)
		return b
	}
	evil := "gs://attacker/flexslurm"
	for _, tc := range []struct {
		path  []string
		field string
	}{
		{[]string{"binary_url"}, "binaryUrl"},
		{[]string{"binaryUrl"}, "binaryUrl"},
		{[]string{"conf_server"}, "confServer"},
		{[]string{"node"}, "node"},
		{[]string{"node_pools", "startup_script"}, "nodePools[1].startupScript"},
		{[]string{"runtime_spec"}, "runtimeSpec"},
	} {
		var value any = evil
		if tc.path[len(tc.path)-1] == "node" || tc.path[len(tc.path)-1] == "runtime_spec" {
			value = map[string]any{"binary_url": evil, "service_account": "attacker@evil.iam.gserviceaccount.com"}
		}
		body := plant(tc.path, value)
		r := e.do("POST", base+"?modelDevelopmentClusterId=flexvm", body)
		vs := wantError(t, r, 400, "INVALID_ARGUMENT")
		if f := strings.Join(fields(vs), " "); !strings.Contains(f, tc.field) {
			t.Errorf("%v: violations %q do not name %s", tc.path, f, tc.field)
		}
	}
	if len(e.q.msgs) != 0 {
		t.Fatalf("refused requests published %d spec(s)", len(e.q.msgs))
	}
	// A valid create publishes the deployment's node settings.
	e.create("flexvm", example(t))
	if len(e.q.msgs) != 1 {
		t.Fatalf("published %d", len(e.q.msgs))
	}
	var ev event.Cluster
	if err := json.Unmarshal(e.q.msgs[0].Data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Node == nil || ev.Node.BinaryURL != "" || !strings.Contains(ev.Node.MungeKeySecret, "topsecret-munge") ||
		bytes.Contains(e.q.msgs[0].Data, []byte("attacker")) {
		t.Fatalf("published node settings %+v", ev.Node)
	}
}
