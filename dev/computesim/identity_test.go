package computesim

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"cloud.google.com/go/compute/metadata"

	"github.com/flexslurm/flexslurm/shared/identity"
)

// TestIdentityTokenVerifiesWithIdtoken fetches a VM's identity token from
// its metadata server as a node does (identity.Signer, through
// cloud.google.com/go/compute/metadata) and verifies it with Google's
// idtoken against the simulator's JWKS (the certs URL override the local
// functions use): the claims are the VM's.
func TestIdentityTokenVerifiesWithIdtoken(t *testing.T) {
	e := bootVM(t)
	ms, err := e.sim.StartMetadataServer(testZone, "pool-0", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	t.Setenv("GCE_METADATA_HOST", ms.Addr())
	ctx := context.Background()
	data := []byte(`{"version":1}`)
	attrs, err := identity.Signer{Client: metadata.NewClient(nil)}.Sign(ctx, "c1", data, map[string]string{"type": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if attrs["type"] != "x" {
		t.Errorf("Sign dropped the message's attributes: %v", attrs)
	}
	v, err := identity.NewGoogle(ctx, newHTTPServer(t, e.sim)+CertsPath)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := e.getInstance("pool-0")
	c, err := v.Verify(ctx, "c1", data, attrs, identity.Want{Project: testProject, Zone: testZone, Instance: "pool-0", Role: "node"})
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Claims{Project: testProject, ProjectNumber: "4242", Zone: testZone, Instance: "pool-0", InstanceID: strconv.FormatUint(in.GetId(), 10)}
	if c != want {
		t.Errorf("claims %+v, want %+v", c, want)
	}
	// Another payload under the same token is refused.
	if _, err := v.Verify(ctx, "c1", []byte(`{"version":2}`), attrs, identity.Want{Project: testProject, Zone: testZone, Instance: "pool-0", Role: "node"}); !errors.Is(err, identity.ErrRefused) {
		t.Errorf("token reused for another payload: %v", err)
	}
	// No audience: 400, as Compute Engine answers.
	req, _ := http.NewRequest("GET", "http://"+ms.Addr()+"/computeMetadata/v1/instance/service-accounts/default/identity", nil)
	req.Header.Set(MetadataFlavorHeader, MetadataFlavor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("identity without audience: %d, want 400", resp.StatusCode)
	}
}

// TestStaticMetadataServerProvesTheController: a VM outside the
// simulation (the local controller) proves its name and zone the same way.
func TestStaticMetadataServerProvesTheController(t *testing.T) {
	e := newEnv(t, Options{ProjectNumber: "4242"})
	ms, err := e.sim.StartStaticMetadataServer(StaticVM{Zone: testZone, Name: "c1-controller", ID: 7}, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	// Signer.Host, as the controller hooks' metadata_host: no
	// GCE_METADATA_HOST in the environment.
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:9")
	ctx := context.Background()
	data := []byte(`{}`)
	attrs, err := identity.Signer{Host: ms.Addr()}.Sign(ctx, "c1", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewGoogle(ctx, newHTTPServer(t, e.sim)+CertsPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, "c1", data, attrs, identity.Want{Project: testProject, Zone: testZone, Instance: "c1-controller", Role: "controller"}); err != nil {
		t.Fatal(err)
	}
}
