package computesim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"cloud.google.com/go/compute/metadata"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	secretmanager "google.golang.org/api/secretmanager/v1"
	"google.golang.org/protobuf/proto"
)

// bootVM creates VM pool-0 from a template carrying attribute
// flexslurm-node and a service account.
func bootVM(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, Options{ProjectNumber: "4242"})
	tpl := flexTemplate("tpl", 7200)
	tpl.Properties.Metadata.Items = append(tpl.Properties.Metadata.Items,
		&computepb.Items{Key: proto.String("flexslurm-node"), Value: proto.String(`{"version":1}`)})
	tpl.Properties.ServiceAccounts = []*computepb.ServiceAccount{{
		Email: proto.String("node@proj.iam.gserviceaccount.com"), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"},
	}}
	if err := e.insertTemplate(tpl); err != nil {
		t.Fatal(err)
	}
	if err := e.insertMIG("pool", "tpl", "DO_NOTHING"); err != nil {
		t.Fatal(err)
	}
	if err := e.insertRR("pool", namedRR("rr", 0, "pool-0"), ""); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	e.advance(0)
	if _, err := e.getInstance("pool-0"); err != nil {
		t.Fatalf("VM pool-0 not created: %v", err)
	}
	return e
}

// TestMetadataServerAnswersTheGoClient reads a VM's identity, attributes
// and token through cloud.google.com/go/compute/metadata, as the node
// bootstrap does, from the VM's own listener.
func TestMetadataServerAnswersTheGoClient(t *testing.T) {
	e := bootVM(t)
	tokens := NewTokens()
	ms, err := e.sim.StartMetadataServer(testZone, "pool-0", "127.0.0.1:0", tokens)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	t.Setenv("GCE_METADATA_HOST", ms.Addr())
	ctx := context.Background()
	c := metadata.NewClient(nil)
	if !c.OnGCEWithContext(ctx) {
		t.Error("OnGCE is false")
	}
	got := map[string]string{}
	for k, f := range map[string]func(context.Context) (string, error){
		"name": c.InstanceNameWithContext, "zone": c.ZoneWithContext, "project": c.ProjectIDWithContext,
		"number": c.NumericProjectIDWithContext, "hostname": c.HostnameWithContext, "id": c.InstanceIDWithContext,
		"ip": c.InternalIPWithContext,
	} {
		v, err := f(ctx)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		got[k] = v
	}
	in, _ := e.getInstance("pool-0")
	want := map[string]string{"name": "pool-0", "zone": testZone, "project": testProject, "number": "4242",
		"hostname": "pool-0." + testZone + ".c." + testProject + ".internal", "id": strconv.FormatUint(in.GetId(), 10),
		"ip": in.GetNetworkInterfaces()[0].GetNetworkIP()}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("identity (-want +got):\n%s", d)
	}
	if v, err := c.InstanceAttributeValueWithContext(ctx, "flexslurm-node"); err != nil || v != `{"version":1}` {
		t.Errorf("attribute flexslurm-node = %q, %v", v, err)
	}
	var nd metadata.NotDefinedError
	if _, err := c.InstanceAttributeValueWithContext(ctx, "nope"); !errors.As(err, &nd) {
		t.Errorf("missing attribute: %v, want NotDefinedError", err)
	}
	keys, err := c.InstanceAttributesWithContext(ctx)
	if d := cmp.Diff([]string{"startup-script", "flexslurm-node", "created-by"}, keys); err != nil || d != "" {
		t.Errorf("attributes (-want +got), %v:\n%s", err, d)
	}
	rec, err := c.GetWithContext(ctx, "instance/attributes/?recursive=true")
	if err != nil || rec == "" || rec[0] != '{' {
		t.Errorf("recursive attributes = %q, %v", rec, err)
	}
	if v, err := c.EmailWithContext(ctx, "default"); err != nil || v != "node@proj.iam.gserviceaccount.com" {
		t.Errorf("email = %q, %v", v, err)
	}
	tok, err := oauth2TokenFromMetadata(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if email, ok := tokens.Valid(tok); !ok || email != "node@proj.iam.gserviceaccount.com" {
		t.Errorf("token %q not recorded for the VM's service account (%q, %v)", tok, email, ok)
	}

	// Without the header: 403 with the header set on the response.
	resp, err := http.Get("http://" + ms.Addr() + "/computeMetadata/v1/instance/service-accounts/default/token")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("Metadata-Flavor") != "Google" {
		t.Errorf("request without Metadata-Flavor: %d %q, header %q", resp.StatusCode, body, resp.Header.Get("Metadata-Flavor"))
	}

	// A request relayed by a proxy (X-Forwarded-For) is refused too.
	req, _ := http.NewRequest(http.MethodGet, "http://"+ms.Addr()+"/computeMetadata/v1/instance/name", nil)
	req.Header.Set("Metadata-Flavor", "Google")
	req.Header.Set("X-Forwarded-For", "10.0.0.9")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("request with X-Forwarded-For: %v, %v; want 403", resp, err)
	} else {
		resp.Body.Close()
	}

	// Once the VM is gone, nothing is defined.
	if err := do(e.inst.Delete(e.ctx, &computepb.DeleteInstanceRequest{Project: testProject, Zone: testZone, Instance: "pool-0"})); err != nil {
		t.Fatal(err)
	}
	e.advance(0)
	if _, err := c.InstanceNameWithContext(ctx); !errors.As(err, &nd) {
		t.Errorf("name of a deleted VM: %v, want NotDefinedError", err)
	}
}

func oauth2TokenFromMetadata(ctx context.Context, c *metadata.Client) (string, error) {
	s, err := c.GetWithContext(ctx, "instance/service-accounts/default/token")
	if err != nil {
		return "", err
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := jsonUnmarshal(s, &tok); err != nil {
		return "", err
	}
	if tok.TokenType != "Bearer" || tok.ExpiresIn <= 0 || tok.ExpiresIn > 3599 {
		return "", errors.New("token response " + s)
	}
	return tok.AccessToken, nil
}

// TestSecretManagerAccess reads a version with the official REST client
// and a token from a VM's metadata server; a missing secret is a 404
// googleapi.Error and a foreign token 401.
func TestSecretManagerAccess(t *testing.T) {
	tokens := NewTokens()
	sm := &SecretManager{Tokens: tokens}
	srv := newHTTPServer(t, sm)
	key := []byte{0, 1, 2, 0xff, 'k'}
	if n, err := sm.AddVersion("projects/proj/secrets/munge", key); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	tok, _ := tokens.mint("node@proj.iam.gserviceaccount.com")
	ctx := context.Background()
	svc, err := secretmanager.NewService(ctx, option.WithEndpoint(srv+"/"),
		option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok, TokenType: "Bearer"})))
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.Projects.Secrets.Versions.Access("projects/proj/secrets/munge/versions/latest").Context(ctx).Do()
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "projects/proj/secrets/munge/versions/1" || r.Payload.Data != "AAEC/2s=" || r.Payload.DataCrc32c == 0 {
		t.Errorf("response %+v %+v", r, r.Payload)
	}
	_, err = svc.Projects.Secrets.Versions.Access("projects/proj/secrets/other/versions/1").Context(ctx).Do()
	if code := apiCode(err); code != 404 {
		t.Errorf("missing secret: %v, want 404", err)
	}
	bad, _ := secretmanager.NewService(ctx, option.WithEndpoint(srv+"/"),
		option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "stolen", TokenType: "Bearer"})))
	_, err = bad.Projects.Secrets.Versions.Access("projects/proj/secrets/munge/versions/1").Context(ctx).Do()
	if code := apiCode(err); code != 401 {
		t.Errorf("unknown token: %v, want 401", err)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func newHTTPServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func apiCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
