package health

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMain lets the test binary stand in for the tools: ExecSources runs a
// symbolic link to it whose name selects the behaviour (the tools run with
// a fixed environment, so the name is the only channel).
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "fake-echo": // prints its arguments and environment as JSON
		json.NewEncoder(os.Stdout).Encode(map[string][]string{"args": os.Args[1:], "env": os.Environ()})
		os.Exit(0)
	case "fake-exit3":
		fmt.Println("partial output")
		fmt.Fprintln(os.Stderr, "something went wrong")
		os.Exit(3)
	case "fake-sleep":
		time.Sleep(time.Minute)
		os.Exit(0)
	case "fake-flood": // one byte more than MaxOutputBytes, in lines
		line := strings.Repeat("x", 1023) + "\n"
		for range MaxOutputBytes / len(line) {
			os.Stdout.WriteString(line)
		}
		os.Stdout.WriteString("TAIL\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeTool links the test binary as dir/name and returns the link.
func fakeTool(t *testing.T, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(self, link); err != nil {
		t.Skipf("cannot link the test binary: %v", err)
	}
	return link
}

// TestExecSourcesDepth: the DCGM diagnostic runs at the level asked for,
// and all_reduce_perf across the node's GPUs with data checking on.
func TestExecSourcesDepth(t *testing.T) {
	echo := fakeTool(t, "fake-echo")
	src := ExecSources{DCGMI: echo, AllReducePerf: echo, DCGMLevel: 3, GPUs: 8}
	for p, args := range map[ProbeName][]string{
		ProbeDCGMDiag: {"diag", "-r", "3", "-j"},
		ProbeNCCL:     {"-b", "8M", "-e", "1G", "-f", "2", "-g", "8", "-c", "1"},
	} {
		out, err := src.Collect(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var got struct{ Args []string }
		if err := json.Unmarshal(out.Stdout, &got); err != nil {
			t.Fatalf("%s: %v: %s", p, err, out.Stdout)
		}
		if diff := cmp.Diff(args, got.Args); diff != "" {
			t.Errorf("%s arguments (-want +got):\n%s", p, diff)
		}
	}
	if d := (Options{DCGMLevel: 3}).budget(ProbeDCGMDiag); d != DCGMBudget(3) || d < 15*time.Minute {
		t.Errorf("level-3 budget %v", d)
	}
	if _, _, err := (ExecSources{SearchPath: []string{t.TempDir()}}).command(ProbeNCCL); !errors.Is(err, ErrToolMissing) {
		t.Errorf("all_reduce_perf nowhere: %v, want ErrToolMissing", err)
	}
}

func TestExecSourcesArgumentsAndEnvironment(t *testing.T) {
	echo := fakeTool(t, "fake-echo")
	src := ExecSources{NvidiaSMI: echo, DCGMI: echo, Dmesg: echo}
	want := map[ProbeName][]string{
		ProbeGPUQuery:  {"--query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure", "--format=csv,noheader"},
		ProbeNVLink:    {"nvlink", "-e"},
		ProbeKernelLog: {},
		ProbeDCGMDiag:  {"diag", "-r", "1", "-j"},
	}
	for p, args := range want {
		out, err := src.Collect(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var got struct{ Args, Env []string }
		if err := json.Unmarshal(out.Stdout, &got); err != nil {
			t.Fatalf("%s: %v: %s", p, err, out.Stdout)
		}
		if diff := cmp.Diff(args, got.Args, cmpEmptyNil); diff != "" {
			t.Errorf("%s arguments (-want +got):\n%s", p, diff)
		}
		if diff := cmp.Diff(toolEnv, got.Env); diff != "" {
			t.Errorf("%s environment (-want +got):\n%s", p, diff)
		}
	}
}

// toolDir returns a directory holding the named tools, each a link to the
// fake-echo test binary.
func toolDir(t *testing.T, names ...string) string {
	t.Helper()
	echo := fakeTool(t, "fake-echo")
	dir := t.TempDir()
	for _, n := range names {
		if err := os.Symlink(echo, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// withDefaultSearchPath replaces DefaultSearchPath for one test.
func withDefaultSearchPath(t *testing.T, dirs ...string) {
	saved := DefaultSearchPath
	DefaultSearchPath = dirs
	t.Cleanup(func() { DefaultSearchPath = saved })
}

// TestExecSourcesLookup: unconfigured tools are found on the search path,
// the kernel log falls back to journalctl, and configured paths win.
func TestExecSourcesLookup(t *testing.T) {
	empty := t.TempDir()
	withDefaultSearchPath(t, empty)
	all := toolDir(t, "nvidia-smi", "dcgmi", "dmesg", "journalctl")
	onlyJournal := toolDir(t, "journalctl")
	other := toolDir(t, "nvidia-smi", "dmesg")
	tests := []struct {
		name     string
		src      ExecSources
		probe    ProbeName
		wantPath string
		wantArgs []string
		wantErr  string
	}{
		{name: "nvidia-smi on the search path", src: ExecSources{SearchPath: []string{empty, all}}, probe: ProbeGPUQuery,
			wantPath: filepath.Join(all, "nvidia-smi"), wantArgs: []string{"--query-gpu=" + GPUQueryFields, "--format=csv,noheader"}},
		{name: "first directory wins", src: ExecSources{SearchPath: []string{other, all}}, probe: ProbeNVLink,
			wantPath: filepath.Join(other, "nvidia-smi"), wantArgs: []string{"nvlink", "-e"}},
		{name: "dcgmi", src: ExecSources{SearchPath: []string{all}}, probe: ProbeDCGMDiag,
			wantPath: filepath.Join(all, "dcgmi"), wantArgs: []string{"diag", "-r", "1", "-j"}},
		{name: "dmesg before journalctl", src: ExecSources{SearchPath: []string{all}}, probe: ProbeKernelLog,
			wantPath: filepath.Join(all, "dmesg")},
		{name: "journalctl without dmesg", src: ExecSources{SearchPath: []string{onlyJournal}}, probe: ProbeKernelLog,
			wantPath: filepath.Join(onlyJournal, "journalctl"), wantArgs: []string{"--dmesg", "--no-pager", "--quiet", "--output=short-monotonic"}},
		{name: "configured journalctl", src: ExecSources{Journalctl: filepath.Join(all, "journalctl"), SearchPath: []string{all}}, probe: ProbeKernelLog,
			wantPath: filepath.Join(all, "journalctl"), wantArgs: journalctlArgs},
		{name: "configured nvidia-smi", src: ExecSources{NvidiaSMI: filepath.Join(other, "nvidia-smi"), SearchPath: []string{all}}, probe: ProbeGPUQuery,
			wantPath: filepath.Join(other, "nvidia-smi"), wantArgs: []string{"--query-gpu=" + GPUQueryFields, "--format=csv,noheader"}},
		{name: "dcgmi missing", src: ExecSources{SearchPath: []string{other}}, probe: ProbeDCGMDiag,
			wantErr: "tool missing: dcgmi not found in " + other + ":" + empty},
		{name: "no kernel log tool", src: ExecSources{SearchPath: []string{empty}}, probe: ProbeKernelLog,
			wantErr: "tool missing: neither dmesg nor journalctl in " + empty},
		{name: "relative directories are skipped", src: ExecSources{SearchPath: []string{".", "bin"}}, probe: ProbeGPUQuery,
			wantErr: "tool missing: nvidia-smi not found in " + empty},
	}
	t.Chdir(all) // "." holds every tool, and must not be searched
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, args, err := tt.src.command(tt.probe)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrToolMissing) {
					t.Fatalf("err = %v, want %q wrapping ErrToolMissing", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if path != tt.wantPath {
				t.Errorf("path = %s, want %s", path, tt.wantPath)
			}
			if diff := cmp.Diff(tt.wantArgs, args, cmpEmptyNil); diff != "" {
				t.Errorf("arguments (-want +got):\n%s", diff)
			}
		})
	}
	// A file that is not executable is not a tool.
	notExec := t.TempDir()
	if err := os.WriteFile(filepath.Join(notExec, "dcgmi"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (ExecSources{SearchPath: []string{notExec}}).command(ProbeDCGMDiag); !errors.Is(err, ErrToolMissing) {
		t.Errorf("non-executable dcgmi: err = %v, want ErrToolMissing", err)
	}
	// Missing tools make their probes INCONCLUSIVE with the reason.
	res := Check(context.Background(), ExecSources{SearchPath: []string{empty}}, Options{Skip: []ProbeName{ProbeKernelLog}})
	if res.Verdict != Inconclusive || !slices.Contains(res.Reasons, "dcgm_diag: tool missing: dcgmi not found in "+empty) {
		t.Errorf("check without tools: %s %q", res.Verdict, res.Reasons)
	}
}

// TestDirSourcesSidecars: NAME.stderr and NAME.exit record the tool's
// standard error and exit status.
func TestDirSourcesSidecars(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(FileGPUQuery, "0, 00000000:04:00.0, 0, No, No, No\n")
	write(FileGPUQuery+".stderr", "oops\n")
	write(FileGPUQuery+".exit", "15\n")
	out, err := (DirSources{Dir: dir}).Collect(context.Background(), ProbeGPUQuery)
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != 15 || string(out.Stderr) != "oops\n" {
		t.Errorf("got exit %d, stderr %q", out.ExitCode, out.Stderr)
	}
	write(FileGPUQuery+".exit", "lost")
	if _, err := (DirSources{Dir: dir}).Collect(context.Background(), ProbeGPUQuery); err == nil || !strings.Contains(err.Error(), `"lost" is not an exit status`) {
		t.Errorf("bad exit file: err = %v", err)
	}
}

func TestExecSourcesErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nvidia-smi")
	if _, err := (ExecSources{NvidiaSMI: missing}).Collect(context.Background(), ProbeGPUQuery); !errors.Is(err, ErrToolMissing) {
		t.Errorf("missing tool: err = %v, want ErrToolMissing", err)
	}
	if _, err := (ExecSources{NvidiaSMI: "nvidia-smi"}).Collect(context.Background(), ProbeGPUQuery); err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("relative path: err = %v, want a refusal", err)
	}
	if _, err := (ExecSources{}).Collect(context.Background(), "bogus"); err == nil {
		t.Error("unknown probe accepted")
	}

	out, err := (ExecSources{NvidiaSMI: fakeTool(t, "fake-exit3")}).Collect(context.Background(), ProbeNVLink)
	if err != nil {
		t.Fatalf("non-zero exit is not a Collect error: %v", err)
	}
	if out.ExitCode != 3 || string(out.Stdout) != "partial output\n" || string(out.Stderr) != "something went wrong\n" {
		t.Errorf("exit 3: %+v", out)
	}
}

func TestExecSourcesTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (ExecSources{DCGMI: fakeTool(t, "fake-sleep")}).Collect(ctx, ProbeDCGMDiag)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the deadline", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("the killed tool held Collect for %s", elapsed)
	}
}

func TestExecSourcesOutputLimit(t *testing.T) {
	flood := fakeTool(t, "fake-flood")
	if _, err := (ExecSources{NvidiaSMI: flood}).Collect(context.Background(), ProbeNVLink); !errors.Is(err, ErrOutputTooLarge) {
		t.Errorf("nvlink flood: err = %v, want ErrOutputTooLarge", err)
	}
	out, err := (ExecSources{Dmesg: flood}).Collect(context.Background(), ProbeKernelLog)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Truncated || len(out.Stdout) != MaxOutputBytes || !bytes.HasSuffix(out.Stdout, []byte("TAIL\n")) {
		t.Errorf("kernel log flood: truncated %v, %d bytes, want the last %d bytes", out.Truncated, len(out.Stdout), MaxOutputBytes)
	}
}

func TestDirSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(FileGPUQuery, []byte("0, 00000000:04:00.0, 0, No, No, No\n"))
	big := bytes.Repeat([]byte("y"), MaxOutputBytes+10)
	copy(big, "HEAD")
	write(FileNVLink, big)
	write(FileKernelLog, big)
	src := DirSources{Dir: dir}

	out, err := src.Collect(context.Background(), ProbeGPUQuery)
	if err != nil || string(out.Stdout) != "0, 00000000:04:00.0, 0, No, No, No\n" || out.ExitCode != 0 || out.Truncated {
		t.Errorf("query: %+v, %v", out, err)
	}
	if _, err := src.Collect(context.Background(), ProbeDCGMDiag); !errors.Is(err, ErrToolMissing) {
		t.Errorf("missing file: err = %v, want ErrToolMissing", err)
	}
	if _, err := src.Collect(context.Background(), ProbeNVLink); !errors.Is(err, ErrOutputTooLarge) {
		t.Errorf("oversized nvlink file: err = %v, want ErrOutputTooLarge", err)
	}
	out, err = src.Collect(context.Background(), ProbeKernelLog)
	if err != nil || !out.Truncated || len(out.Stdout) != MaxOutputBytes || bytes.HasPrefix(out.Stdout, []byte("HEAD")) {
		t.Errorf("oversized kernel log: truncated %v, %d bytes, err %v; want the tail", out.Truncated, len(out.Stdout), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Collect(ctx, ProbeGPUQuery); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestCapWriter(t *testing.T) {
	head := &capWriter{max: 5}
	tail := &capWriter{max: 5, keepTail: true}
	for _, s := range []string{"ab", "cdefg", "hij", strings.Repeat("k", 20), "lm"} {
		for _, w := range []*capWriter{head, tail} {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", s, n, err)
			}
		}
	}
	if got := string(head.Bytes()); got != "abcde" || head.Dropped() != 27 {
		t.Errorf("head = %q, dropped %d", got, head.Dropped())
	}
	if got := string(tail.Bytes()); got != "kkklm" || tail.Dropped() != 27 {
		t.Errorf("tail = %q, dropped %d", got, tail.Dropped())
	}
}
