package deploy

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/flexslurm/flexslurm"

// productionPackages (relative to the module root) is what runs in Google
// Cloud or beside slurmctld and on the nodes: the deployed functions (the
// root package and functions/…) and everything they, the agent, the hooks
// and the installers are built from.
var productionPackages = []string{
	".",
	"./functions/...",
	"./shared/agent",
	"./shared/apply",
	"./shared/cli",
	"./shared/clock",
	"./shared/config",
	"./shared/event",
	"./shared/gce",
	"./shared/health",
	"./shared/hooks",
	"./shared/install",
	"./shared/instancetemplate",
	"./shared/logx",
	"./shared/model",
	"./shared/naming",
	"./shared/node",
	"./shared/nodeconfig",
	"./shared/plan",
	"./shared/preflight",
	"./shared/probe",
	"./shared/proc",
	"./shared/pubsub",
	"./shared/slurm",
	"./shared/spec",
	"./shared/status",
	"./shared/store",
	"./shared/teardown",
	"./shared/wire",
}

// developmentTooling is what exists to simulate, drive or measure the
// system on a workstation or in CI; no production package may link it.
var developmentTooling = []string{
	modulePath + "/dev/bench",
	modulePath + "/dev/chaos",
	modulePath + "/dev/computesim",
	modulePath + "/dev/emulator",
	modulePath + "/dev/expirybench",
	modulePath + "/dev/harness",
	modulePath + "/dev/local",
	modulePath + "/dev/scenario",
	modulePath + "/dev/testenv",
	modulePath + "/dev/tracebench",
}

// isDevelopmentTooling reports whether import path p is development tooling
// or inside it; any package with a path element containing "localslurm" (a
// local Slurm cluster for development) is too.
func isDevelopmentTooling(p string) bool {
	for _, d := range developmentTooling {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	if !strings.HasPrefix(p, modulePath+"/") {
		return false
	}
	for _, el := range strings.Split(strings.TrimPrefix(p, modulePath+"/"), "/") {
		if strings.Contains(el, "localslurm") {
			return true
		}
	}
	return false
}

// forbiddenChains walks the non-test import graph from each root and
// returns, for every development-tooling package reachable, the shortest
// import chain that reaches it ("a -> b -> c").
func forbiddenChains(roots []string, imports map[string][]string) []string {
	var out []string
	for _, root := range roots {
		prev := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if isDevelopmentTooling(p) {
				chain := []string{p}
				for q := prev[p]; q != ""; q = prev[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				out = append(out, strings.Join(chain, " -> "))
				continue
			}
			for _, imp := range imports[p] {
				if _, seen := prev[imp]; !seen {
					prev[imp] = p
					queue = append(queue, imp)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestProductionImportsNoDevelopmentTooling fails, naming the import chain,
// when a production package links development tooling (the simulator, the
// harness, the local cluster…) through its non-test imports.
func TestProductionImportsNoDevelopmentTooling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the modulePath; skipped in -short mode")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	// Roots: the production packages themselves.
	args := append([]string{"list", "-e", "-f", "{{if .Error}}ERROR {{.ImportPath}}: {{.Error}}{{else}}{{.ImportPath}}{{end}}"}, productionPackages...)
	list := func(args []string) ([]byte, error) {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = ".." // the modulePath root, which productionPackages are relative to
		return cmd.CombinedOutput()
	}
	out, err := list(args)
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	roots := strings.Fields(strings.TrimSpace(string(out)))
	for _, r := range roots {
		if r == "ERROR" {
			t.Fatalf("go list could not load a production package (renamed or removed? update productionPackages):\n%s", out)
		}
	}
	// The non-test import graph of everything they link (go list -deps
	// leaves test files out).
	args = append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, productionPackages...)
	out, err = list(args)
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if len(imports) < len(roots) {
		t.Fatalf("go list -deps listed %d packages for %d production packages", len(imports), len(roots))
	}
	for _, chain := range forbiddenChains(roots, imports) {
		t.Errorf("production code imports development tooling: %s", chain)
	}
}

func TestForbiddenChainsNamesTheChain(t *testing.T) {
	m := func(s string) string { return modulePath + "/" + s }
	imports := map[string][]string{
		m("functions/scaleup"):       {"context", m("shared/apply")},
		m("shared/apply"):            {m("shared/gce"), m("dev/computesim")},
		m("shared/gce"):              {"net/http"},
		m("dev/computesim"):          {m("shared/naming")},
		m("shared/naming"):           nil,
		m("shared/hooks"):            {m("shared/slurm/localslurm")},
		m("shared/slurm/localslurm"): nil,
		m("shared/plan"):             {m("shared/naming")},
	}
	got := forbiddenChains([]string{m("functions/scaleup"), m("shared/hooks"), m("shared/plan")}, imports)
	want := []string{
		m("functions/scaleup") + " -> " + m("shared/apply") + " -> " + m("dev/computesim"),
		m("shared/hooks") + " -> " + m("shared/slurm/localslurm"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("forbiddenChains = %q, want %q", got, want)
	}
	for p, want := range map[string]bool{
		m("dev/testenv"): true, m("dev/computesim/internal/x"): true, m("dev/localslurm"): true,
		m("shared/slurm"): false, m("shared/computesimple"): false, "example.com/localslurm": false,
	} {
		if got := isDevelopmentTooling(p); got != want {
			t.Errorf("isDevelopmentTooling(%s) = %v, want %v", p, got, want)
		}
	}
}
