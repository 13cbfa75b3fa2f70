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
		want := "auto"
		if v != "" {
			want = v
		}
		for addr, env := range functionEnvs(t, map[string]string{"resize_request_api": v}) {
			if got, _ := str(get(env, envName)); got != want {
				t.Errorf("%s: %s = %q, want %q", addr, envName, got, want)
			}
		}
	}

	accepted := map[string]bool{}
	for _, v := range []string{cfg["ResizeRequestAPIV1"], cfg["ResizeRequestAPIBeta"], cfg["ResizeRequestAPIAuto"], "v2", "BETA", ""} {
		accepted[v] = variableAccepts(t, "resize_request_api", v)
	}
	want := map[string]bool{"v1": true, "beta": true, "auto": true, "v2": false, "BETA": false, "": false}
	for v, w := range want {
		if accepted[v] != w {
			t.Errorf("validation of resize_request_api=%q: accepted %v, want %v", v, accepted[v], w)
		}
	}
}

// functionEnvs evaluates the module with the test's variables, those of
// given set (an empty value leaves the variable at its default), and
// returns each function's environment by its address.
func functionEnvs(t *testing.T, given map[string]string) map[string]cty.Value {
	t.Helper()
	all := map[string]cty.Value{}
	for k, x := range vars {
		all[k] = x
	}
	for k, v := range given {
		if v != "" {
			all[k] = cty.StringVal(v)
		}
	}
	m, err := load(".", all)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cty.Value{}
	for _, f := range m.blocksOf("google_cloudfunctions2_function") {
		for _, in := range f.instances {
			out[f.instAddr(in.key)] = get(in.value, "service_config", 0, "environment_variables")
		}
	}
	if len(out) == 0 {
		t.Fatal("no function found")
	}
	return out
}

// variableAccepts reports whether the validation of variables.tf's
// variable name accepts v.
func variableAccepts(t *testing.T, name, v string) bool {
	t.Helper()
	ok, diags := variableCondition(t, name).Value(&hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{name: cty.StringVal(v)})},
		Functions: (&module{dir: "."}).functions(),
	})
	if diags.HasErrors() {
		t.Fatalf("validation of %s=%q: %s", name, v, diags.Error())
	}
	return ok.True()
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
