package slurm

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/generate/*.golden from the current output")

// twoPartitions has two GPU pools of different sizes and run durations in
// one partition, one of them also in a second partition, and a CPU pool.
const twoPartitions = `{
  "display_name": "multi",
  "name": "projects/flexslurm-test/locations/us-central1/modelDevelopmentClusters/",
  "network": {"network": "projects/p/global/networks/default"},
  "node_pools": [
    {"id": "login", "machine_spec": {"machine_type": "n2-standard-8"},
     "scaling_spec": {"min_node_count": 1, "max_node_count": 1}, "zone": "us-central1-a"},
    {"id": "h100", "machine_spec": {"machine_type": "a3-highgpu-2g", "accelerator_type": "NVIDIA_H100_80GB", "accelerator_count": 2},
     "provisioning_model": "FLEX_START", "flex_start_max_duration": "7290s",
     "scaling_spec": {"min_node_count": 2, "max_node_count": 5}, "zone": "us-central1-a"},
    {"id": "b200", "machine_spec": {"machine_type": "a4-highgpu-8g", "accelerator_type": "NVIDIA_B200", "accelerator_count": 8},
     "provisioning_model": "FLEX_START", "flex_start_max_duration": "86400s",
     "scaling_spec": {"min_node_count": 0, "max_node_count": 16}, "zone": "us-central1-b"}
  ],
  "orchestrator_spec": {"slurm_spec": {
    "home_directory_storage": "projects/flexslurm-test/locations/us-central1-a/instances/home",
    "partitions": [{"id": "gpu", "node_pool_ids": ["h100", "b200"]}, {"id": "big", "node_pool_ids": ["b200"]}],
    "default_partition_id": "big",
    "login_node_pool_id": "login"}}
}`

// ciSpec is slurmtest.SpecJSON, the integration tests' cluster.
const ciSpec = `{
  "display_name": "flexci",
  "name": "projects/flexslurm-test/locations/us-central1/modelDevelopmentClusters/",
  "network": {"network": "projects/flexslurm-test/global/networks/default"},
  "node_pools": [
    {"id": "login", "machine_spec": {"machine_type": "n2-standard-8"},
     "scaling_spec": {"min_node_count": 1, "max_node_count": 1}, "zone": "us-central1-a",
     "boot_disk": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": 50}},
    {"id": "gpu", "machine_spec": {"machine_type": "a3-ultragpu-8g", "accelerator_type": "NVIDIA_H200_141GB", "accelerator_count": 8},
     "provisioning_model": "FLEX_START", "flex_start_max_duration": "3600s",
     "scaling_spec": {"min_node_count": 1, "max_node_count": 4}, "zone": "us-central1-a",
     "boot_disk": {"boot_disk_type": "hyperdisk-balanced", "boot_disk_size_gb": 200}},
    {"id": "big", "machine_spec": {"machine_type": "a3-ultragpu-8g", "accelerator_type": "NVIDIA_H200_141GB", "accelerator_count": 8},
     "provisioning_model": "FLEX_START",
     "scaling_spec": {"min_node_count": 0, "max_node_count": 64}, "zone": "us-central1-a",
     "boot_disk": {"boot_disk_type": "hyperdisk-balanced", "boot_disk_size_gb": 200}}
  ],
  "orchestrator_spec": {"slurm_spec": {
    "home_directory_storage": "projects/flexslurm-test/locations/us-central1-a/instances/home",
    "partitions": [{"id": "gpu", "node_pool_ids": ["gpu"]}, {"id": "big", "node_pool_ids": ["big"]}],
    "login_node_pool_id": "login"}}
}`

func loadSpec(t *testing.T, src string) *spec.Cluster {
	t.Helper()
	path := src
	if strings.HasPrefix(src, "{") {
		path = filepath.Join(t.TempDir(), "cluster_config.json")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGenerateGolden compares Generate's slurm.conf fragment and gres.conf
// with testdata/generate/NAME.{slurm.conf,gres.conf} (rewritten by
// -update).
func TestGenerateGolden(t *testing.T) {
	prod := GenOptions{HookDir: "/usr/local/libexec/flexslurm", NodeHookDir: "/etc/flexslurm/hooks", Configless: true}
	cases := []struct {
		name string
		spec string
		o    GenOptions
	}{
		{"example", "../../examples/cluster_config.json", prod},
		{"slurmtest", ciSpec, prod},
		{"two-partitions", twoPartitions, GenOptions{HookDir: "/opt/h", ResumeTimeout: 1800 * time.Second,
			DefaultTime: 3 * time.Hour, HealthCheckInterval: -1, SuspendStaticOnly: true, GPUDir: "/run/gpus"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Generate(loadSpec(t, tc.spec), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			for ext, got := range map[string][]byte{"slurm.conf": g.SlurmConf, "gres.conf": g.GresConf} {
				path := filepath.Join("testdata", "generate", tc.name+"."+ext)
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (go test -run TestGenerateGolden -update writes it)", err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("%s differs from %s (-want +got):\n%s", ext, path, diff)
				}
			}
		})
	}
}

// TestGenerateLimits checks what makes Slurm refuse a job that no pool can
// serve: MaxTime never above a pool's max run duration, MaxNodes the
// largest pool, every node's GPUs.
func TestGenerateLimits(t *testing.T) {
	g, err := Generate(loadSpec(t, twoPartitions), GenOptions{HookDir: "/h", DefaultTime: 3 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := []GenPartition{
		{Name: "gpu", Nodes: []string{"multi-h100-0", "multi-h100-1", "multi-h100-2", "multi-h100-3", "multi-h100-4",
			"multi-b200-0", "multi-b200-1", "multi-b200-2", "multi-b200-3", "multi-b200-4", "multi-b200-5", "multi-b200-6",
			"multi-b200-7", "multi-b200-8", "multi-b200-9", "multi-b200-10", "multi-b200-11", "multi-b200-12", "multi-b200-13",
			"multi-b200-14", "multi-b200-15"},
			// 7290 s is 121.5 min: down to 121 min, never above.
			MaxTime: 121 * time.Minute, DefaultTime: 2*time.Hour + time.Minute, MaxNodes: 16},
		{Name: "big", Default: true, Nodes: g.Pools[1].Nodes, MaxTime: 24 * time.Hour, DefaultTime: 3 * time.Hour, MaxNodes: 16},
	}
	if diff := cmp.Diff(want, g.Partitions); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
	if g.Pools[0].GPUs != 2 || g.Pools[1].GPUs != 8 || g.Pools[0].CPUs != 52 || g.Pools[1].CPUs != 224 {
		t.Errorf("pools = %+v", g.Pools)
	}
}

func TestGenerateErrors(t *testing.T) {
	c := loadSpec(t, "../../examples/cluster_config.json")
	for name, tc := range map[string]struct {
		o    GenOptions
		want string
	}{
		"relative hook dir":  {GenOptions{HookDir: "hooks"}, "hook directory"},
		"relative node hook": {GenOptions{HookDir: "/h", NodeHookDir: "n"}, "node hook directory"},
		"resume timeout":     {GenOptions{HookDir: "/h", ResumeTimeout: 70000 * time.Second}, "ResumeTimeout"},
		"suspend time":       {GenOptions{HookDir: "/h", SuspendTime: 1500 * time.Millisecond}, "SuspendTime"},
		"default time":       {GenOptions{HookDir: "/h", DefaultTime: 90 * time.Second}, "DefaultTime"},
		"gpu dir":            {GenOptions{HookDir: "/h", GPUDir: "/a b"}, "GPU device directory"},
	} {
		if _, err := Generate(c, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Generate = %v, want an error naming %q", name, err, tc.want)
		}
	}
	short := loadSpec(t, strings.Replace(ciSpec, `"3600s"`, `"45s"`, 1))
	if _, err := Generate(short, GenOptions{HookDir: "/h"}); err == nil || !strings.Contains(err.Error(), "node_pools[gpu].flex_start_max_duration") {
		t.Errorf("45 s max run duration: %v, want an error naming node_pools[gpu].flex_start_max_duration", err)
	}
}

func TestHookLines(t *testing.T) {
	want := []string{
		"ResumeProgram=/c/flexslurm-hook-resume", "SuspendProgram=/c/flexslurm-hook-suspend",
		"ResumeFailProgram=/c/flexslurm-hook-resume-fail", "PrologSlurmctld=/c/flexslurm-hook-prolog-ctld",
		"EpilogSlurmctld=/c/flexslurm-hook-epilog-ctld", "Prolog=/n/flexslurm-hook-prolog", "Epilog=/n/flexslurm-hook-epilog",
	}
	if diff := cmp.Diff(want, HookLines("/c", "/n", false)); diff != "" {
		t.Errorf("HookLines without health (-want +got):\n%s", diff)
	}
	if got := HookLines("/c", "/n", true); got[len(got)-1] != "HealthCheckProgram=/n/flexslurm-hook-healthcheck" {
		t.Errorf("HookLines with health ends with %q", got[len(got)-1])
	}
}
