package deploy

import (
	"path/filepath"
	"testing"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// TestRepairLimitVariables: var.repair_node_limit and var.repair_node_window
// reach every function as shared/config's variables when set, are left out
// (flexslurm's defaults) when empty, and their validations accept exactly
// the values shared/config accepts.
func TestRepairLimitVariables(t *testing.T) {
	cfg := goConsts(t, filepath.Join("..", "shared", "config", "config.go"))
	for tfVar, envName := range map[string]string{"repair_node_limit": cfg["EnvRepairNodeLimit"], "repair_node_window": cfg["EnvRepairNodeWindow"]} {
		if envName == "" {
			t.Fatalf("shared/config declares no variable for %s", tfVar)
		}
		sample := map[string]string{"repair_node_limit": "5", "repair_node_window": "48h"}[tfVar]
		for _, v := range []string{"", sample} {
			given := map[string]cty.Value{}
			for k, x := range vars {
				given[k] = x
			}
			if v != "" {
				given[tfVar] = cty.StringVal(v)
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
					got, _ := str(get(env, envName))
					if got != v {
						t.Errorf("%s=%q: %s: %s = %q, want %q", tfVar, v, f.instAddr(in.key), envName, got, v)
					}
				}
			}
			if n == 0 {
				t.Fatal("no function found")
			}
		}

		cond := variableCondition(t, tfVar)
		for _, v := range []string{"", "1", "3", "100", "101", "0", "-1", "none", "NONE", "2.5",
			"1h", "24h", "48h", "720h", "721h", "30m", "1h30m", "60m", "0h", "day"} {
			ok, diags := cond.Value(&hcl.EvalContext{
				Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{tfVar: cty.StringVal(v)})},
				Functions: (&module{dir: "."}).functions(),
			})
			if diags.HasErrors() {
				t.Fatalf("validation of %s=%q: %s", tfVar, v, diags.Error())
			}
			_, err := config.FromEnv(func(k string) string {
				return map[string]string{config.EnvProject: "p", envName: v}[k]
			})
			if ok.True() && err != nil {
				t.Errorf("%s=%q: Terraform accepts it, the functions refuse it: %v", tfVar, v, err)
			}
			if !ok.True() && err == nil {
				t.Errorf("%s=%q: Terraform refuses what the functions accept", tfVar, v)
			}
		}
	}
}
