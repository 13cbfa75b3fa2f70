package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/flexslurm/flexslurm/shared/probe"
)

// The file flexslurm probe writes beside this configuration
// (compute-probe.auto.tfvars.json) sets only variables it declares, with
// values of their types: Terraform reads every *.auto.tfvars.json of the
// directory.
func TestProbeSettingsAreThisConfigurationsVariables(t *testing.T) {
	if filepath.Base(probe.DefaultSettingsFile) == "" || filepath.Dir(probe.DefaultSettingsFile) != "deploy" {
		t.Fatalf("probe.DefaultSettingsFile %q is not in deploy/", probe.DefaultSettingsFile)
	}
	rep := probe.Report{RunID: "r1", Verdicts: []probe.Verdict{
		{Point: probe.PointNamedRequests, Outcome: probe.NamedOnBetaOnly},
		{Point: probe.PointLabelFilter, Outcome: probe.FilterIgnored},
	}}
	path := filepath.Join(t.TempDir(), "compute-probe.auto.tfvars.json")
	if err := probe.WriteSettings(path, probe.SettingsFor(rep, "my-proj", "europe-west4-a", time.Now())); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var written map[string]any
	if err := json.Unmarshal(data, &written); err != nil {
		t.Fatal(err)
	}
	given := map[string]cty.Value{}
	for k, v := range vars {
		given[k] = v
	}
	for name, v := range written {
		switch v := v.(type) {
		case string:
			given[name] = cty.StringVal(v)
		case map[string]any:
			m := map[string]cty.Value{}
			for k, s := range v {
				str, ok := s.(string)
				if !ok {
					t.Fatalf("%s.%s = %v: want a string", name, k, s)
				}
				m[k] = cty.StringVal(str)
			}
			given[name] = cty.MapVal(m)
		default:
			t.Fatalf("%s = %v: want a string or a map of strings", name, v)
		}
	}
	if given["resize_request_api"] != cty.StringVal("beta") {
		t.Errorf("resize_request_api = %v, want \"beta\"", given["resize_request_api"])
	}
	if _, err := load(".", given); err != nil {
		t.Errorf("the probe's settings do not fit this configuration: %v", err)
	}
}
