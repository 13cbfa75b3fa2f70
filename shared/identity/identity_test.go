package identity_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/identity"
)

const (
	project = "proj"
	cluster = "c1"
	zone    = "us-central1-a"
	vmA     = "c1-a3u-0-g3"
	vmB     = "c1-a3u-1-g1"
	ctl     = "c1-controller"
)

var payload = []byte(`{"version":1,"type":"health.failure","cluster":"c1","node":"c1-a3u-0","generation":3,"verdict":"FAIL"}`)

type fixture struct {
	iss *computesim.Issuer
	v   *identity.Google
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	iss, err := computesim.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss)
	t.Cleanup(srv.Close)
	v, err := identity.NewGoogle(context.Background(), srv.URL+computesim.CertsPath)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{iss: iss, v: v}
}

func vm(name, z, p string) computesim.IdentityVM {
	return computesim.IdentityVM{Project: p, ProjectNumber: "123", Zone: z, Name: name, ID: 42, Created: time.Now(), Email: "node@proj.iam.gserviceaccount.com"}
}

// token is vm's full-format token for (cluster, data), as attributes.
func (f *fixture) token(t *testing.T, v computesim.IdentityVM, cl string, data []byte) map[string]string {
	t.Helper()
	tok, err := f.iss.Token(v, identity.Audience(cl, data), true)
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := identity.Attributes(tok)
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

func signed(t *testing.T, iss *computesim.Issuer, claims map[string]any) map[string]string {
	t.Helper()
	tok, err := iss.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := identity.Attributes(tok)
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

func fullClaims(aud string, exp time.Time, name string) map[string]any {
	return map[string]any{
		"iss": "https://accounts.google.com", "aud": aud, "sub": "1", "azp": "1",
		"iat": exp.Add(-time.Hour).Unix(), "exp": exp.Unix(),
		"google": map[string]any{"compute_engine": map[string]any{
			"project_id": project, "project_number": "123", "zone": zone, "instance_id": "42", "instance_name": name,
		}},
	}
}

var (
	nodeWant = identity.Want{Project: project, Zone: zone, Instance: vmA, Role: "node"}
	ctlWant  = identity.Want{Project: project, Zone: zone, Instance: ctl, Role: "controller"}
)

func refused(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, identity.ErrRefused) {
		t.Fatalf("want a refusal (ErrRefused), got %v", err)
	}
	if strings.Contains(err.Error(), "eyJ") {
		t.Fatalf("the refusal quotes the token: %v", err)
	}
}

func TestGenuineReportIsAccepted(t *testing.T) {
	f := newFixture(t)
	attrs := f.token(t, vm(vmA, zone, project), cluster, payload)
	if len(attrs) < 2 {
		t.Fatalf("a full-format token of %d attributes: want it split into chunks of at most %d bytes", len(attrs), identity.MaxChunkBytes)
	}
	c, err := f.v.Verify(context.Background(), cluster, payload, attrs, nodeWant)
	if err != nil {
		t.Fatal(err)
	}
	if c.Instance != vmA || c.Zone != zone || c.Project != project || c.InstanceID != "42" {
		t.Fatalf("claims %+v", c)
	}
	// Any VM of the node, when the report names none.
	if _, err := f.v.Verify(context.Background(), cluster, payload, attrs, identity.Want{Project: project, Zone: zone, NodeOf: "c1-a3u-0", Role: "node"}); err != nil {
		t.Fatal(err)
	}
	// A VM its MIG named from the node's base name is the node's too.
	ma := f.token(t, vm("c1-a3u-0-g3-x7k2", zone, project), cluster, payload)
	if _, err := f.v.Verify(context.Background(), cluster, payload, ma, identity.Want{Project: project, Zone: zone, NodeOf: "c1-a3u-0", Role: "node"}); err != nil {
		t.Fatalf("a MIG-named VM of the node: %v", err)
	}
	ca := f.token(t, vm(ctl, zone, project), cluster, payload)
	if _, err := f.v.Verify(context.Background(), cluster, payload, ca, ctlWant); err != nil {
		t.Fatal(err)
	}
}

func TestAttackForgedOrMissingToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	aud := identity.Audience(cluster, payload)
	other, err := computesim.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	genuine := f.token(t, vm(vmA, zone, project), cluster, payload)
	tok, _ := identity.Token(genuine)
	parts := strings.Split(tok, ".")
	forgedBody := strings.Replace(tok, parts[1], strings.TrimRight(parts[1], "A")+"B", 1)
	cases := map[string]map[string]string{
		"no token":               nil,
		"unrelated attributes":   {"type": "health.failure", "cluster": cluster},
		"garbage":                {"identity.0": "not-a-jwt"},
		"signed by another key":  signed(t, other, fullClaims(aud, time.Now().Add(time.Hour), vmA)),
		"payload claims altered": {"identity.0": forgedBody[:min(len(forgedBody), 1024)], "identity.1": forgedBody[min(len(forgedBody), 1024):]},
		"alg none":               {"identity.0": parts[0][:0] + "eyJhbGciOiJub25lIn0." + parts[1] + "."},
		"expired":                signed(t, f.iss, fullClaims(aud, time.Now().Add(-time.Minute), vmA)),
		"issuer not Google": signed(t, f.iss, func() map[string]any {
			c := fullClaims(aud, time.Now().Add(time.Hour), vmA)
			c["iss"] = "https://evil.example"
			return c
		}()),
		"no compute_engine claims (format standard)": func() map[string]string {
			tok, err := f.iss.Token(vm(vmA, zone, project), aud, false)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := identity.Attributes(tok)
			return a
		}(),
		"chunk missing": func() map[string]string {
			a := map[string]string{}
			for k, v := range genuine {
				a[k] = v
			}
			delete(a, "identity.0")
			return a
		}(),
		"chunk out of range":       {"identity.0": tok[:1024], "identity.7": tok[1024:]},
		"chunk name not canonical": {"identity.00": tok},
		"oversized chunk":          {"identity.0": tok + strings.Repeat("A", 1024)},
	}
	for name, attrs := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := f.v.Verify(ctx, cluster, payload, attrs, nodeWant)
			refused(t, err)
		})
	}
}

func TestAttackWrongAudience(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	t.Run("payload swapped under a valid token", func(t *testing.T) {
		attrs := f.token(t, vm(vmA, zone, project), cluster, payload)
		forged := []byte(strings.Replace(string(payload), `"generation":3`, `"generation":3,"drained":true`, 1))
		_, err := f.v.Verify(ctx, cluster, forged, attrs, nodeWant)
		refused(t, err)
	})
	t.Run("token made for another cluster", func(t *testing.T) {
		attrs := f.token(t, vm(vmA, zone, project), "c2", payload)
		_, err := f.v.Verify(ctx, cluster, payload, attrs, nodeWant)
		refused(t, err)
	})
	t.Run("token for another service's audience", func(t *testing.T) {
		tok, err := f.iss.Token(vm(vmA, zone, project), "https://example.com/api", true)
		if err != nil {
			t.Fatal(err)
		}
		attrs, _ := identity.Attributes(tok)
		_, err = f.v.Verify(ctx, cluster, payload, attrs, nodeWant)
		refused(t, err)
	})
}

func TestAttackWrongVM(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cases := []struct {
		name string
		from computesim.IdentityVM
		want identity.Want
	}{
		{"node A's token on a report for node B", vm(vmA, zone, project), identity.Want{Project: project, Zone: zone, Instance: vmB, Role: "node"}},
		{"node A's token on a report naming node B, any generation", vm(vmA, zone, project), identity.Want{Project: project, Zone: zone, NodeOf: "c1-a3u-1", Role: "node"}},
		{"a longer node name sharing the prefix", vm("c1-a3u-10-g1", zone, project), identity.Want{Project: project, Zone: zone, NodeOf: "c1-a3u-1", Role: "node"}},
		{"a longer node name sharing the prefix, named by a MIG", vm("c1-a3u-10-g1-x7k2", zone, project), identity.Want{Project: project, Zone: zone, NodeOf: "c1-a3u-1", Role: "node"}},
		{"another node's MIG-named VM", vm("c1-a3u-0-g1-x7k2", zone, project), identity.Want{Project: project, Zone: zone, NodeOf: "c1-a3u-1", Role: "node"}},
		{"a suffix that is not a MIG's", vm("c1-a3u-1-g1-x7k2z", zone, project), identity.Want{Project: project, Zone: zone, NodeOf: "c1-a3u-1", Role: "node"}},
		{"previous generation's VM", vm("c1-a3u-0-g2", zone, project), nodeWant},
		{"wrong zone", vm(vmA, "us-central1-b", project), nodeWant},
		{"wrong project (same VM name elsewhere)", vm(vmA, zone, "attacker"), nodeWant},
		{"node token on a controller report", vm(vmA, zone, project), ctlWant},
		{"controller token on a node report", vm(ctl, zone, project), nodeWant},
		{"nothing to match against", vm(vmA, zone, project), identity.Want{Project: project, Role: "controller"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			attrs := f.token(t, tc.from, cluster, payload)
			_, err := f.v.Verify(ctx, cluster, payload, attrs, tc.want)
			refused(t, err)
		})
	}
}

func TestCertsUnavailableIsRetried(t *testing.T) {
	iss, err := computesim.NewIssuer()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(iss)
	srv.Close()
	v, err := identity.NewGoogle(context.Background(), srv.URL+computesim.CertsPath)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := iss.Token(vm(vmA, zone, project), identity.Audience(cluster, payload), true)
	attrs, _ := identity.Attributes(tok)
	_, err = v.Verify(context.Background(), cluster, payload, attrs, nodeWant)
	if !errors.Is(err, identity.ErrUnavailable) || errors.Is(err, identity.ErrRefused) {
		t.Fatalf("certificates unreachable: want ErrUnavailable (retried), got %v", err)
	}
}

func TestParseVM(t *testing.T) {
	v, err := identity.ParseVM("zones/us-central1-a/instances/c1-controller", "p")
	if err != nil || v != (identity.VM{Project: "p", Zone: "us-central1-a", Name: "c1-controller"}) {
		t.Fatalf("%+v %v", v, err)
	}
	if v, err := identity.ParseVM("projects/q/zones/us-central1-a/instances/ctl", "p"); err != nil || v.Project != "q" {
		t.Fatalf("%+v %v", v, err)
	}
	for _, bad := range []string{"", "c1-controller", "zones/us-central1-a/instances/", "zones/US/instances/x", "zones/us-central1-a/instances/x\ny", "zones/a/b/instances/x"} {
		if _, err := identity.ParseVM(bad, "p"); err == nil {
			t.Errorf("ParseVM(%q) accepted", bad)
		}
	}
}

// TestWantZones: a multi-zone pool's node may be in any of the pool's
// zones (Want.Zones); a token of a zone outside them is refused, and
// without Zones only Want.Zone matches, as before.
func TestWantZones(t *testing.T) {
	claims := func(zone string) identity.Claims {
		return identity.Claims{Project: "p", Zone: zone, Instance: "c1-gpu-0-g1"}
	}
	multi := identity.Want{Project: "p", Zone: "us-central1-a", Zones: []string{"us-central1-a", "us-central1-b"}, Instance: "c1-gpu-0-g1", Role: "node"}
	single := identity.Want{Project: "p", Zone: "us-central1-a", Instance: "c1-gpu-0-g1", Role: "node"}
	for _, tc := range []struct {
		name string
		want identity.Want
		zone string
		ok   bool
	}{
		{"multi-zone pool, its other zone", multi, "us-central1-b", true},
		{"multi-zone pool, its home zone", multi, "us-central1-a", true},
		{"multi-zone pool, a zone it does not name", multi, "us-central1-c", false},
		{"single-zone pool, another zone", single, "us-central1-b", false},
	} {
		err := tc.want.Match(claims(tc.zone))
		if (err == nil) != tc.ok {
			t.Errorf("%s: Match = %v, want ok %t", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, identity.ErrRefused) {
			t.Errorf("%s: %v is not ErrRefused", tc.name, err)
		}
	}
}
