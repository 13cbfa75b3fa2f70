package instancetemplate

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
)

const image = "projects/schedmd-slurm-public/global/images/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20251112"

func settings() nodeconfig.Settings {
	return nodeconfig.Settings{
		Image:          image,
		ServiceAccount: "flexslurm-node@p.iam.gserviceaccount.com",
		ConfServer:     "flexvm-controller",
		MungeKeySecret: "projects/p/secrets/flexvm-munge-key/versions/latest",
		Home:           nodeconfig.Mount{Type: nodeconfig.MountNFS, Source: "10.0.0.2:/home", Dir: "/home"},
		Topics:         nodeconfig.Topics{Jobs: "job-pending", Health: "health-failure"},
	}
}

func example(t *testing.T) (*spec.Cluster, spec.NodePool) {
	t.Helper()
	c, err := spec.Load("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.Pool("a3u")
	if !ok {
		t.Fatal("no pool a3u in the example")
	}
	return c, *p
}

func TestBuildFlexStartPool(t *testing.T) {
	c, p := example(t)
	got, err := Build(c, p, settings())
	if err != nil {
		t.Fatal(err)
	}
	no := false
	cfg, _ := settings().Config(c.ID, c.Project, "a3u", 8).Encode()
	want := Template{Name: got.Name, Description: "flexslurm node pool a3u of cluster flexvm", Properties: Properties{
		Description: "flexslurm node pool a3u of cluster flexvm",
		MachineType: "a3-ultragpu-8g",
		Disks: []Disk{{Boot: true, AutoDelete: true, Type: "PERSISTENT",
			InitializeParams: InitializeParams{DiskType: p.BootDisk.Type, DiskSizeGb: int64(p.BootDisk.SizeGB), SourceImage: image}}},
		NetworkInterfaces: []NetworkInterface{{Network: c.Network.Network, Subnetwork: c.Network.Subnetwork}},
		ServiceAccounts:   []ServiceAccount{{Email: "flexslurm-node@p.iam.gserviceaccount.com", Scopes: []string{CloudPlatformScope}}},
		Scheduling: Scheduling{ProvisioningModel: "FLEX_START", InstanceTerminationAction: "DELETE",
			MaxRunDuration: &Duration{Seconds: int64(p.ComputeRunDuration().Seconds())}, OnHostMaintenance: "TERMINATE", AutomaticRestart: &no},
		ReservationAffinity: &ReservationAffinity{ConsumeReservationType: "NO_RESERVATION"},
		Labels:              map[string]string{"managed-by": "flexslurm", "flexslurm-cluster": "flexvm", "flexslurm-pool": "a3u"},
		Metadata: &Metadata{Items: []MetadataItem{
			{Key: nodeconfig.AttrConfig, Value: cfg},
			{Key: nodeconfig.AttrStartupScript, Value: nodeconfig.StartupScript("")},
		}},
	}}
	if p.EnablePublicIPs {
		want.Properties.NetworkInterfaces[0].AccessConfigs = []AccessConfig{{Name: "External NAT", Type: "ONE_TO_ONE_NAT"}}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("template (-want +got):\n%s", d)
	}
	if !strings.HasPrefix(got.Name, "fs-flexvm-a3u-") {
		t.Errorf("name %s", got.Name)
	}
	// What is sent is exactly what is hashed: int64s as JSON strings, as
	// Compute's REST API writes them.
	if js := string(got.JSON()); !strings.Contains(js, `"maxRunDuration":{"seconds":"`) || !strings.Contains(js, `"diskSizeGb":"`) {
		t.Errorf("JSON: %s", js)
	}
}

func TestBuildNameFollowsTheBody(t *testing.T) {
	c, p := example(t)
	base, err := Build(c, p, settings())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Build(c, p, settings())
	if again.Name != base.Name {
		t.Fatalf("same inputs, names %s and %s", base.Name, again.Name)
	}
	for what, edit := range map[string]func(*spec.Cluster, *spec.NodePool, *nodeconfig.Settings){
		"image": func(_ *spec.Cluster, _ *spec.NodePool, s *nodeconfig.Settings) { s.Image += "-2" },
		"pool image": func(_ *spec.Cluster, _ *spec.NodePool, s *nodeconfig.Settings) {
			s.PoolImages = map[string]string{"a3u": image + "-3"}
		},
		"service account": func(_ *spec.Cluster, _ *spec.NodePool, s *nodeconfig.Settings) {
			s.ServiceAccount = "other-node@p.iam.gserviceaccount.com"
		},
		"conf server": func(_ *spec.Cluster, _ *spec.NodePool, s *nodeconfig.Settings) { s.ConfServer = "ctl2" },
		"binary":      func(_ *spec.Cluster, _ *spec.NodePool, s *nodeconfig.Settings) { s.BinaryURL = "gs://bkt/flexslurm" },
		"disk size":   func(_ *spec.Cluster, p *spec.NodePool, _ *nodeconfig.Settings) { p.BootDisk.SizeGB++ },
		"public ip": func(_ *spec.Cluster, p *spec.NodePool, _ *nodeconfig.Settings) {
			p.EnablePublicIPs = !p.EnablePublicIPs
		},
		"run duration": func(_ *spec.Cluster, p *spec.NodePool, _ *nodeconfig.Settings) { p.FlexStartMaxDuration /= 2 },
		"subnetwork":   func(c *spec.Cluster, _ *spec.NodePool, _ *nodeconfig.Settings) { c.Network.Subnetwork += "x" },
	} {
		c2, p2, s2 := *c, p, settings()
		edit(&c2, &p2, &s2)
		got, err := Build(&c2, p2, s2)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if got.Name == base.Name {
			t.Errorf("%s changed the body but not the name %s", what, got.Name)
		}
	}
}

func TestBuildAttachedGPUs(t *testing.T) {
	c, p := example(t)
	p.ID = "t4"
	p.MachineSpec = spec.MachineSpec{MachineType: "n1-standard-8", AcceleratorType: "NVIDIA_TESLA_T4", AcceleratorCount: 2}
	got, err := Build(c, p, settings())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Accelerator{{AcceleratorType: "nvidia-tesla-t4", AcceleratorCount: 2}}, got.Properties.GuestAccelerators); d != "" {
		t.Errorf("guest accelerators (-want +got):\n%s", d)
	}
	v, _ := got.Properties.Metadata.Get(nodeconfig.AttrConfig)
	nc, err := nodeconfig.Decode(v)
	if err != nil || nc.GPUCount != 2 {
		t.Errorf("node config %+v, %v", nc, err)
	}
	// Accelerator-optimized: the GPUs come with the machine type.
	_, a3 := example(t)
	bundled, _ := Build(c, a3, settings())
	if len(bundled.Properties.GuestAccelerators) != 0 {
		t.Errorf("a3-ultragpu-8g got guest accelerators %+v", bundled.Properties.GuestAccelerators)
	}
}

func TestBuildRejects(t *testing.T) {
	c, p := example(t)
	s := settings()
	s.Image = "projects/p/global/images/family/f"
	if _, err := Build(c, p, s); err == nil || !strings.Contains(err.Error(), "image") {
		t.Errorf("unresolved family: %v", err)
	}
	p.NodeImage = "projects/mine/global/images/family/gpu"
	if _, err := Build(c, p, settings()); err == nil || !strings.Contains(err.Error(), "pool_images.a3u") {
		t.Errorf("a node_image without its resolved image: %v", err)
	}
	p.NodeImage = ""
	p.MachineSpec.MachineType = "x9-custom"
	if _, err := Build(c, p, settings()); err == nil || !strings.Contains(err.Error(), "x9-custom") {
		t.Errorf("unknown machine: %v", err)
	}
}

func TestResolve(t *testing.T) {
	data, err := os.ReadFile("../../examples/cluster_config.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	var a3u int
	for i := range c.NodePools {
		if c.NodePools[i].ID == "a3u" {
			a3u = i
			c.NodePools[i].NodeImage = "projects/mine/global/images/family/gpu"
		}
	}
	images := map[string]string{
		"projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570": image,
		"projects/mine/global/images/family/gpu":                                                       "projects/mine/global/images/gpu-v7",
	}
	resolver := func(_ context.Context, ref string) (string, error) {
		if img, ok := images[ref]; ok {
			return img, nil
		}
		return "", errors.New("not found")
	}
	in := settings()
	in.Image = "projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570"
	got, err := Resolve(context.Background(), c, in, resolver)
	if err != nil {
		t.Fatal(err)
	}
	want := settings()
	want.PoolImages = map[string]string{"a3u": "projects/mine/global/images/gpu-v7"}
	want.Home.Storage = c.Slurm.HomeDirectoryStorage
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("resolved (-want +got):\n%s", d)
	}
	delete(images, "projects/mine/global/images/family/gpu")
	_, err = Resolve(context.Background(), c, in, resolver)
	path := "node_pools[" + string(rune('0'+a3u)) + "].node_image"
	if err == nil || !strings.Contains(err.Error(), "pool a3u: "+path) {
		t.Errorf("unknown pool image: %v, want the pool and %s", err, path)
	}
}

// TestBuildRecordsTheBuilderVersion: the functions' version is in the
// template's metadata for the node's bootstrap, and a template built by
// another version is another template; a build that knows no version
// records none.
func TestBuildRecordsTheBuilderVersion(t *testing.T) {
	c, p := example(t)
	old := BuilderVersion
	t.Cleanup(func() { BuilderVersion = old })
	BuilderVersion = ""
	none, err := Build(c, p, settings())
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := none.Properties.Metadata.Get(nodeconfig.AttrVersion); ok {
		t.Errorf("no builder version: metadata %s = %q, want none", nodeconfig.AttrVersion, v)
	}
	BuilderVersion = "v1.2.3"
	v1, err := Build(c, p, settings())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := v1.Properties.Metadata.Get(nodeconfig.AttrVersion); v != "v1.2.3" {
		t.Errorf("metadata %s = %q, want v1.2.3", nodeconfig.AttrVersion, v)
	}
	if v1.Name == none.Name {
		t.Errorf("templates of two builder versions share the name %s", v1.Name)
	}
}
