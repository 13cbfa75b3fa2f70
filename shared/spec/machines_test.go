package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLookupMachine(t *testing.T) {
	for _, want := range []Machine{
		{Name: "a3-highgpu-8g", VCPUs: 208, MemoryMB: 1872 * 1024, GPUs: 8, Accelerator: "nvidia-h100-80gb"},
		{Name: "a3-highgpu-1g", VCPUs: 26, MemoryMB: 234 * 1024, GPUs: 1, Accelerator: "nvidia-h100-80gb"},
		{Name: "a3-megagpu-8g", VCPUs: 208, MemoryMB: 1872 * 1024, GPUs: 8, Accelerator: "nvidia-h100-mega-80gb"},
		{Name: "a3-ultragpu-8g", VCPUs: 224, MemoryMB: 2952 * 1024, GPUs: 8, Accelerator: "nvidia-h200-141gb"},
		{Name: "a4-highgpu-8g", VCPUs: 224, MemoryMB: 3968 * 1024, GPUs: 8, Accelerator: "nvidia-b200"},
		{Name: "a2-ultragpu-8g", VCPUs: 96, MemoryMB: 1360 * 1024, GPUs: 8, Accelerator: "nvidia-a100-80gb"},
		{Name: "g2-standard-96", VCPUs: 96, MemoryMB: 384 * 1024, GPUs: 8, Accelerator: "nvidia-l4"},
		{Name: "n2-standard-8", VCPUs: 8, MemoryMB: 32 * 1024},
		{Name: "c2-standard-60", VCPUs: 60, MemoryMB: 240 * 1024},
	} {
		got, ok := LookupMachine(want.Name)
		if !ok {
			t.Errorf("%s: not in the catalog", want.Name)
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", want.Name, d)
		}
		if got.Bundled() != (want.GPUs > 0) {
			t.Errorf("%s: Bundled() = %t", want.Name, got.Bundled())
		}
	}
	n1, ok := LookupMachine("n1-standard-4")
	if !ok || n1.Bundled() || n1.MemoryMB != 15*1024 || n1.Attachable["nvidia-tesla-t4"] == nil {
		t.Errorf("n1-standard-4 = %+v", n1)
	}
	if _, ok := LookupMachine("a3-highgpu-3g"); ok {
		t.Error("a3-highgpu-3g is in the catalog")
	}
	if got := AcceleratorName("NVIDIA_H100_MEGA_80GB"); got != "nvidia-h100-mega-80gb" {
		t.Errorf("AcceleratorName = %q", got)
	}
}
