package lang

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// A Slurm node state is written as scontrol prints it, a base state and
// flags joined by "+" ("IDLE+CLOUD+POWERED_DOWN";
// https://slurm.schedmd.com/scontrol.html#OPT_State): snapshot steps set
// it, slurm_nodes checks compare it, and the Slurm model keeps it.

// Slurm node flags with a place in the printed order: the vocabulary of
// shared/slurmstate, which parses real Slurm's output, so the model speaks
// as Slurm does. MAINTENANCE is the flag a maintenance reservation shows in
// a node's full state.
const (
	SlurmFlagCloud         = string(slurmstate.FlagCloud)
	SlurmFlagCompleting    = string(slurmstate.FlagCompleting)
	SlurmFlagDrain         = string(slurmstate.FlagDrain)
	SlurmFlagFail          = string(slurmstate.FlagFail)
	SlurmFlagMaintenance   = "MAINTENANCE"
	SlurmFlagReserved      = string(slurmstate.FlagReserved)
	SlurmFlagNotResponding = string(slurmstate.FlagNotResponding)
	SlurmFlagPoweredDown   = string(slurmstate.FlagPoweredDown)
	SlurmFlagPoweringUp    = string(slurmstate.FlagPoweringUp)
	SlurmFlagPoweringDown  = string(slurmstate.FlagPoweringDown)
	SlurmFlagPowerDown     = string(slurmstate.FlagPowerDown)
)

// Slurm base states, upper case as scontrol prints them (shared/slurmstate's
// NodeBase values, which sinfo prints in lower case;
// TestBaseStatesAreSlurmstates).
const (
	SlurmIdle      = "IDLE"
	SlurmAllocated = "ALLOCATED"
	SlurmDown      = "DOWN"
)

// SlurmBaseStates are the base states a Slurm node state may have.
var SlurmBaseStates = []string{SlurmIdle, SlurmAllocated, "MIXED", SlurmDown, "COMPLETING", "FUTURE", "UNKNOWN", "ERROR", "FAIL"}

// flagOrder is the order flags are printed in (scontrol's, roughly).
var flagOrder = []string{SlurmFlagCloud, SlurmFlagCompleting, SlurmFlagDrain, SlurmFlagFail, SlurmFlagMaintenance, SlurmFlagReserved,
	SlurmFlagNotResponding, SlurmFlagPoweredDown, SlurmFlagPoweringUp, SlurmFlagPoweringDown, SlurmFlagPowerDown}

// ParseSlurmState parses BASE+FLAG+… ("IDLE+CLOUD+POWERED_DOWN"),
// case-insensitively, into the upper-case base and the set of flags.
func ParseSlurmState(s string) (string, map[string]bool, error) {
	parts := strings.Split(strings.ToUpper(strings.TrimSpace(s)), "+")
	if len(parts) == 0 || parts[0] == "" {
		return "", nil, fmt.Errorf("empty Slurm state; want BASE+FLAG+… such as IDLE+CLOUD+POWERED_DOWN")
	}
	if !slices.Contains(SlurmBaseStates, parts[0]) {
		return "", nil, fmt.Errorf("Slurm state %q: base %q is not one of %s", s, parts[0], strings.Join(SlurmBaseStates, ", "))
	}
	flags := map[string]bool{}
	for _, f := range parts[1:] {
		if f == "" {
			return "", nil, fmt.Errorf("Slurm state %q has an empty flag", s)
		}
		flags[f] = true
	}
	return parts[0], flags, nil
}

// FormatSlurmState prints a base state and its flags: the known flags in
// scontrol's order, then any others sorted.
func FormatSlurmState(base string, flags map[string]bool) string {
	out := []string{base}
	seen := map[string]bool{}
	for _, f := range flagOrder {
		if flags[f] {
			out = append(out, f)
			seen[f] = true
		}
	}
	var rest []string
	for f, on := range flags {
		if on && !seen[f] {
			rest = append(rest, f)
		}
	}
	sort.Strings(rest)
	return strings.Join(append(out, rest...), "+")
}
