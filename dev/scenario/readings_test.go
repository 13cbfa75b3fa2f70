package scenario

import (
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/dev/computesim"
)

// TestComputeReadingsReachTheSimulator: simulator.compute_readings sets the
// simulator's readings, RunOptions.ComputeReadings replaces it, and a
// malformed value is refused at load time naming the field.
func TestComputeReadingsReachTheSimulator(t *testing.T) {
	strictNoLabels := computesim.StrictReadings()
	strictNoLabels.IgnoreLabelFilter = false
	migDelete := computesim.LenientReadings()
	migDelete.RunEndAudit = computesim.RunEndMIGDelete
	for _, tc := range []struct {
		name, file, option string
		want               computesim.Readings
	}{
		{"default", "", "", func() computesim.Readings {
			r := computesim.LenientReadings()
			r.RunEndAudit = computesim.RunEndDeferredDelete
			return r
		}()},
		{"file", "strict,-IgnoreLabelFilter", "", strictNoLabels},
		{"option wins", "strict", "lenient,RunEndAudit=migDelete", migDelete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := base
			if tc.file != "" {
				text = strings.Replace(text, "  capacity_delay: 10m\n", "  capacity_delay: 10m\n  compute_readings: "+tc.file+"\n", 1)
			}
			r, err := newRunner(testContext(t), parse(t, text), RunOptions{ComputeReadings: tc.option})
			if err != nil {
				t.Fatal(err)
			}
			defer r.close()
			if got := r.h.Sim.Readings(); got != tc.want {
				t.Errorf("simulator readings %+v, want %+v", got, tc.want)
			}
		})
	}
	_, err := Parse([]byte(strings.Replace(base, "  capacity_delay: 10m\n", "  capacity_delay: 10m\n  compute_readings: strick\n", 1)))
	if err == nil || !strings.Contains(err.Error(), "simulator.compute_readings") || !strings.Contains(err.Error(), "strick") {
		t.Errorf("malformed compute_readings: %v", err)
	}
}

// TestCheckReadings: a check's readings name on/off switches of the
// simulator's readings; an unknown name, or a switch that takes a value
// (RunEndAudit), is refused at load time naming the field.
func TestCheckReadings(t *testing.T) {
	for _, bad := range []string{"NoSuchSwitch", "RunEndAudit"} {
		text := base + "final:\n  - readings: {" + bad + ": true}\n    invariant: [no_dead_letters]\n"
		_, err := Parse([]byte(text))
		if err == nil || !strings.Contains(err.Error(), "readings") || !strings.Contains(err.Error(), bad) {
			t.Errorf("readings {%s: true}: %v", bad, err)
		}
	}
	good := base + "final:\n  - readings: {refuseworkloadpolicyonflexstart: false}\n    invariant: [no_dead_letters]\n"
	if _, err := Parse([]byte(good)); err != nil {
		t.Errorf("a known switch: %v", err)
	}
}
