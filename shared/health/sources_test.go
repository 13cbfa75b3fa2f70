package health

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

func TestExecSourcesDefaultPaths(t *testing.T) {
	for p, want := range map[ProbeName]string{ProbeGPUQuery: NvidiaSMIPath, ProbeNVLink: NvidiaSMIPath, ProbeKernelLog: DmesgPath, ProbeDCGMDiag: DCGMIPath} {
		path, _, err := (ExecSources{}).command(p)
		if err != nil || path != want {
			t.Errorf("%s runs %q (%v), want %s", p, path, err, want)
		}
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
