package health

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// ncclArgs runs NCCL's all-reduce over gpus GPUs of this node from 8 MiB to
// 1 GiB, doubling, with data checking on (-c 1): nccl-tests' own flags
// (https://github.com/NVIDIA/nccl-tests, README "Arguments").
func ncclArgs(gpus int) []string {
	return []string{"-b", "8M", "-e", "1G", "-f", "2", "-g", strconv.Itoa(gpus), "-c", "1"}
}

// ncclRow is one message size of all_reduce_perf's table: its out-of-place
// and in-place bus bandwidth (GB/s) and wrong-value counts (-1: "N/A",
// printed when data checking is off).
type ncclRow struct {
	size                  string
	outBusBW, inBusBW     float64
	outWrong, inWrong     int64
	outChecked, inChecked bool
}

// ncclReport is all_reduce_perf's output: its table and its trailer lines
// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth : X".
type ncclReport struct {
	rows        []ncclRow
	outOfBounds int64
	oobSeen     bool
	avgBusBW    float64
	avgSeen     bool
	// errors are the lines that report an NCCL or CUDA failure.
	errors []string
}

// parseNCCL reads all_reduce_perf's table. A data row ends with the
// out-of-place columns time, algbw, busbw, #wrong and the in-place ones
// (the columns before them differ between nccl-tests versions: some print
// a root column), so it is read from its end.
func parseNCCL(data []byte) ncclReport {
	var rep ncclReport
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxOutputBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			body := strings.TrimSpace(strings.TrimPrefix(line, "#"))
			if k, v, ok := strings.Cut(body, ":"); ok {
				switch strings.TrimSpace(k) {
				case "Out of bounds values":
					f := strings.Fields(v)
					if len(f) > 0 {
						if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
							rep.outOfBounds, rep.oobSeen = n, true
						}
					}
				case "Avg bus bandwidth":
					if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						rep.avgBusBW, rep.avgSeen = x, true
					}
				}
			}
		default:
			if row, ok := parseNCCLRow(line); ok {
				rep.rows = append(rep.rows, row)
			} else if l := strings.ToLower(line); strings.Contains(l, "failure") || strings.Contains(l, "error") {
				rep.errors = append(rep.errors, line)
			}
		}
	}
	return rep
}

func parseNCCLRow(line string) (ncclRow, bool) {
	f := strings.Fields(line)
	if len(f) < 12 {
		return ncclRow{}, false
	}
	if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
		return ncclRow{}, false
	}
	n := len(f)
	wrong := func(s string) (int64, bool, bool) {
		if s == "N/A" {
			return -1, false, true
		}
		v, err := strconv.ParseInt(s, 10, 64)
		return v, true, err == nil
	}
	outBW, err1 := strconv.ParseFloat(f[n-6], 64)
	inBW, err2 := strconv.ParseFloat(f[n-2], 64)
	outW, outC, ok1 := wrong(f[n-5])
	inW, inC, ok2 := wrong(f[n-1])
	if err1 != nil || err2 != nil || !ok1 || !ok2 {
		return ncclRow{}, false
	}
	return ncclRow{size: f[0], outBusBW: outBW, inBusBW: inBW, outWrong: outW, inWrong: inW, outChecked: outC, inChecked: inC}, true
}

// judgeNCCL: wrong values or out-of-bounds values are data the GPUs (or
// the links between them) corrupted: FAIL. An average bus bandwidth below
// Options.NCCLMinBusBandwidth FAILs too: the links are degraded. No table,
// a run without data checking, or NCCL's own error lines are
// INCONCLUSIVE.
func judgeNCCL(out Output, opts Options) findings {
	var f findings
	rep := parseNCCL(out.Stdout)
	for _, e := range rep.errors {
		f.inconclusivef("all_reduce_perf: %s", e)
	}
	if len(rep.rows) == 0 {
		if len(rep.errors) == 0 {
			f.inconclusivef("all_reduce_perf printed no result table")
		}
		return f
	}
	unchecked := 0
	for _, r := range rep.rows {
		if !r.outChecked || !r.inChecked {
			unchecked++
		}
		if r.outWrong > 0 || r.inWrong > 0 {
			f.failf("all-reduce of %s bytes: %d wrong values out of place, %d in place: data corrupted between the GPUs", r.size, max(r.outWrong, 0), max(r.inWrong, 0))
		}
	}
	if unchecked > 0 {
		f.inconclusivef("%d of %d message sizes were not checked for wrong values (#wrong N/A): run all_reduce_perf with -c 1", unchecked, len(rep.rows))
	}
	if rep.oobSeen && rep.outOfBounds > 0 {
		f.failf("%d out-of-bounds values", rep.outOfBounds)
	}
	switch {
	case !rep.avgSeen:
		f.inconclusivef("all_reduce_perf printed no average bus bandwidth")
	case opts.NCCLMinBusBandwidth > 0 && rep.avgBusBW < opts.NCCLMinBusBandwidth:
		f.failf("average bus bandwidth %.2f GB/s, below the minimum of %.2f GB/s: degraded links between the GPUs", rep.avgBusBW, opts.NCCLMinBusBandwidth)
	case opts.NCCLMinBusBandwidth == 0:
		f.warnf("average bus bandwidth %.2f GB/s (no minimum set)", rep.avgBusBW)
	}
	return f
}
