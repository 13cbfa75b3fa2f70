package health

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/text"
)

// kernelEventKind says what a kernel log line reported.
type kernelEventKind int

const (
	eventXid       kernelEventKind = iota // an NVRM Xid line
	eventOffTheBus                        // a non-Xid NVRM line: "GPU ... has fallen off the bus"
	eventGPULost                          // a non-Xid NVRM line: "GPU is lost"
)

// kernelEvent is one NVRM line of interest.
type kernelEvent struct {
	Kind    kernelEventKind
	Xid     int    // eventXid only
	PCI     string // "0000:3b:00" as printed, "" when the line names none
	Message string // the text after the Xid code, or the whole NVRM message
	Line    int    // 1-based line number in the log
}

// pciPat is a PCI address as the driver prints it.
const pciPat = `[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?`

var (
	// "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
	// and, on older drivers, "NVRM: Xid (0000:03:00): 14, Channel 00000001".
	// NVLink5 Xids put the sub-component right after the code, without a
	// comma.
	xidRe = regexp.MustCompile(`^NVRM: Xid \(((?:PCI:)?` + pciPat + `)\): (\d{1,6})(?:,\s*|\s+|$)(.*)$`)
	// A PCI address in a non-Xid NVRM line, e.g. "GPU at 0000:3b:00.0".
	pciRe = regexp.MustCompile(pciPat)
	// nvrmRe finds the driver's own message in a line: "NVRM: " right
	// after the line's prefix (dmesg's "[  12.345678] " or "[Sat Nov 30
	// 03:08:57 2026] ", a syslog "Nov 30 03:08:57 host kernel: ",
	// journalctl's "[  12.345678] host kernel: "), never further on. A
	// user's text can appear anywhere else in a kernel log line (the file
	// name in a segfault line, up to 255 bytes, or after a newline in it,
	// on an indented line of its own); at the start of a message only as a
	// process name (at most 15 bytes), which cannot spell the driver's
	// head below.
	nvrmRe = regexp.MustCompile(`^(?:\[[^\]]{1,40}\] )?(?:(?:[A-Z][a-z]{2} [ 0-9]?[0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} )?\S+ kernel: )?(?:\[[ 0-9.]{1,20}\] )?(NVRM: .*)$`)
	// gpuHeadRe is the head of the driver's non-Xid GPU lines: "NVRM: GPU
	// 0000:3b:00.0: …", "NVRM: GPU at PCI:0000:3b:00: …": at least 20
	// bytes, longer than a process name.
	gpuHeadRe = regexp.MustCompile(`^NVRM: GPU (?:at )?(?:PCI:)?` + pciPat)
	// Xid 154's new recovery action: "... to 0x2 (Node Reboot Required)".
	recoveryActionRe = regexp.MustCompile(`to 0x[0-9A-Fa-f]+ \(([^)]*)\)`)
)

// parseKernelLog finds the NVRM lines of interest in a kernel log as
// printed by dmesg ("[  12.345678] NVRM: …", with or without timestamps or
// syslog prefixes). Input above MaxOutputBytes is an error.
func parseKernelLog(data []byte) ([]kernelEvent, error) {
	if len(data) > MaxOutputBytes {
		return nil, errInputTooLarge
	}
	var events []kernelEvent
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		if !strings.Contains(line, "NVRM:") {
			continue
		}
		nm := nvrmRe.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
		if nm == nil {
			continue
		}
		msg := nm[1]
		if m := xidRe.FindStringSubmatch(msg); m != nil {
			code, err := strconv.Atoi(m[2])
			if err != nil {
				continue
			}
			events = append(events, kernelEvent{Kind: eventXid, Xid: code, PCI: strings.TrimPrefix(m[1], "PCI:"), Message: strings.TrimSpace(m[3]), Line: n})
			continue
		}
		if !gpuHeadRe.MatchString(msg) {
			continue
		}
		msg = strings.TrimSpace(msg)
		lower := strings.ToLower(msg)
		var kind kernelEventKind
		switch {
		case strings.Contains(lower, "fallen off the bus"):
			kind = eventOffTheBus
		case strings.Contains(lower, "gpu is lost"):
			kind = eventGPULost
		default:
			continue
		}
		events = append(events, kernelEvent{Kind: kind, PCI: pciRe.FindString(msg), Message: msg, Line: n})
	}
	return events, nil
}

// markedFatal reports whether an NVLink5 Xid message (144–148, 150) carries
// a fatal severity: the catalogue's message format is "<Xid> <sub
// component> <fatal vs nonfatal> <Crosscontain> …", e.g. "145, RLW_REMAP
// Nonfatal XC0 i0 Link 04 (…)". The hexadecimal registers cannot spell
// "fatal".
func markedFatal(msg string) bool {
	lower := strings.ToLower(msg)
	return strings.Contains(lower, "fatal") && !strings.Contains(lower, "nonfatal") && !strings.Contains(lower, "non-fatal")
}

// judgeKernelLog classifies the kernel log's NVRM events by xidTable.
// Repeated events (same Xid, GPU and class) are reported once with a count;
// for Xid 154 only the latest recovery action of each GPU counts.
func judgeKernelLog(out Output, _ Options) findings {
	var f findings
	events, err := parseKernelLog(out.Stdout)
	if err != nil {
		f.inconclusivef("%v", err)
		return f
	}
	type key struct {
		kind  kernelEventKind
		xid   int
		pci   string
		class xidClass
	}
	type group struct {
		first kernelEvent
		count int
	}
	groups := map[key]*group{}
	var order []key
	lastRecovery := map[string]kernelEvent{}
	var recoveryOrder []string
	for _, e := range events {
		k := key{kind: e.Kind, xid: e.Xid, pci: e.PCI, class: xidFail}
		if e.Kind == eventXid {
			info, known := xidTable[e.Xid]
			switch {
			case !known:
				k.class = xidUnknown
			case info.class == xidRecoveryAction:
				if _, seen := lastRecovery[e.PCI]; !seen {
					recoveryOrder = append(recoveryOrder, e.PCI)
				}
				lastRecovery[e.PCI] = e
				continue
			case info.class == xidFailIfFatal:
				k.class = xidWarn
				if markedFatal(e.Message) {
					k.class = xidFail
				}
			default:
				k.class = info.class
			}
		}
		g, ok := groups[k]
		if !ok {
			g = &group{first: e}
			groups[k] = g
			order = append(order, k)
		}
		g.count++
	}
	for _, k := range order {
		g := groups[k]
		sample := text.Truncate(g.first.Message, 240)
		times := "1 time"
		if g.count > 1 {
			times = fmt.Sprintf("%d times", g.count)
		}
		pci := k.pci
		if pci == "" {
			pci = "unknown"
		}
		switch {
		case k.kind == eventOffTheBus:
			f.failf("GPU at PCI %s has fallen off the bus, %s: %s", pci, times, sample)
		case k.kind == eventGPULost:
			f.failf("GPU at PCI %s is lost, %s: %s", pci, times, sample)
		case k.class == xidUnknown:
			f.warnf("Xid %d on PCI %s, %s: not in this check's Xid table: %s", k.xid, pci, times, sample)
		default:
			what := fmt.Sprintf("Xid %d (%s) on PCI %s, %s", k.xid, xidTable[k.xid].mnemonic, pci, times)
			switch k.class {
			case xidFail:
				f.failf("%s: hardware or driver failure: %s", what, sample)
			case xidInconclusive:
				f.inconclusivef("%s: the GPU needs a reset, but this Xid is not evidence of a hardware fault: %s", what, sample)
			default:
				f.warnf("%s: application error or informational event, not a hardware fault: %s", what, sample)
			}
		}
	}
	for _, pci := range recoveryOrder {
		e := lastRecovery[pci]
		action := "unknown"
		if m := recoveryActionRe.FindStringSubmatch(e.Message); m != nil {
			action = m[1]
		}
		what := fmt.Sprintf("Xid 154 (GPU_RECOVERY_ACTION_CHANGED) on PCI %s: latest recovery action %q", e.PCI, action)
		if recoveryActionFails(action) {
			f.failf("%s: %s", what, text.Truncate(e.Message, 240))
		} else {
			f.warnf("%s", what)
		}
	}
	return f
}
