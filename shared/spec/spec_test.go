package spec

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const examplePath = "../../examples/cluster_config.json"

// checkGolden compares got with the golden file, or rewrites it under -update.
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatalf("writing %s: %v", golden, err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading %s: %v (run go test ./shared/spec -update to create it)", golden, err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", golden, diff)
	}
}

func goldenName(jsonPath string) string {
	return strings.TrimSuffix(jsonPath, ".json") + ".golden"
}

// checkRoundTrip asserts that the effective JSON parses back to the same
// cluster and renders to the same bytes.
func checkRoundTrip(t *testing.T, c *Cluster, effective []byte) {
	t.Helper()
	again, err := Parse(effective)
	if err != nil {
		t.Fatalf("Parse(EffectiveJSON()) failed: %v\n%s", err, effective)
	}
	if diff := cmp.Diff(c, again); diff != "" {
		t.Errorf("Parse(EffectiveJSON()) differs (-first +second):\n%s", diff)
	}
	second, err := again.EffectiveJSON()
	if err != nil {
		t.Fatalf("EffectiveJSON of the re-parsed spec: %v", err)
	}
	if !bytes.Equal(effective, second) {
		t.Errorf("EffectiveJSON is not stable:\nfirst:\n%s\nsecond:\n%s", effective, second)
	}
}

func TestGoodSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good specs found: %v", err)
	}
	cases := map[string]string{"example": examplePath}
	for _, f := range files {
		cases[strings.TrimSuffix(filepath.Base(f), ".json")] = f
	}
	for name, path := range cases {
		t.Run(name, func(t *testing.T) {
			golden := goldenName(path)
			if path == examplePath {
				golden = "testdata/example.golden"
			}
			c, err := Load(path)
			if err != nil {
				t.Fatalf("Load(%s): %v", path, err)
			}
			got, err := c.EffectiveJSON()
			if err != nil {
				t.Fatalf("EffectiveJSON: %v", err)
			}
			checkGolden(t, golden, got)
			checkRoundTrip(t, c, got)
		})
	}
}

func TestBadSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad specs found: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(data)
			if err == nil {
				t.Fatalf("Parse succeeded, want an error; got %+v", c)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Parse error is %T %v, want a *ValidationError with problems", err, err)
			}
			checkGolden(t, goldenName(path), []byte(err.Error()+"\n"))
		})
	}
}

// TestGoldensHaveInputs catches golden files left behind by a renamed or
// deleted input.
func TestGoldensHaveInputs(t *testing.T) {
	goldens, _ := filepath.Glob("testdata/*/*.golden")
	for _, g := range goldens {
		if _, err := os.Stat(strings.TrimSuffix(g, ".golden") + ".json"); err != nil {
			t.Errorf("%s has no matching .json input", g)
		}
	}
}

func TestExample(t *testing.T) {
	c, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	want := &Cluster{
		ID:          "flexvm",
		Project:     "flexslurm-demo",
		Region:      "us-central1",
		DisplayName: "flexvm",
		Name:        "projects/flexslurm-demo/locations/us-central1/modelDevelopmentClusters/",
		Network: Network{
			Network:    "projects/flexslurm-demo/global/networks/default",
			Subnetwork: "projects/flexslurm-demo/regions/us-central1/subnetworks/default",
		},
		NodePools: []NodePool{
			{
				ID:                "login",
				MachineSpec:       MachineSpec{MachineType: "n2-standard-8"},
				ProvisioningModel: ProvisioningOnDemand,
				MinNodeCount:      1,
				MaxNodeCount:      1,
				Zone:              "us-central1-a",
				EnablePublicIPs:   true,
				BootDisk:          BootDisk{Type: "pd-standard", SizeGB: 120},
			},
			{
				ID:                   "a3u",
				MachineSpec:          MachineSpec{MachineType: "a3-ultragpu-8g", AcceleratorType: "NVIDIA_H200_141GB", AcceleratorCount: 8},
				ProvisioningModel:    ProvisioningFlexStart,
				FlexStartMaxDuration: 7 * 24 * time.Hour,
				MinNodeCount:         1,
				MaxNodeCount:         3,
				Zone:                 "us-central1-a",
				EnablePublicIPs:      true,
				BootDisk:             BootDisk{Type: "hyperdisk-balanced", SizeGB: 400},
			},
		},
		Slurm: SlurmSpec{
			HomeDirectoryStorage: "projects/flexslurm-demo/locations/us-central1-a/instances/home",
			Partitions:           []Partition{{ID: "a3u", NodePoolIDs: []string{"a3u"}}},
			LoginNodePoolID:      "login",
		},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Load(%s) mismatch (-want +got):\n%s", examplePath, diff)
	}
}

func TestAccessors(t *testing.T) {
	c, err := Load("testdata/good/short_duration.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "train2" || c.Project != "flexslurm-demo" || c.Region != "europe-west4" {
		t.Errorf("identity = %q/%q/%q, want train2/flexslurm-demo/europe-west4", c.ID, c.Project, c.Region)
	}

	var flexIDs []string
	for _, p := range c.FlexPools() {
		flexIDs = append(flexIDs, p.ID)
	}
	if diff := cmp.Diff([]string{"a3m-short", "a3u"}, flexIDs); diff != "" {
		t.Errorf("FlexPools ids (-want +got):\n%s", diff)
	}

	tests := []struct {
		pool       string
		flex       bool
		maxDur     time.Duration
		computeDur time.Duration
		partitions []string
	}{
		{pool: "login", flex: false, maxDur: 0, computeDur: 0, partitions: nil},
		{pool: "a3m-short", flex: true, maxDur: 45 * time.Second, computeDur: 600 * time.Second, partitions: []string{"gpu"}},
		{pool: "a3u", flex: true, maxDur: 48 * time.Hour, computeDur: 48 * time.Hour, partitions: []string{"gpu", "a3u"}},
	}
	for _, tt := range tests {
		p, ok := c.Pool(tt.pool)
		if !ok {
			t.Errorf("Pool(%q) not found", tt.pool)
			continue
		}
		if p.ID != tt.pool {
			t.Errorf("Pool(%q).ID = %q", tt.pool, p.ID)
		}
		if got := p.IsFlexStart(); got != tt.flex {
			t.Errorf("Pool(%q).IsFlexStart() = %v, want %v", tt.pool, got, tt.flex)
		}
		if p.FlexStartMaxDuration != tt.maxDur {
			t.Errorf("Pool(%q).FlexStartMaxDuration = %v, want %v", tt.pool, p.FlexStartMaxDuration, tt.maxDur)
		}
		if got := p.ComputeRunDuration(); got != tt.computeDur {
			t.Errorf("Pool(%q).ComputeRunDuration() = %v, want %v", tt.pool, got, tt.computeDur)
		}
		if diff := cmp.Diff(tt.partitions, c.PartitionsForPool(tt.pool)); diff != "" {
			t.Errorf("PartitionsForPool(%q) (-want +got):\n%s", tt.pool, diff)
		}
	}
	if _, ok := c.Pool("nope"); ok {
		t.Error(`Pool("nope") found a pool`)
	}

	// Pool points into the cluster, so callers can read the live entry.
	p, _ := c.Pool("a3u")
	if p != &c.NodePools[2] {
		t.Error("Pool does not point into Cluster.NodePools")
	}
}

func TestDefaultDuration(t *testing.T) {
	c, err := Load("testdata/good/default_duration.json")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Pool("a4")
	if p.FlexStartMaxDuration != DefaultFlexStartMaxDuration || p.ComputeRunDuration() != DefaultFlexStartMaxDuration {
		t.Errorf("a4: FlexStartMaxDuration %v, ComputeRunDuration %v; want both %v",
			p.FlexStartMaxDuration, p.ComputeRunDuration(), DefaultFlexStartMaxDuration)
	}
}

func TestDurationBounds(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "29s", wantErr: true},
		{in: "30s", want: 30 * time.Second},
		{in: "599s", want: 599 * time.Second},
		{in: "604800s", want: 604800 * time.Second},
		{in: "604801s", wantErr: true},
		{in: "0s", wantErr: true},
		{in: "-60s", wantErr: true},
		{in: "60", wantErr: true},
		{in: "1m", wantErr: true},
		{in: " 60s", wantErr: true},
	} {
		data := []byte(strings.Replace(minimalFlexSpec, `"3600s"`, `"`+tt.in+`"`, 1))
		c, err := Parse(data)
		if tt.wantErr {
			if err == nil {
				t.Errorf("%q: Parse succeeded, want an error", tt.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		p, _ := c.Pool("gpu")
		if p.FlexStartMaxDuration != tt.want {
			t.Errorf("%q: FlexStartMaxDuration = %v, want %v", tt.in, p.FlexStartMaxDuration, tt.want)
		}
		if want := max(tt.want, ComputeMinRunDuration); p.ComputeRunDuration() != want {
			t.Errorf("%q: ComputeRunDuration = %v, want %v", tt.in, p.ComputeRunDuration(), want)
		}
	}
}

const minimalFlexSpec = `{
  "display_name": "mini",
  "name": "projects/flexslurm-test/locations/us-east5/modelDevelopmentClusters/",
  "network": { "network": "projects/p/global/networks/default" },
  "node_pools": [
    { "id": "login", "machine_spec": { "machine_type": "n2-standard-4" },
      "scaling_spec": { "min_node_count": 1, "max_node_count": 1 }, "zone": "us-east5-a" },
    { "id": "gpu", "zone": "us-east5-a", "provisioning_model": "FLEX_START",
      "flex_start_max_duration": "3600s", "scaling_spec": { "max_node_count": 2 },
      "machine_spec": { "machine_type": "a3-megagpu-8g", "accelerator_type": "NVIDIA_H100_MEGA_80GB", "accelerator_count": 8 } }
  ],
  "orchestrator_spec": { "slurm_spec": {
    "home_directory_storage": "projects/flexslurm-test/locations/us-east5-a/instances/home",
    "partitions": [ { "id": "gpu", "node_pool_ids": [ "gpu" ] } ],
    "login_node_pool_id": "login" } }
}`

func TestTooLarge(t *testing.T) {
	data := append([]byte(minimalFlexSpec), bytes.Repeat([]byte(" "), MaxSpecBytes)...)
	_, err := Parse(data)
	want := "cluster spec is larger than the 1048576-byte limit (MaxSpecBytes)"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse(%d bytes) error = %v, want %q", len(data), err, want)
	}

	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load(big) error = %v, want it to contain %q", err, want)
	}

	// Exactly at the limit is still parsed.
	atLimit := append([]byte(minimalFlexSpec), bytes.Repeat([]byte(" "), MaxSpecBytes-len(minimalFlexSpec))...)
	if _, err := Parse(atLimit); err != nil {
		t.Fatalf("Parse(%d bytes): %v", len(atLimit), err)
	}
}

func TestDeepNesting(t *testing.T) {
	data := `{"display_name":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	_, err := Parse([]byte(data))
	want := "display_name" + strings.Repeat("[0]", maxDepth-1) + ": JSON is nested deeper than 64 levels"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

func TestLoadErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.json")
	_, err := Load(missing)
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "reading cluster spec "+missing+": ") {
		t.Errorf("Load(missing) = %v, want a wrapped os.ErrNotExist", err)
	}

	_, err = Load("testdata/bad/seed_placeholders.json")
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Load(seed) = %v, want a wrapped *ValidationError", err)
	}
	if !strings.HasPrefix(err.Error(), "parsing cluster spec testdata/bad/seed_placeholders.json: ") {
		t.Errorf("Load(seed) error %q lacks the file context", err)
	}
}

func TestValidationErrorFormat(t *testing.T) {
	ve := &ValidationError{Problems: []Problem{
		{Path: "node_pools[1].zone", Message: "required field is missing"},
		{Message: "whole-document problem"},
	}}
	want := "node_pools[1].zone: required field is missing\nwhole-document problem"
	if got := ve.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestSyntaxErrorsSayLineAndColumn: a JSON syntax error names the line and
// column of the offending byte, as an editor counts them.
func TestSyntaxErrorsSayLineAndColumn(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{\n \"id\": x}", "line 2, column 8"},
		{"{\n  \"id\": \"x\",\n  \"node_pools\": [\n   {\"id\": \"a\",,}\n  ]\n}\n", "line 4, column 15"},
		{"{\n \"id\": \"x\",\n \"a\": tru }", "line 3, column 10"},
		{"{\"id\": \"x\"} x", "line 1, column 13"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error at %s", tc.in, err, tc.want)
		}
	}
}
