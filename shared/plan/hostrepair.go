package plan

import (
	"fmt"
	"strings"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// HostRepairFamilies are the machine types whose hosts Compute Engine
// repairs on request (instances.reportHostAsFaulty): A4X Max, A4X, A4, A3
// Ultra, A3 Mega and A3 High with 8 GPUs. Google's troubleshooting page
// for the API says it "only supports A4X Max, A4X, A4, A3 Ultra, A3 Mega,
// and A3 High (8 GPUs) machine types" (MACHINE_TYPE_NOT_SUPPORTED,
// https://docs.cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api).
// An entry is a machine family (the machine type up to the GPU class,
// MachineFamily) or, where only some types of a family qualify, one
// machine type: of A3 High only a3-highgpu-8g.
var HostRepairFamilies = []string{"a4x-maxgpu", "a4x-highgpu", "a4-highgpu", "a3-ultragpu", "a3-megagpu", "a3-highgpu-8g"}

// hostRepairTypes names HostRepairFamilies in messages.
const hostRepairTypes = "A4X Max, A4X, A4, A3 Ultra, A3 Mega or A3 High (8 GPUs)"

// HostRepairSupported reports whether Compute Engine accepts a host repair
// (instances.reportHostAsFaulty) for the VMs of a pool with this
// provisioning model (the pool spec's provisioning_model) and machine type,
// and, when it does not, why. Google's docs allow it only for a running VM
// of a HostRepairFamilies machine type that uses the reservation-bound
// provisioning model; other VMs are refused with
// INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED or
// MACHINE_TYPE_NOT_SUPPORTED, and Flex-Start or Spot users are told to
// contact their account team
// (https://docs.cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api,
// https://cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host).
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
		if family != "" && (family == f || strings.ToLower(machineType) == f) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("machine type %q is not of an %s type", machineType, hostRepairTypes)
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
