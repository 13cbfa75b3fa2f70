package deploy

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// TestResizeRequestAPIVariable: var.resize_request_api reaches every
// function as FLEXSLURM_RESIZE_REQUEST_API (default auto), and its
// validation accepts exactly the values shared/config accepts.
func TestResizeRequestAPIVariable(t *testing.T) {
	cfg := goConsts(t, filepath.Join("..", "shared", "config", "config.go"))
	envName := cfg["EnvResizeRequestAPI"]
	if envName == "" {
		t.Fatal("shared/config declares no EnvResizeRequestAPI")
	}
	for _, v := range []string{"", "beta"} {
		given := map[string]cty.Value{}
		for k, x := range vars {
			given[k] = x
		}
		want := "auto"
		if v != "" {
			given["resize_request_api"] = cty.StringVal(v)
			want = v
		}
		m, err := load(".", given)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range m.blocksOf("google_cloudfunctions2_function") {
			for _, in := range f.instances {
				n++
				env := get(in.value, "service_config", 0, "environment_variables")
				if got, _ := str(get(env, envName)); got != want {
					t.Errorf("%s: %s = %q, want %q", f.instAddr(in.key), envName, got, want)
				}
			}
		}
		if n == 0 {
			t.Fatal("no function found")
		}
	}

	cond := variableCondition(t, "resize_request_api")
	accepted := map[string]bool{}
	for _, v := range []string{cfg["ResizeRequestAPIV1"], cfg["ResizeRequestAPIBeta"], cfg["ResizeRequestAPIAuto"], "v2", "BETA", ""} {
		ok, diags := cond.Value(&hcl.EvalContext{
			Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{"resize_request_api": cty.StringVal(v)})},
			Functions: (&module{dir: "."}).functions(),
		})
		if diags.HasErrors() {
			t.Fatalf("validation of %q: %s", v, diags.Error())
		}
		accepted[v] = ok.True()
	}
	want := map[string]bool{"v1": true, "beta": true, "auto": true, "v2": false, "BETA": false, "": false}
	for v, w := range want {
		if accepted[v] != w {
			t.Errorf("validation of resize_request_api=%q: accepted %v, want %v", v, accepted[v], w)
		}
	}
}

// variableCondition returns the validation condition of a variable in
// variables.tf.
func variableCondition(t *testing.T, name string) hcl.Expression {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCLFile("variables.tf")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, blk := range f.Body.(*hclsyntax.Body).Blocks {
		if blk.Type != "variable" || blk.Labels[0] != name {
			continue
		}
		for _, v := range blk.Body.Blocks {
			if v.Type == "validation" {
				return v.Body.Attributes["condition"].Expr
			}
		}
	}
	t.Fatalf("variable %s has no validation", name)
	return nil
}
