package plan

import (
	"fmt"
	"strings"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// HostRepairFamilies are the machine families whose hosts Compute Engine
// repairs on request (instances.reportHostAsFaulty), keyed by the machine
// type prefix up to the GPU class: A4X Max, A4X, A4 and A3 Ultra
// (https://cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host,
// "Limitations").
var HostRepairFamilies = []string{"a4x-maxgpu", "a4x-highgpu", "a4-highgpu", "a3-ultragpu"}

// HostRepairSupported reports whether Compute Engine accepts a host repair
// (instances.reportHostAsFaulty) for the VMs of a pool with this
// provisioning model (the pool spec's provisioning_model) and machine type,
// and, when it does not, why. Google's docs allow it only for a running VM
// that "uses an A4X Max, A4X, A4, or A3 Ultra machine type" and "uses the
// reservation-bound provisioning model"; other VMs are refused with
// INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED, and Flex-Start or Spot users
// are told to contact their account team
// (https://cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host,
// https://cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api).
// A Flex-Start pool therefore never qualifies: its failed VMs are deleted
// and replaced.
func HostRepairSupported(provisioningModel, machineType string) (bool, string) {
	if spec.ProvisioningModel(provisioningModel) != spec.ProvisioningReservation {
		pm := provisioningModel
		if pm == "" {
			pm = "unknown"
		}
		return false, fmt.Sprintf("provisioning model %s is not reservation-bound", pm)
	}
	family := MachineFamily(machineType)
	for _, f := range HostRepairFamilies {
		if family == f {
			return true, ""
		}
	}
	return false, fmt.Sprintf("machine type %q is not of an A4X Max, A4X, A4 or A3 Ultra family", machineType)
}

// MachineFamily is a machine type's first two dash-separated parts, e.g.
// "a3-ultragpu" for "a3-ultragpu-8g" ("" when it has fewer).
func MachineFamily(machineType string) string {
	parts := strings.SplitN(strings.ToLower(machineType), "-", 3)
	if len(parts) < 3 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	return parts[0] + "-" + parts[1]
}

// poolHostRepair reports whether a pool's VMs can be host-repaired, and
// why not.
func poolHostRepair(p *model.Pool) (bool, string) {
	return HostRepairSupported(p.ProvisioningModel, p.MachineType)
}
