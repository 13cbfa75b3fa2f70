package spec

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// exampleTree is the example spec as a generic JSON tree, to mutate.
func exampleTree(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// set sets the value at a dotted path of the tree ("node_pools.1.zone");
// numeric segments index arrays.
func set(t *testing.T, tree map[string]any, path string, v any) {
	t.Helper()
	segs := strings.Split(path, ".")
	var cur any = tree
	for i, s := range segs {
		last := i == len(segs)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[s] = v
				return
			}
			cur = c[s]
		case []any:
			k, err := strconv.Atoi(s)
			if err != nil || k >= len(c) {
				t.Fatalf("bad path %s at %s", path, s)
			}
			if last {
				c[k] = v
				return
			}
			cur = c[k]
		default:
			t.Fatalf("bad path %s at %s", path, s)
		}
	}
}

// parseWith parses the example with the value at path replaced.
func parseWith(t *testing.T, path string, v any) (*Cluster, error) {
	t.Helper()
	tree := exampleTree(t)
	set(t, tree, path, v)
	data, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(data)
}

// problemAt returns the problem reported at jsonPath, if any.
func problemAt(err error, jsonPath string) (Problem, bool) {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return Problem{}, false
	}
	for _, p := range ve.Problems {
		if p.Path == jsonPath {
			return p, true
		}
	}
	return Problem{}, false
}

// refused asserts that setting path to v fails validation at jsonPath with
// a message quoting the value.
func refused(t *testing.T, path, jsonPath string, v string) {
	t.Helper()
	_, err := parseWith(t, path, v)
	if err == nil {
		t.Fatalf("%s = %q was accepted", jsonPath, v)
	}
	p, ok := problemAt(err, jsonPath)
	if !ok {
		t.Fatalf("%s = %q: no problem at %s, got:\n%v", jsonPath, v, jsonPath, err)
	}
	if !quotes(p.Message, v) {
		t.Errorf("%s = %q: the message does not quote the value: %s", jsonPath, v, p.Message)
	}
}

// quotes reports whether msg quotes v, or the segment of v it found wrong
// (the cluster id of name, say).
func quotes(msg, v string) bool {
	if strings.Contains(msg, strconv.Quote(v)) {
		return true
	}
	for _, seg := range strings.Split(v, "/") {
		if seg != "" && strings.Contains(msg, strconv.Quote(seg)) {
			return true
		}
	}
	return false
}

// TestStrictFields holds every spec string that reaches a configuration
// file, a URL path, a resource name or label, or an argument list to its
// pattern: the valid edge cases are accepted, the others refused at the
// field's JSON path with the value quoted.
func TestStrictFields(t *testing.T) {
	type field struct {
		path, jsonPath string
		good, bad      []string
	}
	fields := []field{
		{"name", "name",
			[]string{
				"projects/flexslurm-demo/locations/us-central1/modelDevelopmentClusters/",
				"projects/abcdef/locations/us-central1/modelDevelopmentClusters/",
				"projects/a23456789012345678901234567890/locations/us-central1/modelDevelopmentClusters/",
				"projects/example.com:flex-demo/locations/us-central1/modelDevelopmentClusters/",
			},
			[]string{
				"projects/abcde/locations/us-central1/modelDevelopmentClusters/",
				"projects/a234567890123456789012345678901/locations/us-central1/modelDevelopmentClusters/",
				"projects/Flex-Demo/locations/us-central1/modelDevelopmentClusters/",
				"projects/flex-demo-/locations/us-central1/modelDevelopmentClusters/",
				"projects/-flexdemo/locations/us-central1/modelDevelopmentClusters/",
				"projects/flex..demo/locations/us-central1/modelDevelopmentClusters/",
				"projects/flex demo/locations/us-central1/modelDevelopmentClusters/",
				"projects/flexslurm-demo/locations/us-central1-a/modelDevelopmentClusters/",
				"projects/flexslurm-demo/locations/US-central1/modelDevelopmentClusters/",
				"projects/flexslurm-demo/locations/us-central1%2F..%2Fx/modelDevelopmentClusters/",
				"projects/flexslurm-demo/locations/us-central1/modelDevelopmentClusters/flex-vm",
			}},
		{"network.network", "network.network",
			[]string{"projects/flexslurm-demo/global/networks/default", "projects/host-project/global/networks/a", "projects/123456789/global/networks/vpc-1"},
			[]string{
				"default",
				"projects/flexslurm-demo/global/networks/Default",
				"projects/flexslurm-demo/global/networks/default/../../x",
				"projects/flexslurm-demo/global/networks/default?alt=x",
				"https://www.googleapis.com/compute/v1/projects/flexslurm-demo/global/networks/default",
				"projects/flexslurm-demo/global/networks/-default",
			}},
		{"network.subnetwork", "network.subnetwork",
			[]string{"projects/flexslurm-demo/regions/us-central1/subnetworks/default", "projects/host-project/regions/us-central1/subnetworks/s"},
			[]string{
				"projects/flexslurm-demo/regions/europe-west4/subnetworks/default",
				"projects/flexslurm-demo/regions/us-central1/subnetworks/default/../x",
				"projects/flexslurm-demo/regions/us-central1-a/subnetworks/default",
				"projects/flexslurm-demo/regions/us-central1/subnetworks/de fault",
			}},
		{"node_pools.1.id", "node_pools[1].id",
			[]string{"a3u", "a", "a-1", "a23456789012345x"},
			[]string{"a3u\nNodeName=evil", "a3u,evil", "a3u=x", "a3u#", "A3U", "-a3u", "a3u-", "a234567890123456x", "a3u b", "a3u[0-3]"}},
		{"node_pools.1.zone", "node_pools[1].zone",
			[]string{"us-central1-a", "us-central1-f"},
			[]string{"us-central1-a/../../x", "us-central1-abc", "us-central1-", "us-central1", "us-central1-A", "us-central1-a ", "us-central1-1", "europe-west4-a"}},
		{"node_pools.1.node_image", "node_pools[1].node_image",
			[]string{"projects/flexslurm-demo/global/images/gpu-1", "projects/flexslurm-demo/global/images/family/slurm-gpu"},
			[]string{"projects/flexslurm-demo/global/images/../../x", "projects/Flex/global/images/a", "gpu-1", "projects/flexslurm-demo/global/images/family/a/b"}},
		{"node_pools.1.machine_spec.machine_type", "node_pools[1].machine_spec.machine_type",
			[]string{"a3-ultragpu-8g"},
			[]string{"a3-ultragpu-8g/../x", "a3-ultragpu-8g x"}},
		{"node_pools.1.machine_spec.accelerator_type", "node_pools[1].machine_spec.accelerator_type",
			[]string{"NVIDIA_H200_141GB"},
			[]string{"NVIDIA_H200_141GB/../x", "nvidia-h200-141gb,x"}},
		{"node_pools.1.boot_disk.boot_disk_type", "node_pools[1].boot_disk.boot_disk_type",
			[]string{"hyperdisk-balanced", "pd-ssd"},
			[]string{"pd-ssd/../x", "pd-ssd "}},
		{"orchestrator_spec.slurm_spec.home_directory_storage", "orchestrator_spec.slurm_spec.home_directory_storage",
			[]string{"projects/flexslurm-demo/locations/us-central1-a/instances/home", "projects/flexslurm-demo/locations/us-central1/instances/h"},
			[]string{
				"-oexec,nosuid:/x",
				"10.0.0.2:/home",
				"projects/flexslurm-demo/locations/us-central1-a/instances/home,exec",
				"projects/flexslurm-demo/locations/us-central1-a/instances/../x",
				"projects/flexslurm-demo/locations/us-central1-a/instances/home x",
			}},
		{"orchestrator_spec.slurm_spec.partitions.0.id", "orchestrator_spec.slurm_spec.partitions[0].id",
			[]string{"a3u", "A3U_big-1", "p"},
			[]string{"a3u\nNodeName=evil", "a3u Default=YES", "a3u,b", "a3u=x", "#a3u", "-a3u", "_a3u", "a3u[1]", "a3u:x", strings.Repeat("a", 64)}},
		{"orchestrator_spec.slurm_spec.login_node_pool_id", "orchestrator_spec.slurm_spec.login_node_pool_id",
			[]string{"login"},
			[]string{"login\nx", "login ", "-login"}},
		{"orchestrator_spec.slurm_spec.default_partition_id", "orchestrator_spec.slurm_spec.default_partition_id",
			[]string{"a3u"},
			[]string{"a3u\nx", "a3u "}},
		{"display_name", "display_name",
			[]string{"flexvm"},
			[]string{"flex\nvm", "flex vm", "Flexvm"}},
	}
	for _, f := range fields {
		t.Run(f.jsonPath, func(t *testing.T) {
			for _, v := range f.good {
				if f.path == "node_pools.1.id" || f.path == "orchestrator_spec.slurm_spec.partitions.0.id" {
					// The pool id is referenced by the partition: rename
					// both together.
					tree := exampleTree(t)
					set(t, tree, f.path, v)
					if f.path == "node_pools.1.id" {
						set(t, tree, "orchestrator_spec.slurm_spec.partitions.0.node_pool_ids", []any{v})
					}
					data, _ := json.Marshal(tree)
					if _, err := Parse(data); err != nil {
						t.Errorf("%s = %q refused: %v", f.jsonPath, v, err)
					}
					continue
				}
				if _, err := parseWith(t, f.path, v); err != nil {
					t.Errorf("%s = %q refused: %v", f.jsonPath, v, err)
				}
			}
			for _, v := range f.bad {
				refused(t, f.path, f.jsonPath, v)
			}
		})
	}
}

// TestAttackSpecInjection feeds the spec the injections that would reach
// slurm.conf, a Compute URL path or mount's argument list, and asserts each
// is refused at validation, naming the field.
func TestAttackSpecInjection(t *testing.T) {
	for _, tc := range []struct {
		name, path, jsonPath, value string
	}{
		{"newline in a partition id adds a slurm.conf line", "orchestrator_spec.slurm_spec.partitions.0.id", "orchestrator_spec.slurm_spec.partitions[0].id", "a3u\nNodeName=evil State=IDLE"},
		{"blank in a partition id adds a slurm.conf parameter", "orchestrator_spec.slurm_spec.partitions.0.id", "orchestrator_spec.slurm_spec.partitions[0].id", "a3u AllowGroups=ALL"},
		{"carriage return in a partition id", "orchestrator_spec.slurm_spec.partitions.0.id", "orchestrator_spec.slurm_spec.partitions[0].id", "a3u\rNodeName=evil"},
		{"newline in a pool id", "node_pools.1.id", "node_pools[1].id", "a3u\nNodeName=evil"},
		{"comma in a pool id adds a feature", "node_pools.1.id", "node_pools[1].id", "a3u,evil"},
		{"zone walks the URL path", "node_pools.1.zone", "node_pools[1].zone", "us-central1-a/../../x"},
		{"zone with a longer suffix", "node_pools.1.zone", "node_pools[1].zone", "us-central1-abc"},
		{"zone with a query", "node_pools.1.zone", "node_pools[1].zone", "us-central1-a?x=y"},
		{"home storage as mount options", "orchestrator_spec.slurm_spec.home_directory_storage", "orchestrator_spec.slurm_spec.home_directory_storage", "-oexec,suid:/x"},
		{"project walks the URL path", "name", "name", "projects/flexslurm-demo%2F..%2Fx/locations/us-central1/modelDevelopmentClusters/"},
		{"network walks the URL path", "network.network", "network.network", "projects/flexslurm-demo/global/networks/default/../../../evil/global/networks/x"},
		{"unicode line separator in a partition id", "orchestrator_spec.slurm_spec.partitions.0.id", "orchestrator_spec.slurm_spec.partitions[0].id", "a3u\u2028NodeName=evil"},
		{"NUL in the display name", "display_name", "display_name", "flexvm\x00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused(t, tc.path, tc.jsonPath, tc.value)
		})
	}
}
