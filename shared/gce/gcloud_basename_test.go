package gce_test

import (
	"testing"
)

// TestGcloudMIGWithoutBaseInstanceName: gcloud's `instance-groups managed
// create` sends no baseInstanceName unless --base-instance-name is given
// (googlecloudsdk surface/compute/instance_groups/managed/create.py), and
// Compute accepts such a MIG, naming its VMs from a prefix of the MIG's
// name. The simulator must accept it too.
func TestGcloudMIGWithoutBaseInstanceName(t *testing.T) {
	gs := newRecordedSim(t)
	g := newGcloud(t, gs.url)
	g.run("beta", "compute", "instance-templates", "create", gTemplate,
		"--machine-type=a3-ultragpu-8g", "--accelerator=type=nvidia-h200-141gb,count=8",
		"--provisioning-model=FLEX_START", "--instance-termination-action=DELETE", "--max-run-duration=7200s",
		"--maintenance-policy=TERMINATE", "--no-restart-on-failure", "--reservation-affinity=none",
		"--image-family=debian-12", "--image-project=debian-cloud", "--network=default", "--no-address")
	mig := one(t, g.run("compute", "instance-groups", "managed", "create", gMIG, "--zone="+zone,
		"--template="+gTemplate, "--size=0", "--default-action-on-vm-failure=do-nothing"))
	sent, ok := gs.first("POST", "/compute/v1/projects/"+project+"/zones/"+zone+"/instanceGroupManagers")
	if !ok {
		t.Fatal("gcloud sent no instanceGroupManagers.insert")
	}
	if body, _ := sent.body.(map[string]any); body == nil || body["baseInstanceName"] != nil {
		t.Fatalf("gcloud's insert body %v: want one without baseInstanceName (else this test proves nothing)", sent.body)
	}
	if at(mig, "name") != gMIG || at(mig, "baseInstanceName") != gMIG {
		t.Errorf("MIG as gcloud printed it: %v; want baseInstanceName %q deduced from the name", mig, gMIG)
	}
}
