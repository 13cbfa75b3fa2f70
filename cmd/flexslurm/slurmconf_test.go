package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/install"
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

// TestSlurmConfScopes: slurm-conf's first part names only flexslurm's
// nodes and partitions (power saving on the partitions, no Default=YES
// unless the spec names a default partition); every line of its second,
// cluster-wide part follows a comment saying why flexslurm needs it and
// what it changes for the other partitions; and every slurm.conf line
// `install controller` prints is one slurm-conf prints (HealthCheckInterval
// included).
func TestSlurmConfScopes(t *testing.T) {
	var conf, stderr bytes.Buffer
	if rc := run([]string{"slurm-conf", "../../examples/cluster_config.json"}, &conf, &stderr); rc != 0 {
		t.Fatalf("slurm-conf: rc %d: %s", rc, stderr.String())
	}
	part1, part2, ok := strings.Cut(conf.String(), "# Part 2 of 2: cluster-wide parameters.")
	if !ok {
		t.Fatalf("slurm-conf prints no cluster-wide part:\n%s", conf.String())
	}
	for _, l := range strings.Split(part1, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if !strings.HasPrefix(l, "NodeName=flexvm-a3u-") && !strings.HasPrefix(l, "PartitionName=a3u ") {
			t.Errorf("the scoped part has a line that is not flexslurm's node or partition: %q", l)
		}
		if strings.Contains(l, "Default=YES") {
			t.Errorf("Default=YES on a partition the spec does not name as default: %q", l)
		}
		if strings.HasPrefix(l, "PartitionName=") && !strings.Contains(l, " SuspendTime=300 SuspendTimeout=30 ResumeTimeout=65535 ") {
			t.Errorf("flexslurm's partition carries no power saving of its own: %q", l)
		}
	}
	// Each group: a comment block, then its lines.
	var lines []string
	block, prevComment := "", false
	_, part2, _ = strings.Cut(part2, "\n")
	for _, l := range strings.Split(part2, "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "#"):
			if !prevComment {
				block = ""
			}
			block += l + "\n"
			prevComment = true
		default:
			prevComment = false
			lines = append(lines, l)
			if !strings.Contains(block, "Why:") || !strings.Contains(block, "Other partitions:") {
				t.Errorf("cluster-wide line %q does not follow a comment saying why and what it changes for other partitions:\n%s", l, block)
			}
			key, _, _ := strings.Cut(l, "=")
			if slices.Contains([]string{"SuspendTime", "SuspendTimeout", "ResumeTimeout"}, key) {
				t.Errorf("%s is cluster-wide; want it on flexslurm's partitions", l)
			}
		}
	}
	for _, l := range install.SlurmConfLines() {
		if !slices.Contains(lines, l) {
			t.Errorf("install controller prints %q, which slurm-conf's cluster-wide lines do not have", l)
		}
	}
}
