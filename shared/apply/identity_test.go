package apply

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/store"
)

// anySender is a Verifier that would accept any report: what is refused
// below is refused before it is asked.
type anySender struct{ asked *int }

func (a anySender) Verify(_ context.Context, _ string, _ []byte, _ map[string]string, w identity.Want) (identity.Claims, error) {
	*a.asked++
	return identity.Claims{Project: w.Project, Zone: w.Zone, Instance: w.Instance}, nil
}

// TestAttackControllerReportsWithoutController: with no controller VM
// configured (FLEXSLURM_CONTROLLER_VM unset), or without a verifier, every
// report is refused (fail closed), with a reason naming the setting.
func TestAttackControllerReportsWithoutController(t *testing.T) {
	asked := 0
	msg := &event.Message{Data: []byte(`{}`)}
	r := New(Deps{Store: store.NewMemory(time.Now), Project: "p", Identity: anySender{&asked}})
	err := r.ProveController(context.Background(), msg, "c1")
	if !errors.Is(err, identity.ErrRefused) || !strings.Contains(err.Error(), config.EnvControllerVM) {
		t.Fatalf("no controller configured: %v, want a refusal naming %s", err, config.EnvControllerVM)
	}
	r = New(Deps{Store: store.NewMemory(time.Now), Project: "p", ControllerVM: "zones/us-central1-a/instances/ctl"})
	if err := r.ProveController(context.Background(), msg, "c1"); !errors.Is(err, identity.ErrRefused) {
		t.Fatalf("no verifier: %v, want a refusal", err)
	}
	r = New(Deps{Store: store.NewMemory(time.Now), Project: "p", ControllerVM: "zones/us-central1-a/instances/ctl", Identity: anySender{&asked}})
	if err := r.ProveController(context.Background(), msg, "c1"); err != nil || asked != 1 {
		t.Fatalf("configured: %v (verifier asked %d times)", err, asked)
	}
}

// TestAttackControllerVMNamedAsANode: FLEXSLURM_CONTROLLER_VM naming a
// VM of a node's shape (<cluster>-<pool>-<index>-g<gen>), of this cluster
// or another, is refused before any token is asked for: the root of the
// node VM of that name, which a MIG may create, would otherwise sign job
// and power reports as the controller.
func TestAttackControllerVMNamedAsANode(t *testing.T) {
	msg := &event.Message{Data: []byte(`{}`)}
	for _, vm := range []string{
		"zones/us-central1-a/instances/c1-gpu-0-g1",
		"zones/us-central1-a/instances/c1-a3u-12-g7",
		"zones/us-central1-a/instances/c2-gpu-0-g1",
		"projects/other/zones/us-central1-a/instances/c1-gpu-0-g1",
	} {
		asked := 0
		r := New(Deps{Store: store.NewMemory(time.Now), Project: "p", ControllerVM: vm, Identity: anySender{&asked}})
		err := r.ProveController(context.Background(), msg, "c1")
		if !errors.Is(err, identity.ErrRefused) || asked != 0 || !strings.Contains(err.Error(), config.EnvControllerVM) {
			t.Errorf("controller VM %s: %v (verifier asked %d times), want a refusal naming %s before verifying", vm, err, asked, config.EnvControllerVM)
		}
	}
	// Controller names that are no node VM's still work.
	for _, vm := range []string{"zones/us-central1-a/instances/c1-controller", "zones/us-central1-a/instances/ctl", "zones/us-central1-a/instances/c1-ctl-g"} {
		asked := 0
		r := New(Deps{Store: store.NewMemory(time.Now), Project: "p", ControllerVM: vm, Identity: anySender{&asked}})
		if err := r.ProveController(context.Background(), msg, "c1"); err != nil || asked != 1 {
			t.Errorf("controller VM %s: %v (verifier asked %d times), want it verified", vm, err, asked)
		}
	}
}
