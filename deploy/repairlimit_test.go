package deploy

import (
	"path/filepath"
	"testing"

	"github.com/flexslurm/flexslurm/shared/config"
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
			for addr, env := range functionEnvs(t, map[string]string{tfVar: v}) {
				if got, _ := str(get(env, envName)); got != v {
					t.Errorf("%s=%q: %s: %s = %q, want %q", tfVar, v, addr, envName, got, v)
				}
			}
		}

		for _, v := range []string{"", "1", "3", "100", "101", "0", "-1", "none", "NONE", "2.5",
			"1h", "24h", "48h", "720h", "721h", "30m", "1h30m", "60m", "0h", "day"} {
			ok := variableAccepts(t, tfVar, v)
			_, err := config.FromEnv(func(k string) string {
				return map[string]string{config.EnvProject: "p", envName: v}[k]
			})
			if ok && err != nil {
				t.Errorf("%s=%q: Terraform accepts it, the functions refuse it: %v", tfVar, v, err)
			}
			if !ok && err == nil {
				t.Errorf("%s=%q: Terraform refuses what the functions accept", tfVar, v)
			}
		}
	}
}
