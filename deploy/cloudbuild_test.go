package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// cloudBuild is the part of ../cloudbuild.yaml the test reads.
type cloudBuild struct {
	Substitutions map[string]string `yaml:"substitutions"`
	Steps         []struct {
		ID         string   `yaml:"id"`
		Name       string   `yaml:"name"`
		Entrypoint string   `yaml:"entrypoint"`
		Args       []string `yaml:"args"`
		WaitFor    []string `yaml:"waitFor"`
	} `yaml:"steps"`
}

func readCloudBuild(t *testing.T) *cloudBuild {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "cloudbuild.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cb cloudBuild
	if err := yaml.Unmarshal(b, &cb); err != nil {
		t.Fatalf("cloudbuild.yaml: %v", err)
	}
	return &cb
}

// TestCloudBuild: vet, then the tests with the emulators, then the deploy,
// each waiting for the one before; the Terraform step sets every variable
// without default from the substitutions, and names no undeclared one; the
// Go image is the go.mod version.
func TestCloudBuild(t *testing.T) {
	cb := readCloudBuild(t)
	for _, s := range []string{"_PROJECT", "_REGION", "_UNIVERSE"} {
		if _, ok := cb.Substitutions[s]; !ok {
			t.Errorf("no substitution %s", s)
		}
	}
	index := map[string]int{}
	script := map[string]string{}
	for i, s := range cb.Steps {
		index[s.ID] = i
		script[s.ID] = s.Entrypoint + " " + strings.Join(s.Args, " ")
		for _, w := range s.WaitFor {
			if j, ok := index[w]; !ok || j >= i {
				t.Errorf("step %s waits for %s, which is not an earlier step", s.ID, w)
			}
		}
		if i > 0 && len(s.WaitFor) == 0 {
			t.Errorf("step %s waits for nothing: it would run in parallel with the first step", s.ID)
		}
	}
	// Each step waits for the one before it, so a failure stops the rest.
	for i := 1; i < len(cb.Steps); i++ {
		if !slices.Contains(cb.Steps[i].WaitFor, cb.Steps[i-1].ID) {
			t.Errorf("step %s does not wait for %s", cb.Steps[i].ID, cb.Steps[i-1].ID)
		}
	}
	for _, want := range []string{"vet", "test", "terraform", "dead-letters"} {
		if _, ok := index[want]; !ok {
			t.Fatalf("no step %s (steps %v)", want, index)
		}
	}
	if !(index["vet"] < index["test"] && index["test"] < index["terraform"]) {
		t.Errorf("order vet → test → terraform broken: %v", index)
	}
	if !strings.Contains(script["test"], "make test") || !strings.Contains(script["vet"], "vet") {
		t.Errorf("vet step %q, test step %q", script["vet"], script["test"])
	}
	image := os.Expand(cb.Steps[index["test"]].Name, func(k string) string { return cb.Substitutions[k] })
	if !strings.Contains(image, "google-cloud-cli:emulators") {
		t.Errorf("the test step runs in %q, not the Cloud CLI image with the emulators", image)
	}

	// Variables.
	required, declared := variables(t)
	passed := map[string]string{}
	for _, mm := range regexp.MustCompile(`-var=([a-z_]+)=(\S+)`).FindAllStringSubmatch(script["terraform"], -1) {
		passed[mm[1]] = mm[2]
	}
	for _, v := range required {
		if _, ok := passed[v]; !ok {
			t.Errorf("the terraform step does not set variable %s", v)
		}
	}
	for v := range passed {
		if !slices.Contains(declared, v) {
			t.Errorf("the terraform step sets undeclared variable %s", v)
		}
	}
	for v, sub := range map[string]string{"project": "${_PROJECT}", "region": "${_REGION}", "universe_domain": "${_UNIVERSE}"} {
		if passed[v] != sub {
			t.Errorf("-var=%s=%s, want %s", v, passed[v], sub)
		}
	}
	if !strings.Contains(script["terraform"], "output -raw eventarc_dead_letters") || !strings.Contains(script["dead-letters"], "deploy/dead-letters.sh") {
		t.Error("the dead-letter routes do not go from the terraform output to dead-letters.sh")
	}

	// The Go image is go.mod's version.
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVer == nil || !strings.HasSuffix(cb.Substitutions["_GO_IMAGE"], ":"+string(goVer[1])) {
		t.Errorf("_GO_IMAGE %q is not go.mod's go %s", cb.Substitutions["_GO_IMAGE"], goVer[1])
	}
}

// variables returns the variables of the configuration without default,
// and all declared ones.
func variables(t *testing.T) (required, declared []string) {
	t.Helper()
	b, err := os.ReadFile("variables.tf")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile(`(?ms)^variable "([a-z_]+)" \{(.*?)^\}`).FindAllStringSubmatch(string(b), -1)
	for _, bl := range blocks {
		declared = append(declared, bl[1])
		if !regexp.MustCompile(`(?m)^\s+default\s+=`).MatchString(bl[2]) {
			required = append(required, bl[1])
		}
	}
	if len(required) == 0 {
		t.Fatal("variables.tf: no variable without default found")
	}
	return required, declared
}
