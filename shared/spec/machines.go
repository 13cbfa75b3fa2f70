package spec

import (
	"fmt"
	"strings"
)

// Machine is one machine type flexslurm supports: its shape, as Compute
// Engine's machine-type pages give it, and how its GPUs come.
//
// Sources (Google's machine-type documentation):
//   - accelerator-optimized A4, A3, A2 and G2:
//     https://cloud.google.com/compute/docs/accelerator-optimized-machines
//   - GPUs attached to N1: https://cloud.google.com/compute/docs/gpus
//     ("GPU models" and the per-model vCPU/memory tables)
//   - general-purpose N2, E2, N1 and compute-optimized C2:
//     https://cloud.google.com/compute/docs/general-purpose-machines,
//     https://cloud.google.com/compute/docs/compute-optimized-machines
//
// Memory is in MB as the machineTypes API reports it (memoryMb: the pages'
// "GB" are GiB, so 1 GB = 1024 MB).
type Machine struct {
	// Name is the machine type, e.g. "a3-highgpu-8g".
	Name string
	// VCPUs is the number of vCPUs.
	VCPUs int
	// MemoryMB is the memory in MB.
	MemoryMB int
	// GPUs is the number of GPUs that come with the machine type
	// (accelerator-optimized types); 0 for the others.
	GPUs int
	// Accelerator is the Compute accelerator type of the bundled GPUs, e.g.
	// "nvidia-h100-80gb"; "" for none.
	Accelerator string
	// Attachable lists the accelerator types that may be attached to this
	// machine type with guestAccelerators (N1 only), each with the counts
	// Compute accepts.
	Attachable map[string][]int
}

// Bundled reports whether the machine type comes with its GPUs: the
// instance takes no guestAccelerators ("accelerator-optimized machine
// types have a fixed number of GPUs attached").
func (m Machine) Bundled() bool { return m.GPUs > 0 }

// AcceleratorName maps the managed Slurm API's accelerator_type spelling
// ("NVIDIA_H100_80GB") to Compute's accelerator type name
// ("nvidia-h100-80gb").
func AcceleratorName(apiName string) string {
	return strings.ToLower(strings.ReplaceAll(apiName, "_", "-"))
}

// LookupMachine returns the machine type name from the catalog.
func LookupMachine(name string) (Machine, bool) {
	m, ok := machines[name]
	return m, ok
}

// MachineNames returns the catalog's machine types, in no particular order.
func MachineNames() []string {
	out := make([]string, 0, len(machines))
	for n := range machines {
		out = append(out, n)
	}
	return out
}

const gib = 1024

var machines = func() map[string]Machine {
	m := map[string]Machine{}
	gpu := func(name string, vcpus int, memGB float64, gpus int, acc string) {
		m[name] = Machine{Name: name, VCPUs: vcpus, MemoryMB: int(memGB * gib), GPUs: gpus, Accelerator: acc}
	}
	// A4 (NVIDIA B200).
	gpu("a4-highgpu-8g", 224, 3968, 8, "nvidia-b200")
	// A3 Ultra (H200), A3 Mega and A3 High (H100).
	gpu("a3-ultragpu-8g", 224, 2952, 8, "nvidia-h200-141gb")
	gpu("a3-megagpu-8g", 208, 1872, 8, "nvidia-h100-mega-80gb")
	gpu("a3-highgpu-1g", 26, 234, 1, "nvidia-h100-80gb")
	gpu("a3-highgpu-2g", 52, 468, 2, "nvidia-h100-80gb")
	gpu("a3-highgpu-4g", 104, 936, 4, "nvidia-h100-80gb")
	gpu("a3-highgpu-8g", 208, 1872, 8, "nvidia-h100-80gb")
	// A2 Standard (A100 40GB) and A2 Ultra (A100 80GB).
	gpu("a2-highgpu-1g", 12, 85, 1, "nvidia-tesla-a100")
	gpu("a2-highgpu-2g", 24, 170, 2, "nvidia-tesla-a100")
	gpu("a2-highgpu-4g", 48, 340, 4, "nvidia-tesla-a100")
	gpu("a2-highgpu-8g", 96, 680, 8, "nvidia-tesla-a100")
	gpu("a2-megagpu-16g", 96, 1360, 16, "nvidia-tesla-a100")
	gpu("a2-ultragpu-1g", 12, 170, 1, "nvidia-a100-80gb")
	gpu("a2-ultragpu-2g", 24, 340, 2, "nvidia-a100-80gb")
	gpu("a2-ultragpu-4g", 48, 680, 4, "nvidia-a100-80gb")
	gpu("a2-ultragpu-8g", 96, 1360, 8, "nvidia-a100-80gb")
	// G2 (NVIDIA L4).
	for _, g := range []struct{ vcpus, gpus int }{{4, 1}, {8, 1}, {12, 1}, {16, 1}, {24, 2}, {32, 1}, {48, 4}, {96, 8}} {
		gpu(fmt.Sprintf("g2-standard-%d", g.vcpus), g.vcpus, float64(4*g.vcpus), g.gpus, "nvidia-l4")
	}
	cpu := func(family string, vcpus []int, gbPerVCPU float64) {
		for _, n := range vcpus {
			name := fmt.Sprintf("%s-%d", family, n)
			m[name] = Machine{Name: name, VCPUs: n, MemoryMB: int(gbPerVCPU * float64(n) * gib)}
		}
	}
	cpu("n2-standard", []int{2, 4, 8, 16, 32, 48, 64, 80, 96, 128}, 4)
	cpu("n2-highmem", []int{2, 4, 8, 16, 32, 48, 64, 80, 96, 128}, 8)
	cpu("n2-highcpu", []int{2, 4, 8, 16, 32, 48, 64, 80, 96}, 1)
	cpu("c2-standard", []int{4, 8, 16, 30, 60}, 4)
	cpu("e2-standard", []int{2, 4, 8, 16, 32}, 4)
	// N1, to which GPUs are attached: T4, V100, P100 and P4, in the counts
	// the GPU pages list for N1.
	n1GPUs := map[string][]int{
		"nvidia-tesla-t4":   {1, 2, 4},
		"nvidia-tesla-v100": {1, 2, 4, 8},
		"nvidia-tesla-p100": {1, 2, 4},
		"nvidia-tesla-p4":   {1, 2, 4},
	}
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64, 96} {
		name := fmt.Sprintf("n1-standard-%d", n)
		m[name] = Machine{Name: name, VCPUs: n, MemoryMB: int(3.75 * float64(n) * gib), Attachable: n1GPUs}
	}
	return m
}()
