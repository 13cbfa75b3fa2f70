package health

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// nvlinkCounter is one "Link L: <name>: <value>" line.
type nvlinkCounter struct {
	Link  int
	Name  string // as printed, e.g. "Replay Errors"
	Value string // decimal count, or a note such as "N/A"
}

// nvlinkGPU is one "GPU N: <name> (UUID: …)" block.
type nvlinkGPU struct {
	Index    int
	Name     string
	UUID     string
	Counters []nvlinkCounter
}

// nvlinkReport is the parsed output of `nvidia-smi nvlink -e`.
type nvlinkReport struct {
	GPUs []nvlinkGPU
	Lost []string // lines reporting a lost GPU
	// Problems are lines that fit neither form, quoted with their number.
	Problems []string
}

var (
	// "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)"; the UUID part is
	// optional, and a UUID never contains parentheses.
	nvlinkGPURe = regexp.MustCompile(`^GPU (\d{1,4}): (.*?)(?: \(UUID: ([^()]*)\))?$`)
	// "Link 0: Replay Errors: 0", indented by a tab and spaces.
	nvlinkCounterRe = regexp.MustCompile(`^Link (\d{1,4}): ([^:]+): (.*)$`)
)

// parseNVLink parses `nvidia-smi nvlink -e`. The documented format is one
// block per GPU:
//
//	GPU 5: NVIDIA H100 80GB HBM3 (UUID: GPU-…)
//	         Link 0: Replay Errors: 0
//	         Link 0: Recovery Errors: 0
//	         Link 0: CRC Errors: 0
//
// Drivers differ in the counter set (Hopper-era drivers split "CRC Flit
// Errors" and "CRC Data Errors" and add "ECC Errors"; Blackwell prints Rx/Tx
// and FEC counters), so every counter line is kept by name. Input above
// MaxOutputBytes is an error.
func parseNVLink(data []byte) (nvlinkReport, error) {
	var r nvlinkReport
	if len(data) > MaxOutputBytes {
		return r, errInputTooLarge
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.Contains(strings.ToLower(line), "gpu is lost") {
			r.Lost = append(r.Lost, line)
			continue
		}
		if m := nvlinkGPURe.FindStringSubmatch(line); m != nil {
			idx, _ := strconv.Atoi(m[1])
			r.GPUs = append(r.GPUs, nvlinkGPU{Index: idx, Name: m[2], UUID: m[3]})
			continue
		}
		if m := nvlinkCounterRe.FindStringSubmatch(line); m != nil && len(r.GPUs) > 0 && strings.TrimSpace(m[2]) != "" {
			link, _ := strconv.Atoi(m[1])
			g := &r.GPUs[len(r.GPUs)-1]
			g.Counters = append(g.Counters, nvlinkCounter{Link: link, Name: strings.TrimSpace(m[2]), Value: strings.TrimSpace(m[3])})
			continue
		}
		r.Problems = append(r.Problems, fmt.Sprintf("line %d: %q", n, line))
	}
	return r, nil
}

// format renders r in the tool's format (used by the fuzz round trip).
func (r nvlinkReport) format() string {
	var b strings.Builder
	for _, g := range r.GPUs {
		fmt.Fprintf(&b, "GPU %d: %s (UUID: %s)\n", g.Index, g.Name, g.UUID)
		for _, c := range g.Counters {
			fmt.Fprintf(&b, "\t Link %d: %s: %s\n", c.Link, c.Name, c.Value)
		}
	}
	return b.String()
}

// nvlinkClass is how a counter is judged.
type nvlinkClass int

const (
	nvlinkInfo     nvlinkClass = iota // traffic and FEC histograms: never a fault
	nvlinkReplay                      // FAIL at Options.NVLinkReplayFailAt, warning below
	nvlinkCRC                         // FAIL at Options.NVLinkCRCFailAt, warning below
	nvlinkRecovery                    // FAIL when non-zero
	nvlinkObserved                    // warning when non-zero
)

// classifyNVLinkCounter classifies a counter by its printed name.
//
// Replay errors ("Replay Errors") and CRC errors ("CRC Errors", and the
// "CRC Flit Errors" / "CRC Data Errors" split of newer drivers: corrupted
// flits on the link) FAIL at their Options thresholds. Recovery errors
// ("Recovery Errors", Blackwell's "Link recovery failed events": the link
// had to retrain) FAIL when non-zero. Other counters whose name says
// "Error", "discard" or "recovery" (the NVLink ECC and Data Tx/Rx
// counters, Blackwell's Rx, symbol and link-integrity counters, successful
// link recoveries) are warnings when non-zero, because NVIDIA documents no
// fault threshold for them; packet and byte counts and "FEC Errors - N"
// (codewords that forward error correction repaired) are never faults.
func classifyNVLinkCounter(name string) nvlinkClass {
	lower := strings.ToLower(name)
	switch {
	case strings.HasPrefix(lower, "fec errors"):
		return nvlinkInfo
	case lower == "replay errors":
		return nvlinkReplay
	case strings.HasPrefix(lower, "crc ") && strings.HasSuffix(lower, "errors"):
		return nvlinkCRC
	case lower == "recovery errors", lower == "link recovery failed events":
		return nvlinkRecovery
	case strings.Contains(lower, "error"), strings.Contains(lower, "discard"), strings.Contains(lower, "recovery"):
		return nvlinkObserved
	}
	return nvlinkInfo
}

// judgeNVLink judges `nvidia-smi nvlink -e` on every GPU and every link
// (see classifyNVLinkCounter). A GPU block with links but none of the
// counters classified above makes the probe INCONCLUSIVE (a counter set
// this parser does not know would otherwise pass unchecked); no links at
// all is a warning, or INCONCLUSIVE with Options.ExpectNVLink.
func judgeNVLink(out Output, opts Options) findings {
	var f findings
	r, err := parseNVLink(out.Stdout)
	if err != nil {
		f.inconclusivef("%v", err)
		return f
	}
	for _, l := range r.Lost {
		f.failf("%s", l)
	}
	for _, p := range r.Problems {
		f.inconclusivef("unexpected nvidia-smi nvlink output: %s", p)
	}
	thresholds := map[nvlinkClass]uint64{
		nvlinkReplay:   failAt(opts.NVLinkReplayFailAt),
		nvlinkCRC:      failAt(opts.NVLinkCRCFailAt),
		nvlinkRecovery: 1,
	}
	links := 0
	for _, g := range r.GPUs {
		judged := false
		linkSet := map[int]bool{}
		for _, c := range g.Counters {
			linkSet[c.Link] = true
			class := classifyNVLinkCounter(c.Name)
			if class != nvlinkInfo {
				judged = true
			}
			if class == nvlinkInfo || notAvailable(c.Value) || c.Value == "Not Supported" {
				continue
			}
			v, err := strconv.ParseUint(c.Value, 10, 64)
			if err != nil {
				f.inconclusivef("GPU %d link %d: %s = %q is not a count", g.Index, c.Link, c.Name, c.Value)
				continue
			}
			if v == 0 {
				continue
			}
			where := fmt.Sprintf("GPU %d link %d: %s = %d", g.Index, c.Link, c.Name, v)
			limit, judgedByLimit := thresholds[class]
			switch {
			case judgedByLimit && v >= limit:
				f.failf("%s", where)
			case judgedByLimit:
				f.warnf("%s (below the failure threshold of %d)", where, limit)
			default:
				f.warnf("%s", where)
			}
		}
		links += len(linkSet)
		if len(g.Counters) > 0 && !judged {
			f.inconclusivef("GPU %d: none of the NVLink error counters this check knows were printed", g.Index)
		}
	}
	if links == 0 && len(r.Lost) == 0 {
		if opts.ExpectNVLink {
			f.inconclusivef("nvidia-smi nvlink -e reported no NVLink counters, but this pool's GPUs are NVLink-connected")
		} else {
			f.warnf("nvidia-smi nvlink -e reported no NVLink counters (GPUs without NVLink?)")
		}
	}
	return f
}
