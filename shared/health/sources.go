package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxOutputBytes bounds what is read from one tool (or one recorded file):
// 4 MiB. The expected sizes are far below it: the GPU query prints under
// 100 bytes per GPU; `nvidia-smi nvlink -e` on 8 GPUs × 18 links with the
// Blackwell counter set (≈40 counters per link) is about 250 KiB; a level-1
// `dcgmi diag` JSON document is under 100 KiB. The kernel ring buffer is
// 128 KiB–1 MiB on common kernels (CONFIG_LOG_BUF_SHIFT 17–20) but can be
// raised to 32 MiB with log_buf_len=, so for the kernel log only the most
// recent MaxOutputBytes are kept (Output.Truncated is set and a warning is
// reported); for every other tool, more output than this is an error
// (ErrOutputTooLarge) and the probe is INCONCLUSIVE.
const MaxOutputBytes = 4 << 20

// maxStderrBytes bounds the captured standard error of a tool, which is
// only quoted in evidence.
const maxStderrBytes = 16 << 10

// The tools the real Sources run, by name.
const (
	ToolNvidiaSMI  = "nvidia-smi"
	ToolDCGMI      = "dcgmi"
	ToolDmesg      = "dmesg"
	ToolJournalctl = "journalctl"
	// ToolAllReducePerf is NCCL's all-reduce test (nccl-tests,
	// https://github.com/NVIDIA/nccl-tests).
	ToolAllReducePerf = "all_reduce_perf"
)

// DefaultSearchPath is where ExecSources looks for a tool that is not
// configured, after ExecSources.SearchPath: the system directories, then
// where NVIDIA's container and Container-Optimized OS driver installers put
// nvidia-smi.
var DefaultSearchPath = []string{
	"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
	"/usr/local/nvidia/bin", "/var/lib/nvidia/bin",
}

// Recorded-output file names read by DirSources, one per probe.
const (
	FileGPUQuery  = "nvidia-smi-query.csv"
	FileNVLink    = "nvidia-smi-nvlink-e.txt"
	FileKernelLog = "dmesg.txt"
	FileDCGMDiag  = "dcgmi-diag.json"
	FileNCCL      = "all-reduce-perf.txt"
)

// GPUQueryFields is the --query-gpu field list, in the column order the
// parser expects.
const GPUQueryFields = "index,pci.bus_id,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure"

// ErrToolMissing marks a tool that is not installed (or a recorded file that
// is absent). The probe that needed it is INCONCLUSIVE, never FAIL.
var ErrToolMissing = errors.New("tool missing")

// ErrOutputTooLarge marks output above MaxOutputBytes from a tool whose
// output cannot be judged in part.
var ErrOutputTooLarge = errors.New("output too large")

// Output is what one tool printed.
type Output struct {
	Stdout []byte // at most MaxOutputBytes
	Stderr []byte // at most 16 KiB; nil for recorded files
	// ExitCode is the tool's exit status: 0 on success and for recorded
	// files. A non-zero status is not an error of Collect: the probe judges
	// the output (nvidia-smi prints "GPU is lost" and exits non-zero, dcgmi
	// exits non-zero when a test fails).
	ExitCode int
	// Truncated is set when only the last MaxOutputBytes of the kernel log
	// were kept.
	Truncated bool
}

// Sources supplies the raw output each probe judges.
//
// Collect returns the output of the tool behind probe p. It must return
// promptly once ctx is done (Check stops waiting at the probe's deadline
// either way, but a Source that ignores ctx leaks its goroutine until it
// returns). Errors: one wrapping ErrToolMissing when the tool (or recorded
// file) is absent, ErrOutputTooLarge when the output is above
// MaxOutputBytes, ctx.Err() on timeout or cancellation; any error makes the
// probe INCONCLUSIVE.
type Sources interface {
	Collect(ctx context.Context, p ProbeName) (Output, error)
}

// ExecSources runs the real tools with exec.CommandContext argument lists
// (never a shell), a fixed environment (PATH of the system directories,
// LC_ALL=C) and bounded output capture.
//
// Each tool is the configured absolute path when set (NvidiaSMI, DCGMI,
// Dmesg, Journalctl), else the first executable of that name in
// SearchPath, then DefaultSearchPath; relative directories are skipped, so
// a "." in PATH cannot choose the program. A tool found nowhere is
// ErrToolMissing, naming where it was looked for.
//
// The kernel log is read by running `dmesg` or, when there is none,
// `journalctl --dmesg` (the current boot's kernel messages), rather than
// reading /dev/kmsg: both need the same privilege (CAP_SYSLOG when
// kernel.dmesg_restrict=1; the Slurm prolog, epilog and HealthCheckProgram
// run as root), but dmesg prints exactly the text format of the recorded
// dmesg.txt (journalctl's lines carry the same "NVRM: …" messages after a
// prefix, which the parser skips), so one parser serves every mode and is
// covered by the golden files, and exec.CommandContext gives the probe its
// deadline without the non-blocking, Linux-only file descriptor handling
// /dev/kmsg needs.
type ExecSources struct {
	NvidiaSMI  string // nvidia-smi, absolute; looked up when empty
	DCGMI      string // dcgmi, absolute; looked up when empty
	Dmesg      string // dmesg, absolute; looked up when empty (and Journalctl is empty)
	Journalctl string // journalctl, absolute: the kernel log when no dmesg is configured or found
	// AllReducePerf is all_reduce_perf, absolute; looked up when empty.
	AllReducePerf string
	// DCGMLevel is the level dcgmi diag runs at (-r), 1 when 0.
	DCGMLevel int
	// GPUs is how many GPUs all_reduce_perf runs across (-g), 1 when 0.
	GPUs int
	// SearchPath lists the directories searched before
	// DefaultSearchPath (`flexslurm health check` passes $PATH).
	SearchPath []string
}

// journalctlArgs prints the current boot's kernel messages ("-k, --dmesg
// … implies -b"), in dmesg's monotonic-timestamp format, without a pager.
var journalctlArgs = []string{"--dmesg", "--no-pager", "--quiet", "--output=short-monotonic"}

// command returns the program and arguments for probe p.
func (s ExecSources) command(p ProbeName) (string, []string, error) {
	switch p {
	case ProbeGPUQuery:
		path, err := s.tool(s.NvidiaSMI, ToolNvidiaSMI)
		return path, []string{"--query-gpu=" + GPUQueryFields, "--format=csv,noheader"}, err
	case ProbeNVLink:
		path, err := s.tool(s.NvidiaSMI, ToolNvidiaSMI)
		return path, []string{"nvlink", "-e"}, err
	case ProbeKernelLog:
		switch {
		case s.Dmesg != "":
			path, err := s.tool(s.Dmesg, ToolDmesg)
			return path, nil, err
		case s.Journalctl != "":
			path, err := s.tool(s.Journalctl, ToolJournalctl)
			return path, journalctlArgs, err
		}
		if path, err := s.tool("", ToolDmesg); err == nil {
			return path, nil, nil
		}
		path, err := s.tool("", ToolJournalctl)
		if errors.Is(err, ErrToolMissing) {
			return "", nil, fmt.Errorf("%w: neither %s nor %s in %s", ErrToolMissing, ToolDmesg, ToolJournalctl, strings.Join(s.searchPath(), ":"))
		}
		return path, journalctlArgs, err
	case ProbeDCGMDiag:
		path, err := s.tool(s.DCGMI, ToolDCGMI)
		return path, []string{"diag", "-r", strconv.Itoa(max(s.DCGMLevel, 1)), "-j"}, err
	case ProbeNCCL:
		path, err := s.tool(s.AllReducePerf, ToolAllReducePerf)
		return path, ncclArgs(max(s.GPUs, 1)), err
	}
	return "", nil, fmt.Errorf("unknown probe %q", p)
}

// searchPath is SearchPath then DefaultSearchPath, absolute directories
// only, each once.
func (s ExecSources) searchPath() []string {
	var dirs []string
	for _, d := range slices.Concat(s.SearchPath, DefaultSearchPath) {
		if d = filepath.Clean(d); filepath.IsAbs(d) && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// tool returns the configured path of a tool, which must be absolute and
// exist, or else the first executable regular file called name in the
// search path.
func (s ExecSources) tool(configured, name string) (string, error) {
	if configured != "" {
		if !filepath.IsAbs(configured) {
			return "", fmt.Errorf("tool path %q is not absolute", configured)
		}
		if _, err := os.Stat(configured); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("%w: %s", ErrToolMissing, configured)
			}
			return "", fmt.Errorf("checking %s: %w", configured, err)
		}
		return configured, nil
	}
	dirs := s.searchPath()
	for _, d := range dirs {
		path := filepath.Join(d, name)
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: %s not found in %s", ErrToolMissing, name, strings.Join(dirs, ":"))
}

// toolEnv is the whole environment the tools run with.
var toolEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}

// Collect runs the tool behind p and returns its bounded output.
func (s ExecSources) Collect(ctx context.Context, p ProbeName) (Output, error) {
	path, args, err := s.command(p)
	if err != nil {
		return Output{}, err
	}
	stdout := &capWriter{max: MaxOutputBytes, keepTail: p == ProbeKernelLog}
	stderr := &capWriter{max: maxStderrBytes}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = toolEnv
	cmd.Dir = "/"
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// A killed tool whose children still hold its stdout open would
	// otherwise keep Wait blocked past the deadline.
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return Output{}, ctx.Err()
	}
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Truncated: stdout.Dropped() > 0}
	if stdout.Dropped() > 0 && !stdout.keepTail {
		return Output{}, fmt.Errorf("%w: %s printed more than %d bytes", ErrOutputTooLarge, path, MaxOutputBytes)
	}
	if runErr != nil {
		var exitErr *exec.ExitError
		if errors.As(runErr, &exitErr) && exitErr.Exited() {
			out.ExitCode = exitErr.ExitCode()
			return out, nil
		}
		if errors.Is(runErr, fs.ErrNotExist) {
			return Output{}, fmt.Errorf("%w: %s", ErrToolMissing, path)
		}
		return Output{}, fmt.Errorf("running %s: %w", path, runErr)
	}
	return out, nil
}

// capWriter keeps at most max bytes: the first max bytes, or with keepTail
// the last max bytes. It never fails, so a chatty tool is not killed by a
// write error; Dropped reports how much was discarded.
type capWriter struct {
	max      int
	keepTail bool
	buf      []byte
	total    int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if !w.keepTail {
		if room := w.max - len(w.buf); room > 0 {
			w.buf = append(w.buf, p[:min(room, len(p))]...)
		}
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	// Compact only when twice the limit is held, so that many small writes
	// cost amortised O(1) each.
	if len(w.buf) > 2*w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

// Bytes returns the kept bytes.
func (w *capWriter) Bytes() []byte {
	if len(w.buf) > w.max {
		return w.buf[len(w.buf)-w.max:]
	}
	return w.buf
}

// Dropped reports the number of bytes written but not kept.
func (w *capWriter) Dropped() int64 { return w.total - int64(len(w.Bytes())) }

// DirSources reads recorded tool output from a directory, one file per probe
// (FileGPUQuery, FileNVLink, FileKernelLog, FileDCGMDiag). A missing file
// means the tool is missing. Beside a file, NAME.stderr holds what the tool
// printed on standard error and NAME.exit its exit status (a decimal
// number); without them Stderr is empty and ExitCode 0.
type DirSources struct {
	Dir string
}

// fileFor returns the recorded-output file of probe p.
func fileFor(p ProbeName) (string, error) {
	switch p {
	case ProbeGPUQuery:
		return FileGPUQuery, nil
	case ProbeNVLink:
		return FileNVLink, nil
	case ProbeKernelLog:
		return FileKernelLog, nil
	case ProbeDCGMDiag:
		return FileDCGMDiag, nil
	case ProbeNCCL:
		return FileNCCL, nil
	}
	return "", fmt.Errorf("unknown probe %q", p)
}

// Collect reads the recorded output of p.
func (s DirSources) Collect(ctx context.Context, p ProbeName) (Output, error) {
	name, err := fileFor(p)
	if err != nil {
		return Output{}, err
	}
	if err := ctx.Err(); err != nil {
		return Output{}, err
	}
	path := filepath.Join(s.Dir, name)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Output{}, fmt.Errorf("%w: %s was not recorded", ErrToolMissing, name)
		}
		return Output{}, err
	}
	defer f.Close()
	w := &capWriter{max: MaxOutputBytes, keepTail: p == ProbeKernelLog}
	if _, err := io.Copy(w, f); err != nil {
		return Output{}, fmt.Errorf("reading %s: %w", path, err)
	}
	if w.Dropped() > 0 && !w.keepTail {
		return Output{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrOutputTooLarge, path, MaxOutputBytes)
	}
	out := Output{Stdout: bytes.Clone(w.Bytes()), Truncated: w.Dropped() > 0}
	if out.Stderr, err = readSidecar(path+".stderr", maxStderrBytes); err != nil {
		return Output{}, err
	}
	code, err := readSidecar(path+".exit", 16)
	if err != nil {
		return Output{}, err
	}
	if code != nil {
		if out.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(code))); err != nil || out.ExitCode < 0 || out.ExitCode > 255 {
			return Output{}, fmt.Errorf("%s.exit: %q is not an exit status (0-255)", path, strings.TrimSpace(string(code)))
		}
	}
	return out, nil
}

// readSidecar reads at most max bytes of an optional file: nil when it is
// absent.
func readSidecar(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}
