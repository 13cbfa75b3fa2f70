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

// Absolute paths of the tools the real Sources run. Slurm runs its hooks
// with no PATH, and a PATH lookup would let whoever controls PATH choose the
// program, so nothing is looked up.
const (
	NvidiaSMIPath = "/usr/bin/nvidia-smi"
	DCGMIPath     = "/usr/bin/dcgmi"
	DmesgPath     = "/usr/bin/dmesg"
)

// Recorded-output file names read by DirSources, one per probe.
const (
	FileGPUQuery  = "nvidia-smi-query.csv"
	FileNVLink    = "nvidia-smi-nvlink-e.txt"
	FileKernelLog = "dmesg.txt"
	FileDCGMDiag  = "dcgmi-diag.json"
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

// ExecSources runs the real tools by absolute path with exec.CommandContext
// argument lists (never a shell), a fixed environment (PATH of the system
// directories, LC_ALL=C) and bounded output capture. The zero value runs
// NvidiaSMIPath, DCGMIPath and DmesgPath.
//
// The kernel log is read by running `dmesg` rather than reading /dev/kmsg:
// both need the same privilege (CAP_SYSLOG when kernel.dmesg_restrict=1; the
// Slurm prolog, epilog and HealthCheckProgram run as root), but dmesg prints
// exactly the text format of the recorded dmesg.txt, so one parser serves
// both modes and is covered by the golden files, and exec.CommandContext
// gives the probe its deadline without the non-blocking, Linux-only file
// descriptor handling /dev/kmsg needs (a blocking read there waits for the
// next kernel message).
type ExecSources struct {
	NvidiaSMI string // default NvidiaSMIPath
	DCGMI     string // default DCGMIPath
	Dmesg     string // default DmesgPath
}

// command returns the program and arguments for probe p.
func (s ExecSources) command(p ProbeName) (string, []string, error) {
	pick := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	switch p {
	case ProbeGPUQuery:
		return pick(s.NvidiaSMI, NvidiaSMIPath), []string{"--query-gpu=" + GPUQueryFields, "--format=csv,noheader"}, nil
	case ProbeNVLink:
		return pick(s.NvidiaSMI, NvidiaSMIPath), []string{"nvlink", "-e"}, nil
	case ProbeKernelLog:
		return pick(s.Dmesg, DmesgPath), nil, nil
	case ProbeDCGMDiag:
		return pick(s.DCGMI, DCGMIPath), []string{"diag", "-r", "1", "-j"}, nil
	}
	return "", nil, fmt.Errorf("unknown probe %q", p)
}

// toolEnv is the whole environment the tools run with.
var toolEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}

// Collect runs the tool behind p and returns its bounded output.
func (s ExecSources) Collect(ctx context.Context, p ProbeName) (Output, error) {
	path, args, err := s.command(p)
	if err != nil {
		return Output{}, err
	}
	if !filepath.IsAbs(path) {
		return Output{}, fmt.Errorf("tool path %q is not absolute", path)
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Output{}, fmt.Errorf("%w: %s", ErrToolMissing, path)
		}
		return Output{}, fmt.Errorf("checking %s: %w", path, err)
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
// means the tool is missing. Every file is read with ExitCode 0.
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
	return Output{Stdout: bytes.Clone(w.Bytes()), Truncated: w.Dropped() > 0}, nil
}
