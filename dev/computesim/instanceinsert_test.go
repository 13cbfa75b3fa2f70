package computesim

import (
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

func TestInstanceInsert(t *testing.T) {
	e := newEnv(t, Options{})
	zone := "us-central1-a"
	vm := func(name string) *computepb.Instance {
		return &computepb.Instance{
			Name:        proto.String(name),
			MachineType: proto.String("zones/" + zone + "/machineTypes/n1-standard-8"),
			Disks: []*computepb.AttachedDisk{{Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
				InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: proto.String(DebianFamily)}}},
			NetworkInterfaces: []*computepb.NetworkInterface{{Network: proto.String("global/networks/default")}},
			GuestAccelerators: []*computepb.AcceleratorConfig{{AcceleratorType: proto.String("zones/" + zone + "/acceleratorTypes/nvidia-tesla-t4"), AcceleratorCount: proto.Int32(1)}},
			Scheduling:        &computepb.Scheduling{OnHostMaintenance: proto.String("TERMINATE")},
			Labels:            map[string]string{"owner": "someone"},
		}
	}
	insert := func(in *computepb.Instance, tmpl string) error {
		req := &computepb.InsertInstanceRequest{Project: testProject, Zone: zone, InstanceResource: in}
		if tmpl != "" {
			req.SourceInstanceTemplate = proto.String("global/instanceTemplates/" + tmpl)
		}
		return do(e.inst.Insert(e.ctx, req))
	}
	if err := insert(vm("t4-vm"), ""); err != nil {
		t.Fatalf("a valid VM: %v", err)
	}
	got, err := e.inst.Get(e.ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: zone, Instance: "t4-vm"})
	if err != nil || got.GetStatus() != statusRunning || got.GetLabels()["owner"] != "someone" {
		t.Fatalf("inserted VM: %v, %v", got, err)
	}
	wantHTTP(t, insert(vm("t4-vm"), ""), 409, "")
	for name, mutate := range map[string]func(*computepb.Instance){
		"no image": func(in *computepb.Instance) { in.Disks[0].InitializeParams.SourceImage = nil },
		"unknown image": func(in *computepb.Instance) {
			in.Disks[0].InitializeParams.SourceImage = proto.String("projects/x/global/images/nope")
		},
		"no boot disk":      func(in *computepb.Instance) { in.Disks = nil },
		"GPUs that migrate": func(in *computepb.Instance) { in.Scheduling = nil },
		"bare machine type": func(in *computepb.Instance) { in.MachineType = proto.String("n1-standard-8") },
		"accelerator-optimized with other GPUs": func(in *computepb.Instance) {
			in.MachineType = proto.String("zones/" + zone + "/machineTypes/a3-highgpu-8g")
		},
	} {
		in := vm("bad-vm")
		mutate(in)
		if err := insert(in, ""); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			wantHTTP(t, err, 400, "")
		}
	}
	// From a template: its properties, with the body's name.
	if err := e.insertTemplate(flexTemplate("tpl", 3600)); err != nil {
		t.Fatal(err)
	}
	if err := insert(&computepb.Instance{Name: proto.String("from-tpl")}, "tpl"); err != nil {
		t.Fatalf("from a template: %v", err)
	}
	got, err = e.inst.Get(e.ctx, &computepb.GetInstanceRequest{Project: testProject, Zone: zone, Instance: "from-tpl"})
	if err != nil || lastSegment(got.GetMachineType()) != "a3-ultragpu-8g" || got.GetDisks()[0].GetInitializeParams().GetSourceImage() != DebianFamily {
		t.Errorf("VM from a template: %v, %v", got, err)
	}
}
