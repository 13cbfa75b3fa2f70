package deploy

import (
	"bufio"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
)

// The install guide's commands that need no project are run as written.
// README.md marks each such block with an HTML comment on the line before
// its fence:
//
//	<!-- guide-test -->
//	<!-- guide-test exit=4 needs=firestore -->
//
// exit=N also accepts that exit status (a teardown of a cluster the empty
// simulator does not hold exits 4); needs=firestore runs the block only
// with the Firestore emulator (FIRESTORE_EMULATOR_HOST). A command added
// to a marked block is run by this test; a marked block in a section
// tells which section it belongs to.

// guideMarker matches a marker line (indented like a list item's fence).
var guideMarker = regexp.MustCompile(`^\s*<!-- guide-test((?:\s+\w+=\w+)*)\s*-->\s*$`)

// guideBlock is one marked block of the guide.
type guideBlock struct {
	section  string // the "## " heading it is under
	line     int    // of its first command, 1-based
	commands []string
	exits    []int // accepted exit statuses
	needs    []string
}

// guidePlaceholders are the guide's placeholders and what the test runs
// them as: a project, the example spec's cluster, a zone and its region.
var guidePlaceholders = map[string]string{"P": "flexslurm-guide-test", "C": "flexvm", "Z": "us-central1-a", "R": "us-central1"}

func guideBlocks(t *testing.T, path string) []guideBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []guideBlock
	var cur *guideBlock
	section, marked, inFence := "", (*guideBlock)(nil), false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trimmed := strings.TrimSpace(l)
		switch {
		case inFence && trimmed == "```":
			inFence = false
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
		case inFence:
			if cur == nil || trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			if strings.HasSuffix(trimmed, "\\") {
				t.Fatalf("%s:%d: a continued line in a guide-test block; write each command on one line", path, n)
			}
			if cur.line == 0 {
				cur.line = n
			}
			cur.commands = append(cur.commands, trimmed)
		case strings.HasPrefix(trimmed, "```"):
			inFence = true
			cur, marked = marked, nil
		case strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		default:
			if m := guideMarker.FindStringSubmatch(l); m != nil {
				b := guideBlock{section: section, exits: []int{0}}
				for _, kv := range strings.Fields(m[1]) {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "exit":
						code, err := strconv.Atoi(v)
						if err != nil {
							t.Fatalf("%s:%d: exit=%q is not a number", path, n, v)
						}
						b.exits = append(b.exits, code)
					case "needs":
						b.needs = append(b.needs, v)
					default:
						t.Fatalf("%s:%d: unknown guide-test attribute %q", path, n, k)
					}
				}
				marked = &b
			} else if trimmed != "" && marked != nil {
				t.Fatalf("%s:%d: a guide-test marker must be followed by a fenced block", path, n-1)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestInstallGuideRuns runs every marked command of README.md's install,
// upgrade and uninstall sections, as written, with the guide's
// placeholders replaced, in a scratch directory holding the example spec
// as cluster_config.json and bin/flexslurm, with flexslurm (built from
// this tree) and a sudo that runs its arguments as the test's user first
// on PATH, and FLEXSLURM_COMPUTE_ENDPOINT naming an empty Compute
// simulator. Each must exit 0 (or a status its marker accepts).
func TestInstallGuideRuns(t *testing.T) {
	blocks := guideBlocks(t, "README.md")
	// Each section the issue of an operator's path names has its commands
	// here, and the commands that need no project are among them.
	var all []string
	for _, want := range []string{"Installing on an existing Slurm cluster", "Upgrading", "Uninstalling"} {
		if !slices.ContainsFunc(blocks, func(b guideBlock) bool { return b.section == want }) {
			t.Errorf("README.md: no guide-test block in section %q", want)
		}
	}
	for _, b := range blocks {
		all = append(all, b.commands...)
	}
	for _, want := range []string{"flexslurm validate ", "flexslurm slurm-conf ", "flexslurm slurm-conf --gres-conf ",
		"flexslurm install controller --dry-run ", "flexslurm install controller --root ", "flexslurm install controller --uninstall --dry-run",
		"flexslurm probe --project P --zone us-central1-a --dry-run", "flexslurm teardown --project P --cluster C --dry-run"} {
		if !slices.ContainsFunc(all, func(c string) bool { return strings.Contains(c, want) }) {
			t.Errorf("README.md: no guide-test command runs %q", want)
		}
	}
	if t.Failed() {
		return
	}

	dir := t.TempDir()
	binDir := filepath.Join(dir, "path")
	work := filepath.Join(dir, "work")
	for _, d := range []string{binDir, filepath.Join(work, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(binDir, "flexslurm")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", exe, "github.com/flexslurm/flexslurm/cmd/flexslurm").CombinedOutput(); err != nil {
		t.Fatalf("building flexslurm: %v\n%s", err, out)
	}
	if err := os.Symlink(exe, filepath.Join(work, "bin", "flexslurm")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, "sudo"), []byte("#!/bin/sh\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "cluster_config.json"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	sim := computesim.New(computesim.Options{}, clock.Real{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)

	env := []string{"PATH=" + binDir + ":" + os.Getenv("PATH"), "HOME=" + dir, "FLEXSLURM_COMPUTE_ENDPOINT=" + srv.URL}
	for _, k := range []string{"FIRESTORE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST", "GOCACHE", "GOPATH", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	placeholder := regexp.MustCompile(`\b[PCZR]\b`)
	for _, b := range blocks {
		if slices.Contains(b.needs, "firestore") && os.Getenv("FIRESTORE_EMULATOR_HOST") == "" {
			t.Logf("SKIP (loud): README.md:%d needs the Firestore emulator (run under `flexslurm emulators run`)", b.line)
			continue
		}
		for _, c := range b.commands {
			cmdline := placeholder.ReplaceAllStringFunc(c, func(p string) string { return guidePlaceholders[p] })
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", cmdline)
			cmd.Dir, cmd.Env = work, env
			out, err := cmd.CombinedOutput()
			code := 0
			if err != nil {
				code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			if !slices.Contains(b.exits, code) {
				t.Errorf("README.md (%s): %s\n  ran as: %s\n  exit %d (want %v):\n%s", b.section, c, cmdline, code, b.exits, indent(out))
			}
		}
	}
	// What the commands were for.
	for _, f := range []string{"flexslurm.conf", "gres.conf"} {
		if st, err := os.Stat(filepath.Join(work, f)); err != nil || st.Size() == 0 {
			t.Errorf("the guide's slurm-conf lines left no %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "try", "etc", "flexslurm")); !os.IsNotExist(err) {
		t.Errorf("the guide's scratch install was not removed by its --uninstall: %v", err)
	}
}

func indent(b []byte) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n    ")
}
