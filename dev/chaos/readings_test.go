package chaos

import (
	"testing"

	"github.com/flexslurm/flexslurm/dev/computesim"
)

// TestComputeReadingsInGeneratedScenarios: Options.ComputeReadings is
// written into each seed's scenario, so that a failing seed replays with
// them, and leaves the workload itself unchanged; lenient writes nothing.
func TestComputeReadingsInGeneratedScenarios(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"lenient", ""},
		{"strict", "strict"},
		{"lenient,IgnoreLabelFilter", "lenient,IgnoreLabelFilter"},
		{"strict,RefuseNamedRequestsOnBeta", "lenient,RefuseTargetSizeWhileAccepted,RefuseNamedRequestsOnV1,RefuseNamedRequestsOnBeta,RunEndAudit=migDelete,IgnoreLabelFilter,KeepTargetSizeAtRunEnd,RefuseWorkloadPolicyOnFlexStart"},
	} {
		f := Generate(7, Options{ComputeReadings: tc.in})
		if got := f.Simulator.ComputeReadings; got != tc.want {
			t.Errorf("ComputeReadings %q: scenario has %q, want %q", tc.in, got, tc.want)
		}
		if tc.want != "" {
			if _, err := computesim.ParseReadings(f.Simulator.ComputeReadings); err != nil {
				t.Errorf("written readings do not parse: %v", err)
			}
		}
		plain := Generate(7, Options{})
		if len(f.Steps) != len(plain.Steps) || f.Simulator.Seed != plain.Simulator.Seed || f.Simulator.ExpiryLogStyle != plain.Simulator.ExpiryLogStyle {
			t.Errorf("ComputeReadings %q changed the workload", tc.in)
		}
	}
}
