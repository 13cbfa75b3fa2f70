package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// slurm-conf prints the generator's lines; --check on Slurm's configuration
// for max_node_count 3 names what a spec with 4 needs; apply --slurm-conf
// refuses that spec before publishing anything.
func TestSlurmConfCheckAndApplyRefusal(t *testing.T) {
	dir := t.TempDir()
	var conf, stderr bytes.Buffer
	if rc := run([]string{"slurm-conf", "../../examples/cluster_config.json"}, &conf, &stderr); rc != 0 {
		t.Fatalf("slurm-conf: rc %d: %s", rc, stderr.String())
	}
	for _, want := range []string{"\nNodeName=flexvm-a3u-[0-2] CPUs=224 RealMemory=2871705 Gres=gpu:8 State=CLOUD Feature=a3u,cloud\n",
		"\nResumeProgram=/usr/local/libexec/flexslurm/flexslurm-hook-resume\n", "\nEnforcePartLimits=ALL\n"} {
		if !strings.Contains(conf.String(), want) {
			t.Errorf("slurm-conf output lacks %q:\n%s", want, conf.String())
		}
	}
	confPath := filepath.Join(dir, "slurm.conf")
	if err := os.WriteFile(confPath, append([]byte("ClusterName=flexvm\n"), conf.Bytes()...), 0o644); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	four := filepath.Join(dir, "four.json")
	if err := os.WriteFile(four, bytes.Replace(example, []byte(`"max_node_count": 3`), []byte(`"max_node_count": 4`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if rc := run([]string{"slurm-conf", "--check", confPath, "../../examples/cluster_config.json"}, &out, &stderr); rc != 0 {
		t.Errorf("--check of the same spec: rc %d: %s%s", rc, out.String(), stderr.String())
	}
	out.Reset()
	if rc := run([]string{"slurm-conf", "--check", confPath, four}, &out, &stderr); rc != 1 ||
		!strings.Contains(out.String(), "Slurm has no node flexvm-a3u-3") || !strings.Contains(out.String(), `"NodeName=flexvm-a3u-[0-3] `) {
		t.Errorf("--check of max 4: rc %d:\n%s", rc, out.String())
	}

	settings := filepath.Join(dir, "node.json")
	if err := os.WriteFile(settings, []byte(nodeSettingsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	rc := run([]string{"apply", "--project", "p", "--node-settings", settings, "--slurm-conf", confPath, four}, &out, &stderr)
	if rc != 1 || !strings.Contains(stderr.String(), "refused") || !strings.Contains(stderr.String(), "flexvm-a3u-3") {
		t.Errorf("apply of max 4 against Slurm's max 3: rc %d, stderr:\n%s", rc, stderr.String())
	}

	var help, errOut bytes.Buffer
	if rc := run([]string{"slurm-conf", "-h"}, &help, &errOut); rc != 0 || !strings.HasPrefix(help.String(), "usage: flexslurm slurm-conf") {
		t.Errorf("slurm-conf -h: rc %d, stdout %q", rc, help.String())
	}
	if rc := run([]string{"slurm-conf"}, &help, &errOut); rc != 2 {
		t.Errorf("slurm-conf without SPEC: rc %d, want 2", rc)
	}
}
