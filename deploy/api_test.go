package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/flexslurm/flexslurm/shared/api"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// apiFunction returns the HTTP API deployment (google_cloudfunctions2_function.api).
func apiFunction(t *testing.T, m *module) []deployment {
	t.Helper()
	var out []deployment
	for _, b := range m.blocksOf("google_cloudfunctions2_function") {
		if b.name != "api" {
			continue
		}
		for _, in := range b.instances {
			out = append(out, deployment{b.instAddr(in.key), in.value})
		}
	}
	return out
}

// TestAPIFunction: the API is one HTTP deployment of the entry point
// functions.go registers with functions.HTTP, from the one source upload,
// with no event trigger; it runs as function["api"] with shared/config's
// environment and the node settings flexslurm apply would read; and the
// only roles/run.invoker on its service are var.api_invokers' (none by
// default: no one may call it until the operator says who).
func TestAPIFunction(t *testing.T) {
	m := loadModule(t)
	fns := apiFunction(t, m)
	if len(fns) != 1 {
		t.Fatalf("want one google_cloudfunctions2_function.api, have %d", len(fns))
	}
	f := fns[0]
	entry := str1(get(f.v, "build_config", 0, "entry_point"))
	if http := registeredHTTP(t); len(http) != 1 || !http[entry] {
		t.Errorf("%s: entry point %q, want the one functions.go registers with functions.HTTP (%v)", f.key, entry, keys(http))
	}
	if rt, _ := str(get(f.v, "build_config", 0, "runtime")); rt != "go126" {
		t.Errorf("%s: runtime %q, want go126", f.key, rt)
	}
	if obj := str1(get(f.v, "build_config", 0, "source", 0, "storage_source", 0, "object")); obj != sourceObject(t, m) {
		t.Errorf("%s: source object %q is not the uploaded archive", f.key, obj)
	}
	for _, b := range m.blocksOf("google_cloudfunctions2_function") {
		for _, nb := range b.body.Blocks {
			if b.name == "api" && nb.Type == "event_trigger" {
				t.Errorf("%s: has an event trigger; the API is called over HTTP", f.key)
			}
		}
	}
	run, ok := m.ref1(get(f.v, "service_config", 0, "service_account_email"))
	if !ok || run.b.typ != "google_service_account" || run.b.name != "function" || run.key != "api" {
		t.Errorf("%s: runs as %v, want google_service_account.function[\"api\"]", f.key, get(f.v, "service_config", 0, "service_account_email"))
	}
	vars := get(f.v, "service_config", 0, "environment_variables")
	if vars == cty.NilVal || !vars.IsWhollyKnown() {
		t.Fatalf("%s: environment is not known", f.key)
	}
	env := prefixed(goConsts(t, filepath.Join("..", "shared", "config", "config.go")), "Env")
	names := map[string]bool{api.EnvNodeSettings: true}
	for _, v := range env {
		names[v] = true
	}
	for k := range vars.AsValueMap() {
		if !names[k] {
			t.Errorf("%s: environment variable %s is neither shared/config's nor %s", f.key, k, api.EnvNodeSettings)
		}
	}
	for _, local := range []string{env["EnvComputeEndpoint"], env["EnvClock"], env["EnvIdentityCertsURL"]} {
		if _, ok := vars.AsValueMap()[local]; ok {
			t.Errorf("%s: sets %s, which is for the local system only", f.key, local)
		}
	}
	// The node settings decode strictly (unknown fields refused), as the
	// function reads them; references to other resources are markers here.
	ns, ok := str(get(vars, api.EnvNodeSettings))
	if !ok {
		t.Fatalf("%s: %s is not a known string", f.key, api.EnvNodeSettings)
	}
	var s nodeconfig.Settings
	dec := json.NewDecoder(strings.NewReader(ns))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Errorf("%s: %s does not decode as node settings: %v\n%s", f.key, api.EnvNodeSettings, err, ns)
	}
	// Invokers: var.api_invokers only, none by default.
	for _, b := range m.blocksOf("google_cloud_run_v2_service_iam_member") {
		for _, in := range b.instances {
			svc, ok := m.ref1(get(in.value, "name"))
			if ok && svc.b.typ == "google_cloudfunctions2_function" && svc.b.name == "api" {
				t.Errorf("%s: grants %v on the API with var.api_invokers empty", b.instAddr(in.key), get(in.value, "member"))
			}
		}
	}
	if b := m.blocksOf("google_cloud_run_v2_service_iam_member"); !hasBlock(b, "api_invoker") {
		t.Error("no google_cloud_run_v2_service_iam_member.api_invoker for var.api_invokers")
	}
}

func hasBlock(bs []*block, name string) bool {
	for _, b := range bs {
		if b.name == name {
			return true
		}
	}
	return false
}

// TestNoPublicMembers: no grant in the configuration names allUsers or
// allAuthenticatedUsers (the API would be open to anyone); var.api_invokers
// refuses them.
func TestNoPublicMembers(t *testing.T) {
	files, err := filepath.Glob("*.tf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .tf files: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if f == "variables.tf" && strings.Contains(code, "contains([\"allUsers\", \"allAuthenticatedUsers\"]") {
				continue // the validation that refuses them
			}
			if strings.Contains(code, "\"allUsers\"") || strings.Contains(code, "\"allAuthenticatedUsers\"") || strings.Contains(code, "allUsers\"") {
				t.Errorf("%s:%d: names a public member: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	v, err := os.ReadFile("variables.tf")
	if err != nil || !strings.Contains(string(v), `!contains(["allUsers", "allAuthenticatedUsers"], m)`) {
		t.Error("variables.tf: api_invokers does not refuse allUsers and allAuthenticatedUsers")
	}
}
