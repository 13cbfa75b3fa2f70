package plan

import (
	"testing"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// TestTableIsExhaustive enumerates every Slurm × VM × phase × kind
// combination and fails on any the table does not map. A row must explain
// itself, and an observed combination must say what happens after the grace
// period.
func TestTableIsExhaustive(t *testing.T) {
	n := 0
	for _, s := range SlurmClasses {
		for _, v := range VMClasses {
			for _, p := range model.Phases {
				for _, k := range []model.NodeKind{model.NodeStatic, model.NodeDynamic} {
					c := Combo{Slurm: s, VM: v, Phase: p, Kind: k}
					n++
					r, ok := Decide(c)
					switch {
					case !ok:
						t.Errorf("unmapped: %s", c)
					case r.Why == "":
						t.Errorf("%s maps to %s without a reason", c, r.Outcome)
					case r.Outcome == OutcomeObserve && (r.Fallback == "" || r.Fallback == OutcomeObserve):
						t.Errorf("%s is observed with no action after the grace period", c)
					case r.Outcome == "":
						t.Errorf("%s maps to an empty outcome", c)
					}
				}
			}
		}
	}
	if want := len(SlurmClasses) * len(VMClasses) * len(model.Phases) * 2; n != want {
		t.Fatalf("enumerated %d combinations, want %d", n, want)
	}
}

// TestEveryRowIsReachable guards against dead rows hidden behind earlier ones.
func TestEveryRowIsReachable(t *testing.T) {
	hit := make([]bool, len(Table))
	for _, s := range SlurmClasses {
		for _, v := range VMClasses {
			for _, p := range model.Phases {
				for _, k := range []model.NodeKind{model.NodeStatic, model.NodeDynamic} {
					c := Combo{Slurm: s, VM: v, Phase: p, Kind: k}
					for i, r := range Table {
						if r.matches(c) {
							hit[i] = true
							break
						}
					}
				}
			}
		}
	}
	for i, h := range hit {
		if !h {
			t.Errorf("row %d (%s: %s) is never the first match", i, Table[i].Outcome, Table[i].Why)
		}
	}
}

// TestClassifySlurm covers states seen on a real Slurm 22.05 cluster
// (https://slurm.schedmd.com/sinfo.html, https://slurm.schedmd.com/power_save.html).
func TestClassifySlurm(t *testing.T) {
	tests := []struct {
		state string
		flags []string
		want  SlurmClass
	}{
		{"idle", []string{"CLOUD", "POWERED_DOWN"}, SlurmPoweredDown},
		{"idle", []string{"CLOUD", "POWERED_DOWN", "NOT_RESPONDING"}, SlurmPoweredDown},
		{"down", []string{"CLOUD", "POWERED_DOWN", "NOT_RESPONDING"}, SlurmDownPowered},
		{"allocated", []string{"CLOUD", "NOT_RESPONDING", "POWERING_UP"}, SlurmPoweringUp},
		{"idle", []string{"CLOUD"}, SlurmIdle},
		{"allocated", []string{"CLOUD"}, SlurmBusy},
		{"mixed", nil, SlurmBusy},
		{"idle", []string{"CLOUD", "POWERING_DOWN"}, SlurmPoweringDown},
		{"idle", []string{"CLOUD", "DRAIN"}, SlurmDrain},
		{"idle", []string{"CLOUD", "DRAIN", "POWERED_DOWN"}, SlurmPoweredDown},
		{"idle", []string{"CLOUD", "NOT_RESPONDING"}, SlurmDown},
		{"down", []string{"CLOUD"}, SlurmDown},
	}
	for _, tc := range tests {
		if got := ClassifySlurm(slurmNode("n", "", append([]string{tc.state}, tc.flags...)...)); got != tc.want {
			t.Errorf("%s+%v: %s, want %s", tc.state, tc.flags, got, tc.want)
		}
	}
}

// slurmNode is a snapshot node's facts as the agent's snapshot gives them:
// Slurm's state words and reason, parsed.
func slurmNode(name, reason string, words ...string) model.SlurmNode {
	return slurmstate.ParseNode(name, words, reason)
}
