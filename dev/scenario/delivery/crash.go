package delivery

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// ErrInjectedCrash marks a crash injected into a delivery.
var ErrInjectedCrash = errors.New("injected crash")

// crashPlan is the crash planned for the delivery attempt in progress.
type crashPlan struct {
	point   lang.CrashPoint
	source  string // what planned it, for the trace
	actions int
	armed   bool // an "after" point was reached: crash at the next boundary
	fired   bool
	at      string // where it fired
}

// boundary is called by apply.Deps.Fault.
func (c *crashPlan) boundary(point string, a plan.Action) error {
	if c.fired {
		return nil
	}
	if c.armed {
		c.fired = true
		c.at = "after " + c.at + ", at " + boundaryName(point, a)
		return fmt.Errorf("%w %s (%s)", ErrInjectedCrash, c.point, c.source)
	}
	switch point {
	case "commit":
		if c.point.Commit {
			c.fired = true
			c.at = "commit"
			return fmt.Errorf("%w at commit (%s)", ErrInjectedCrash, c.source)
		}
	case "action":
		c.actions++
		hit := c.point.Hits(c.actions, a)
		if !hit {
			return nil
		}
		if c.point.After {
			c.armed = true
			c.at = fmt.Sprintf("action %d (%s)", c.actions, a)
			return nil
		}
		c.fired = true
		c.at = fmt.Sprintf("before action %d (%s)", c.actions, a)
		return fmt.Errorf("%w before %s (%s)", ErrInjectedCrash, a, c.source)
	}
	return nil
}

func boundaryName(point string, a plan.Action) string {
	if a == nil {
		return point
	}
	return fmt.Sprintf("%s %s", point, a)
}

// HashUnit maps a seed and parts to a number in [0, 1), stably.
func HashUnit(seed uint64, parts ...string) float64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	// 53 bits of the hash make a float64 in [0, 1).
	return float64(h.Sum64()>>11) / float64(uint64(1)<<53)
}

// randomCrashPoints are the boundaries random faults pick from.
var randomCrashPoints = []string{"commit", "before#1", "after#1", "before#2", "after#2", "before#3", "after#3"}
