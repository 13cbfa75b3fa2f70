package reactbench

import (
	"bufio"
	"io"
	"regexp"
	"strings"
	"time"
)

// CtldEvent is one line of slurmctld's log that the benchmark reads.
type CtldEvent struct {
	At   time.Time
	Node string
	What CtldWhat
}

// CtldWhat is what a slurmctld log line records.
type CtldWhat int

const (
	// CtldPowerUp: "powering up node X" — power_save decides to resume
	// the node and runs ResumeProgram for it (Slurm 22.05 power_save.c).
	CtldPowerUp CtldWhat = iota + 1
	// CtldResponding: "Node X now responding" — the node's slurmd
	// registered after its power-up (node_mgr.c).
	CtldResponding
	// CtldDrain: "update_node: node X reason set to: …" or "… state set
	// to DRAIN…" — an scontrol update drained the node.
	CtldDrain
)

var (
	ctldLine      = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$`)
	ctldPowerUp   = regexp.MustCompile(`^powering up node (\S+)$`)
	ctldResponds  = regexp.MustCompile(`^Node (\S+) now responding$`)
	ctldDrainWhy  = regexp.MustCompile(`^update_node: node (\S+) reason set to: (.*)$`)
	ctldDrainSets = regexp.MustCompile(`^update_node: node (\S+) state set to DRAIN`)
)

// ParseCtldLog reads slurmctld's log (SlurmctldLogFile, LogTimeFormat
// iso8601_ms, the default) and returns the lines the benchmark reads, in
// order. Times are in loc (slurmctld logs local time). A drain counts only
// when its reason is not flexslurm's expiry or end of a VM (those lines
// say "max run duration" or "is gone").
func ParseCtldLog(r io.Reader, loc *time.Location) ([]CtldEvent, error) {
	var out []CtldEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		m := ctldLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", m[1], loc)
		if err != nil {
			continue
		}
		msg := m[2]
		switch {
		case ctldPowerUp.MatchString(msg):
			out = append(out, CtldEvent{At: at, Node: ctldPowerUp.FindStringSubmatch(msg)[1], What: CtldPowerUp})
		case ctldResponds.MatchString(msg):
			out = append(out, CtldEvent{At: at, Node: ctldResponds.FindStringSubmatch(msg)[1], What: CtldResponding})
		case ctldDrainWhy.MatchString(msg):
			d := ctldDrainWhy.FindStringSubmatch(msg)
			if strings.Contains(d[2], "max run duration") || strings.Contains(d[2], "is gone") {
				continue
			}
			out = append(out, CtldEvent{At: at, Node: d[1], What: CtldDrain})
		case ctldDrainSets.MatchString(msg):
			out = append(out, CtldEvent{At: at, Node: ctldDrainSets.FindStringSubmatch(msg)[1], What: CtldDrain})
		}
	}
	return out, sc.Err()
}

// firstCtld returns the first event of kind what for node at or after
// from and before until (zero until: no bound).
func firstCtld(evs []CtldEvent, node string, what CtldWhat, from, until time.Time) (time.Time, bool) {
	for _, e := range evs {
		if e.Node == node && e.What == what && !e.At.Before(from) && (until.IsZero() || e.At.Before(until)) {
			return e.At, true
		}
	}
	return time.Time{}, false
}
