package health

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// errInputTooLarge is returned by every parser for input above
// MaxOutputBytes.
var errInputTooLarge = fmt.Errorf("input is larger than %d bytes", MaxOutputBytes)

// gpuRow is one line of the GPU query: the fields of GPUQueryFields, as
// printed. Flag fields are "Yes", "No" or a bracketed note such as "[N/A]"
// or "[Not Supported]".
type gpuRow struct {
	Index          int
	BusID          string
	UncorrectedECC string // decimal count or bracketed note
	RetiredPending string
	RemapPending   string
	RemapFailure   string
}

// unreachableGPU is a GPU nvidia-smi could not get a device handle for:
// "Unable to determine the device handle for GPU0000:8A:00.0: Unknown
// Error".
type unreachableGPU struct {
	GPU    string // the PCI address (or index) as printed, "" when absent
	Reason string // NVML's error string, e.g. "Unknown Error", "GPU is lost. ..."
}

// gpuQuery is the parsed output of the GPU query.
type gpuQuery struct {
	Rows []gpuRow
	// Unreachable are the GPUs nvidia-smi could not get a handle for
	// because of a fault; HandleDenied those it could not get one for
	// because of the node's configuration (permissions, an unsupported
	// operation).
	Unreachable  []unreachableGPU
	HandleDenied []unreachableGPU
	Lost         []string // other lines reporting a lost GPU ("... GPU is lost ...")
	NoDevices    bool     // "No devices were found"
	// Problems are lines that are neither rows nor known messages, and rows
	// with malformed fields, quoted with their line number.
	Problems []string
	// BadField is set when nvidia-smi rejected a field name of the query
	// ("Field "x" is not a valid field to query."), i.e. this driver's
	// nvidia-smi cannot answer the query at all.
	BadField string
}

// notAvailable reports whether v is one of nvidia-smi's bracketed notes
// ("[N/A]", "[Not Supported]", "[Unknown Error]", …) or a bare "N/A".
func notAvailable(v string) bool {
	return v == "N/A" || (len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']')
}

// parseGPUQuery parses `nvidia-smi --query-gpu=<GPUQueryFields>
// --format=csv,noheader`: one line per GPU, fields separated by ", ".
// Input above MaxOutputBytes is an error.
func parseGPUQuery(data []byte) (gpuQuery, error) {
	var q gpuQuery
	if len(data) > MaxOutputBytes {
		return q, errInputTooLarge
	}
	n := 0
	var pending *unreachableGPU // a handle message whose reason is on the next line
	for line := range strings.Lines(string(data)) {
		n++
		line = strings.TrimSpace(line)
		if line == "" || q.note(line, &pending) {
			continue
		}
		if strings.HasPrefix(line, `Field "`) && strings.Contains(line, "is not a valid field to query") {
			q.BadField = line
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) != 6 {
			q.Problems = append(q.Problems, fmt.Sprintf("line %d: %q", n, line))
			continue
		}
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		row, err := parseGPURow(fields)
		if err != nil {
			q.Problems = append(q.Problems, fmt.Sprintf("line %d: %v: %q", n, err, line))
			continue
		}
		q.Rows = append(q.Rows, row)
	}
	if pending != nil {
		q.addHandleFailure(*pending)
	}
	return q, nil
}

// handleRe matches nvidia-smi's message for a GPU whose NVML device handle
// it cannot get (nvmlDeviceGetHandleByIndex failed), as printed by drivers
// from 2014 to today, with or without a space before the address, or with
// a GPU index instead:
//
//	Unable to determine the device handle for GPU0000:8A:00.0: Unknown Error
//	Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU
//	Unable to determine the device handle for GPU2: Unknown Error
//
// (reported in NVIDIA/open-gpu-kernel-modules#387, NVIDIA/nvidia-docker#1553,
// NVIDIA/dcgm-exporter#604). The reason is NVML's error string
// (nvmlErrorString); some versions print it on the next line.
var handleRe = regexp.MustCompile(`(?i)unable to (?:determine|detect) the device handle for GPU\s*([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?|\d{1,4})?\s*:?\s*(.*)$`)

// parseHandleFailure recognises a handle message.
func parseHandleFailure(line string) (unreachableGPU, bool) {
	m := handleRe.FindStringSubmatch(line)
	if m == nil {
		return unreachableGPU{}, false
	}
	return unreachableGPU{GPU: m[1], Reason: strings.TrimSpace(m[2])}, true
}

// addHandleFailure files u as a fault or, when NVML refused for a reason
// of the node's configuration (NVML_ERROR_NO_PERMISSION "Insufficient
// Permissions", NVML_ERROR_NOT_SUPPORTED "Not Supported"), as a
// configuration problem.
func (q *gpuQuery) addHandleFailure(u unreachableGPU) {
	r := strings.ToLower(u.Reason)
	if strings.Contains(r, "permission") || strings.Contains(r, "not supported") {
		q.HandleDenied = append(q.HandleDenied, u)
		return
	}
	q.Unreachable = append(q.Unreachable, u)
}

// note records line when it is one of the messages nvidia-smi prints
// instead of (or besides) GPU rows, on stdout or stderr — a handle
// failure, a lost GPU, "No devices were found" — or the reason of a handle
// failure printed on the line before (*pending). It reports whether line
// was consumed.
func (q *gpuQuery) note(line string, pending **unreachableGPU) bool {
	if p := *pending; p != nil {
		*pending = nil
		if _, isHandle := parseHandleFailure(line); !isHandle && !strings.Contains(line, ",") {
			p.Reason = line
			q.addHandleFailure(*p)
			return true
		}
		q.addHandleFailure(*p)
	}
	if u, ok := parseHandleFailure(line); ok {
		if u.Reason == "" {
			*pending = &u
		} else {
			q.addHandleFailure(u)
		}
		return true
	}
	switch {
	case strings.Contains(strings.ToLower(line), "gpu is lost"):
		q.Lost = append(q.Lost, line)
	case strings.Contains(line, "No devices were found"):
		q.NoDevices = true
	default:
		return false
	}
	return true
}

// scanStderr adds to q the messages of the tool's standard error (see
// note). Other lines are not judged: runProbe quotes the first one when
// the tool fails.
func (q *gpuQuery) scanStderr(stderr []byte) {
	var pending *unreachableGPU
	for line := range strings.Lines(string(stderr)) {
		if line = strings.TrimSpace(line); line != "" {
			q.note(line, &pending)
		}
	}
	if pending != nil {
		q.addHandleFailure(*pending)
	}
}

// nvidiaSMIGPUIsLost is nvidia-smi's exit status for NVML_ERROR_GPU_IS_LOST
// ("The GPU has fallen off the bus or has otherwise become inaccessible"):
// nvidia-smi exits with the NVML return code of the failure (nvmlReturn_t
// in nvml.h; NVIDIA's GPU Operator troubleshooting guide, "infoROM is
// corrupted (nvidia-smi return code 14)").
const nvidiaSMIGPUIsLost = 15

func parseGPURow(f []string) (gpuRow, error) {
	idx, err := strconv.Atoi(f[0])
	if err != nil || idx < 0 {
		return gpuRow{}, fmt.Errorf("index %q is not a GPU index", f[0])
	}
	if f[1] == "" {
		return gpuRow{}, errors.New("empty pci.bus_id")
	}
	if !notAvailable(f[2]) {
		if _, err := strconv.ParseUint(f[2], 10, 64); err != nil {
			return gpuRow{}, fmt.Errorf("ecc.errors.uncorrected.volatile.total %q is not a count", f[2])
		}
	}
	for i, name := range []string{"retired_pages.pending", "remapped_rows.pending", "remapped_rows.failure"} {
		if v := f[3+i]; v != "Yes" && v != "No" && !notAvailable(v) {
			return gpuRow{}, fmt.Errorf("%s %q is not Yes, No or a bracketed note", name, v)
		}
	}
	return gpuRow{Index: idx, BusID: f[1], UncorrectedECC: f[2], RetiredPending: f[3], RemapPending: f[4], RemapFailure: f[5]}, nil
}

// format renders q's rows in the tool's format (used by the fuzz round trip).
func (q gpuQuery) format() string {
	var b strings.Builder
	for _, r := range q.Rows {
		fmt.Fprintf(&b, "%d, %s, %s, %s, %s, %s\n", r.Index, r.BusID, r.UncorrectedECC, r.RetiredPending, r.RemapPending, r.RemapFailure)
	}
	return b.String()
}

// judgeGPUQuery judges the GPU query:
//   - FAIL: an uncorrectable volatile ECC count above 0; retired_pages.pending
//     "Yes"; remapped_rows.failure "Yes"; a GPU the driver can no longer
//     reach — nvidia-smi cannot get its device handle ("Unable to determine
//     the device handle for GPU…: Unknown Error", "…: GPU is lost"), prints
//     "GPU is lost", exits with NVML_ERROR_GPU_IS_LOST (15), or finds no
//     device at all ("No devices were found") — on stdout or stderr; fewer
//     GPUs than opts.AcceleratorCount.
//   - warning: remapped_rows.pending "Yes". NVIDIA's GPU memory error
//     management guide ("Error Recovery and Response Flags") says that with
//     the row-remapping pending flag set "unaffected applications can
//     continue running without affecting accuracy and performance, and new
//     workloads can be launched", and NVML's nvmlDeviceGetRemappedRows says
//     "a pending remapping won't affect future work on the GPU since
//     error-containment and dynamic page blacklisting will take care of
//     that"; the uncorrectable error that caused it FAILs through the ECC
//     count while it is current. Pending page retirement (pre-Ampere GPUs,
//     which have no error containment) stays a FAIL: the retired page is
//     only taken out of use when the driver reloads.
//   - warning: bracketed fields ([N/A], [Not Supported]); more GPUs than
//     expected.
//   - INCONCLUSIVE: unparseable lines, a rejected query field, a handle
//     refused for lack of permission or support, no GPU rows without a
//     message saying why (nvidia-smi that cannot talk to the driver, an
//     empty output).
func judgeGPUQuery(out Output, opts Options) findings {
	var f findings
	q, err := parseGPUQuery(out.Stdout)
	if err != nil {
		f.inconclusivef("%v", err)
		return f
	}
	q.scanStderr(out.Stderr)
	for _, u := range q.Unreachable {
		f.failf("%s: the driver can no longer reach it: nvidia-smi cannot get its device handle (%s)", u.name(), u.Reason)
	}
	for _, u := range q.HandleDenied {
		f.inconclusivef("%s: nvidia-smi may not get its device handle (%s): a configuration problem, not a fault (the check runs as root from the Slurm hooks)", u.name(), u.Reason)
	}
	for _, l := range q.Lost {
		f.failf("%s", l)
	}
	if out.ExitCode == nvidiaSMIGPUIsLost && len(q.Unreachable) == 0 && len(q.Lost) == 0 {
		f.failf("nvidia-smi exited with status %d (NVML_ERROR_GPU_IS_LOST): a GPU has fallen off the bus or become inaccessible%s", out.ExitCode, quoteFirstLine(out.Stderr))
	}
	if q.NoDevices && opts.AcceleratorCount <= 0 {
		f.failf("nvidia-smi found no GPU (\"No devices were found\"): the driver reaches none of the node's GPUs")
	}
	if q.BadField != "" {
		f.inconclusivef("nvidia-smi cannot run the query: %s", q.BadField)
		return f
	}
	// notAvail collects the GPUs of each "field=[note]" so that one warning
	// covers all GPUs with the same note.
	notAvail := map[string][]int{}
	noteNA := func(field, value string, gpu int) bool {
		if !notAvailable(value) {
			return false
		}
		k := field + "=" + value
		notAvail[k] = append(notAvail[k], gpu)
		return true
	}
	for _, r := range q.Rows {
		gpu := fmt.Sprintf("GPU %d (%s)", r.Index, r.BusID)
		if !noteNA("ecc.errors.uncorrected.volatile.total", r.UncorrectedECC, r.Index) {
			if n, _ := strconv.ParseUint(r.UncorrectedECC, 10, 64); n > 0 {
				f.failf("%s: %d uncorrectable ECC errors since the driver loaded (ecc.errors.uncorrected.volatile.total)", gpu, n)
			}
		}
		noteNA("retired_pages.pending", r.RetiredPending, r.Index)
		noteNA("remapped_rows.pending", r.RemapPending, r.Index)
		noteNA("remapped_rows.failure", r.RemapFailure, r.Index)
		if r.RetiredPending == "Yes" {
			f.failf("%s: memory pages are pending retirement (retired_pages.pending=Yes); they stay in use until the driver reloads", gpu)
		}
		if r.RemapFailure == "Yes" {
			f.failf("%s: a row remapping has failed (remapped_rows.failure=Yes); NVIDIA's RMA policy for row remapping applies", gpu)
		}
		if r.RemapPending == "Yes" {
			f.warnf("%s: rows are pending remapping (remapped_rows.pending=Yes); new work can run, a GPU reset applies the remap", gpu)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(notAvail)) {
		f.warnf("%s on %s: not available, not a fault", key, gpuList(notAvail[key]))
	}
	for _, p := range q.Problems {
		f.inconclusivef("unexpected nvidia-smi output: %s", p)
	}
	unusable := len(q.Lost) + len(q.Unreachable) + len(q.HandleDenied)
	if want := opts.AcceleratorCount; want > 0 {
		switch rows := len(q.Rows); {
		case rows >= want:
			if found := rows + unusable; found > want {
				f.warnf("nvidia-smi lists %d GPUs, more than the %d the pool expects (accelerator_count)", found, want)
			}
		case rows+len(q.Problems)+len(q.HandleDenied) < want && (rows > 0 || q.NoDevices || unusable > 0 || out.ExitCode == nvidiaSMIGPUIsLost):
			// Unparseable lines and handles refused for permission might
			// be the missing GPUs, so they are counted before declaring
			// any missing.
			f.failf("nvidia-smi lists %d usable GPUs, the pool expects %d (accelerator_count): %d missing", rows, want, want-rows)
		case rows == 0 && len(q.Problems) == 0 && len(q.HandleDenied) == 0:
			f.inconclusivef("nvidia-smi printed no GPU rows; the pool expects %d GPUs", want)
		}
	} else if len(q.Rows) == 0 && unusable == 0 && !q.NoDevices && out.ExitCode != nvidiaSMIGPUIsLost {
		f.inconclusivef("nvidia-smi lists no GPUs")
	}
	return f
}

// name names an unreachable GPU for evidence: "GPU 0000:8A:00.0", "GPU 2"
// or "a GPU".
func (u unreachableGPU) name() string {
	if u.GPU == "" {
		return "a GPU"
	}
	return "GPU " + u.GPU
}

// gpuList names GPUs by index: "GPU 2" or "GPUs 0,1,7".
func gpuList(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	if len(s) == 1 {
		return "GPU " + s[0]
	}
	return "GPUs " + strings.Join(s, ",")
}
