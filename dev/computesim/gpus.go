package computesim

import (
	"fmt"
	"strconv"
)

// acceleratorOptimized are the accelerator-optimized machine types the
// simulator knows, with the GPUs each comes with: "GPUs are automatically
// attached" to these machine types, in a fixed number
// (https://cloud.google.com/compute/docs/accelerator-optimized-machines).
// The table is the simulator's own, kept apart from flexslurm's catalog
// (shared/spec) so that one does not vouch for the other.
var acceleratorOptimized = func() map[string]gpuShape {
	m := map[string]gpuShape{
		"a4-highgpu-8g":  {"nvidia-b200", 8},
		"a3-ultragpu-8g": {"nvidia-h200-141gb", 8},
		"a3-megagpu-8g":  {"nvidia-h100-mega-80gb", 8},
		"a2-megagpu-16g": {"nvidia-tesla-a100", 16},
	}
	for _, n := range []int{1, 2, 4, 8} {
		m[fmt.Sprintf("a3-highgpu-%dg", n)] = gpuShape{"nvidia-h100-80gb", n}
		m[fmt.Sprintf("a2-highgpu-%dg", n)] = gpuShape{"nvidia-tesla-a100", n}
		m[fmt.Sprintf("a2-ultragpu-%dg", n)] = gpuShape{"nvidia-a100-80gb", n}
	}
	for vcpus, n := range map[int]int{4: 1, 8: 1, 12: 1, 16: 1, 24: 2, 32: 1, 48: 4, 96: 8} {
		m[fmt.Sprintf("g2-standard-%d", vcpus)] = gpuShape{"nvidia-l4", n}
	}
	return m
}()

type gpuShape struct {
	accelerator string
	count       int
}

// checkGPUs holds a template's or VM's GPUs to what the docs state:
//   - an accelerator-optimized machine type comes with its GPUs; a
//     guestAccelerators entry that names another type or count is invalid;
//   - "VMs with attached GPUs … can't live migrate": their
//     scheduling.onHostMaintenance must be TERMINATE
//     (https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance);
//     Compute answers "Instances with guest accelerators do not support
//     live migration."
func checkGPUs(field, machineType string, accels []accel, onHostMaintenance string) *apiError {
	shape, optimized := acceleratorOptimized[machineType]
	for i, a := range accels {
		if optimized && (a.typ != shape.accelerator || a.count != shape.count) {
			return errInvalidField(fmt.Sprintf("%s.guestAccelerators[%d]", field, i), a.typ+" x "+strconv.Itoa(a.count),
				fmt.Sprintf("Machine type %s comes with %d %s accelerators.", machineType, shape.count, shape.accelerator))
		}
	}
	if (optimized || len(accels) > 0) && onHostMaintenance != "TERMINATE" {
		return errInvalidField(field+".scheduling.onHostMaintenance", onHostMaintenance,
			"Instances with guest accelerators do not support live migration.")
	}
	return nil
}

type accel struct {
	typ   string
	count int
}
