package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
)

// Settings are what a run tells flexslurm to use.
type Settings struct {
	// ResizeRequestAPI is the endpoint of resize requests: "v1", "beta"
	// or "auto" (shared/config FLEXSLURM_RESIZE_REQUEST_API, Terraform
	// variable resize_request_api).
	ResizeRequestAPI string
	// Observed holds every verdict by point key, for the record:
	// flexslurm survives every outcome of these (docs/compute-contract.md),
	// so nothing reads them.
	Observed map[string]string
}

// pointKeys are the keys of Settings.Observed.
var pointKeys = map[Point]string{
	PointTargetSizeWhileAccepted: "target_size_while_accepted",
	PointNamedRequests:           "named_requests",
	PointRunEndAudit:             "run_end_audit",
	PointLabelFilter:             "label_filter",
	PointTargetSizeAtRunEnd:      "target_size_at_run_end",
}

// SettingsFor derives the settings from a report: the resize-request API
// is "v1" when v1 accepts named requests, "beta" when only beta does,
// "count" when neither does (every node through a request of its own,
// resizeBy 1), and "auto" when the point is not settled (v1 first, beta
// when v1 refuses names, resizeBy for one-VM requests when both do).
func SettingsFor(rep Report, project, zone string, at time.Time) Settings {
	s := Settings{ResizeRequestAPI: config.ResizeRequestAPIAuto, Observed: map[string]string{
		"run":     rep.RunID,
		"project": project,
		"zone":    zone,
		"time":    at.UTC().Format(time.RFC3339),
	}}
	switch rep.Verdict(PointNamedRequests).Outcome {
	case NamedOnV1:
		s.ResizeRequestAPI = config.ResizeRequestAPIV1
	case NamedOnBetaOnly:
		s.ResizeRequestAPI = config.ResizeRequestAPIBeta
	case NamedNowhere:
		s.ResizeRequestAPI = config.ResizeRequestAPICount
	}
	for _, v := range rep.Verdicts {
		s.Observed[pointKeys[v.Point]] = v.Outcome
	}
	return s
}

// DefaultSettingsFile is where the settings go, in deploy/: Terraform reads
// every *.auto.tfvars.json of its directory
// (https://developer.hashicorp.com/terraform/language/values/variables#variable-definitions-tfvars-files).
const DefaultSettingsFile = "deploy/compute-probe.auto.tfvars.json"

// WriteSettings writes s to path as Terraform variable values:
// resize_request_api, and compute_probe (the observations, informative).
func WriteSettings(path string, s Settings) error {
	body, err := json.MarshalIndent(map[string]any{
		"resize_request_api": s.ResizeRequestAPI,
		"compute_probe":      s.Observed,
	}, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "." {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("writing settings %s: %w", path, err)
		}
	}
	if err := os.WriteFile(path, append(body, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing settings: %w", err)
	}
	return nil
}

// PrintTable writes the verdicts as a table, then the evidence and hints.
func PrintTable(w io.Writer, rep Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPEN POINT\tVERDICT\tSIMULATOR SWITCH (strict side)")
	for _, v := range rep.Verdicts {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Point, v.Outcome, switchOf[v.Point])
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, v := range rep.Verdicts {
		fmt.Fprintf(w, "- %s: %s\n", v.Point, v.Evidence)
		if !v.Settled() && v.Hint != "" {
			fmt.Fprintf(w, "  hint: %s\n", v.Hint)
		}
	}
}

// switchOf names the simulator switch of each point
// (dev/computesim.Readings) and its strict side.
var switchOf = map[Point]string{
	PointTargetSizeWhileAccepted: "RefuseTargetSizeWhileAccepted (refused)",
	PointNamedRequests:           "RefuseNamedRequestsOnV1 (beta only)",
	PointRunEndAudit:             "RunEndAudit (migDelete)",
	PointLabelFilter:             "IgnoreLabelFilter (ignored)",
	PointTargetSizeAtRunEnd:      "KeepTargetSizeAtRunEnd (kept)",
}

// Cost is the price basis printed before a run.
type Cost struct {
	MachineType string
	// HourlyUSD is the machine type's estimated on-demand price per hour
	// (0: unknown).
	HourlyUSD float64
}

// KnownHourlyUSD are estimates of on-demand prices per hour in
// us-central1, from https://cloud.google.com/compute/vm-instance-pricing
// (accelerator-optimized, G2): prices change and differ by region.
var KnownHourlyUSD = map[string]float64{
	"g2-standard-4": 0.71,
}

// Describe says what a run may cost, as an estimate: at most MaxVMs VMs,
// each ended by Compute at its 10-minute run duration if the probe has not
// deleted it before.
func (c Cost) Describe() string {
	var b strings.Builder
	vmMinutes := MaxVMs * int(RunDuration/time.Minute)
	fmt.Fprintf(&b, "The probe makes at most %d Flex-Start VMs of machine type %s, each with a 10 GB boot disk,\n", MaxVMs, c.MachineType)
	fmt.Fprintf(&b, "each deleted by Compute at the end of its %d-minute run duration if not before: at most %d VM-minutes.\n", int(RunDuration/time.Minute), vmMinutes)
	if c.HourlyUSD > 0 {
		fmt.Fprintf(&b, "Estimated cost: at most about US$%.2f (%d min at about US$%.2f/h, the us-central1 on-demand list price;\n", float64(vmMinutes)/60*c.HourlyUSD, vmMinutes, c.HourlyUSD)
		fmt.Fprintf(&b, "an estimate: prices differ by region and change, see https://cloud.google.com/compute/vm-instance-pricing).\n")
	} else {
		fmt.Fprintf(&b, "Estimated cost: %d minutes of %s at its price in your region (https://cloud.google.com/compute/vm-instance-pricing).\n", vmMinutes, c.MachineType)
	}
	fmt.Fprintf(&b, "It takes about 15 minutes: one VM must reach the end of its run duration.\n")
	return b.String()
}
