package lang

import (
	"slices"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// TestBaseStatesAreSlurmstates: the model's base states are the ones
// shared/slurmstate parses from real Slurm.
func TestBaseStatesAreSlurmstates(t *testing.T) {
	for _, s := range SlurmBaseStates {
		if s == "COMPLETING" || s == "FAIL" {
			continue // flags Slurm may print alone
		}
		if !slices.Contains(slurmstate.NodeBases, slurmstate.NodeBase(strings.ToLower(s))) {
			t.Errorf("base state %s is not one of shared/slurmstate's %v", s, slurmstate.NodeBases)
		}
	}
}
