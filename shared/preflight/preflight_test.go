package preflight_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/iam/apiv1/iampb"
	"cloud.google.com/go/resourcemanager/apiv3/resourcemanagerpb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/type/expr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/flexslurm/flexslurm/shared/preflight"
)

const (
	number = "123456789012"
	agent  = "serviceAccount:" + number + "@cloudservices.gserviceaccount.com"
	s3ns   = "serviceAccount:" + number + "@cloudservices.s3ns-system.iam.gserviceaccount.com"
)

// fakeRM is a Resource Manager v3 REST server holding one project.
type fakeRM struct {
	project string
	policy  *iampb.Policy

	mu          sync.Mutex
	getProjects int
	versions    []int32 // requested policy versions, per GetIamPolicy call
}

func (f *fakeRM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, "/v3/projects/")
	if !ok {
		http.Error(w, `{"error":{"code":404,"message":"no such path","status":"NOT_FOUND"}}`, http.StatusNotFound)
		return
	}
	var out proto.Message
	switch {
	case r.Method == http.MethodGet && id == f.project:
		f.mu.Lock()
		f.getProjects++
		f.mu.Unlock()
		out = &resourcemanagerpb.Project{Name: "projects/" + number, ProjectId: f.project}
	case r.Method == http.MethodPost && id == f.project+":getIamPolicy":
		body, _ := io.ReadAll(r.Body)
		var req iampb.GetIamPolicyRequest
		if err := protojson.Unmarshal(body, &req); err != nil || req.GetResource() != "projects/"+f.project {
			http.Error(w, `{"error":{"code":400,"message":"bad request","status":"INVALID_ARGUMENT"}}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.versions = append(f.versions, req.GetOptions().GetRequestedPolicyVersion())
		f.mu.Unlock()
		if f.policy == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":403,"message":"The caller does not have permission","status":"PERMISSION_DENIED"}}`)
			return
		}
		out = f.policy
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":404,"message":"project not found","status":"NOT_FOUND"}}`)
		return
	}
	b, err := protojson.Marshal(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// serve starts a fake for project with policy and returns a client on it.
func serve(t *testing.T, project, universe string, policy *iampb.Policy) (*fakeRM, preflight.Projects) {
	t.Helper()
	f := &fakeRM{project: project, policy: policy}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := preflight.NewClient(context.Background(), universe, option.WithEndpoint(srv.URL), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return f, c
}

func binding(role string, members ...string) *iampb.Binding {
	return &iampb.Binding{Role: role, Members: members}
}

func conditional(role, title, expression string, members ...string) *iampb.Binding {
	b := binding(role, members...)
	b.Condition = &expr.Expr{Title: title, Expression: expression}
	return b
}

func policy(bs ...*iampb.Binding) *iampb.Policy {
	// Bindings for other principals are always present, so that the
	// check has to pick the agent's.
	others := []*iampb.Binding{
		binding(preflight.RoleOwner, "user:admin@example.com"),
		binding(preflight.RoleEditor, "serviceAccount:"+number+"-compute@developer.gserviceaccount.com", "group:ops@example.com"),
		binding("roles/viewer", "serviceAccount:"+number+"@cloudbuild.gserviceaccount.com"),
	}
	return &iampb.Policy{Version: 3, Etag: []byte("BwXyz"), Bindings: append(others, bs...)}
}

func TestCheck(t *testing.T) {
	const expiry = `request.time < timestamp("2027-01-01T00:00:00Z")`
	tests := []struct {
		name     string
		project  string
		opts     preflight.Options
		policy   *iampb.Policy
		wantOK   bool
		wantBy   []string
		missing  []string
		agent    string
		source   string
		statuses []preflight.Status // editor, owner, instanceAdmin, serviceAccountUser
	}{
		{
			name: "editor", policy: policy(binding(preflight.RoleEditor, "user:x@example.com", agent)),
			wantOK: true, wantBy: []string{preflight.RoleEditor}, agent: agent, source: "policy",
			statuses: []preflight.Status{preflight.Granted, preflight.NotGranted, preflight.NotGranted, preflight.NotGranted},
		},
		{
			name: "owner", policy: policy(binding(preflight.RoleOwner, agent)),
			wantOK: true, wantBy: []string{preflight.RoleOwner}, agent: agent, source: "policy",
			statuses: []preflight.Status{preflight.NotGranted, preflight.Granted, preflight.NotGranted, preflight.NotGranted},
		},
		{
			name:   "the pair",
			policy: policy(binding(preflight.RoleInstanceAdmin, agent), binding(preflight.RoleServiceAccountUser, agent)),
			wantOK: true, wantBy: preflight.Pair, agent: agent, source: "policy",
			statuses: []preflight.Status{preflight.NotGranted, preflight.NotGranted, preflight.Granted, preflight.Granted},
		},
		{
			name:    "only instanceAdmin",
			policy:  policy(binding(preflight.RoleInstanceAdmin, agent)),
			missing: []string{preflight.RoleServiceAccountUser}, agent: agent, source: "policy",
			statuses: []preflight.Status{preflight.NotGranted, preflight.NotGranted, preflight.Granted, preflight.NotGranted},
		},
		{
			name:    "only serviceAccountUser",
			policy:  policy(binding(preflight.RoleServiceAccountUser, agent)),
			missing: []string{preflight.RoleInstanceAdmin}, agent: agent, source: "policy",
			statuses: []preflight.Status{preflight.NotGranted, preflight.NotGranted, preflight.NotGranted, preflight.Granted},
		},
		{
			name:    "conditional editor",
			policy:  policy(conditional(preflight.RoleEditor, "until-2027", expiry, agent)),
			missing: preflight.Pair, agent: agent, source: "policy",
			statuses: []preflight.Status{preflight.Conditional, preflight.NotGranted, preflight.NotGranted, preflight.NotGranted},
		},
		{
			name: "conditional and unconditional editor",
			policy: policy(conditional(preflight.RoleEditor, "until-2027", expiry, agent),
				binding(preflight.RoleEditor, agent)),
			wantOK: true, wantBy: []string{preflight.RoleEditor}, agent: agent, source: "policy",
			statuses: []preflight.Status{preflight.Granted, preflight.NotGranted, preflight.NotGranted, preflight.NotGranted},
		},
		{
			name:    "nothing",
			policy:  policy(),
			missing: preflight.Pair, agent: agent, source: "default",
			statuses: []preflight.Status{preflight.NotGranted, preflight.NotGranted, preflight.NotGranted, preflight.NotGranted},
		},
		{
			name:    "S3NS domain discovered",
			project: "s3ns:my-proj",
			opts:    preflight.Options{Universe: "s3nsapis.fr"},
			policy:  policy(binding(preflight.RoleInstanceAdmin, s3ns), binding(preflight.RoleServiceAccountUser, s3ns)),
			wantOK:  true, wantBy: preflight.Pair, agent: s3ns, source: "policy",
			statuses: []preflight.Status{preflight.NotGranted, preflight.NotGranted, preflight.Granted, preflight.Granted},
		},
		{
			name:    "domain given, policy names another",
			opts:    preflight.Options{AgentDomain: "cloudservices.example.test"},
			policy:  policy(binding(preflight.RoleEditor, agent)),
			missing: preflight.Pair, agent: "serviceAccount:" + number + "@cloudservices.example.test", source: "given",
			statuses: []preflight.Status{preflight.NotGranted, preflight.NotGranted, preflight.NotGranted, preflight.NotGranted},
		},
		{
			name:   "agent under the wrong number does not count",
			policy: policy(binding(preflight.RoleEditor, "serviceAccount:999@cloudservices.gserviceaccount.com")),
			// 999's agent is not this project's; the default address is used.
			missing: preflight.Pair, agent: agent, source: "default",
			statuses: []preflight.Status{preflight.NotGranted, preflight.NotGranted, preflight.NotGranted, preflight.NotGranted},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			project := tc.project
			if project == "" {
				project = "my-proj"
			}
			f, c := serve(t, project, tc.opts.Universe, tc.policy)
			o := tc.opts
			o.Project = project
			r, err := preflight.Check(context.Background(), c, o)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if r.OK() != tc.wantOK {
				t.Errorf("OK() = %v, want %v", r.OK(), tc.wantOK)
			}
			if diff := cmp.Diff(tc.wantBy, r.SatisfiedBy); diff != "" {
				t.Errorf("SatisfiedBy (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.missing, r.Missing); diff != "" {
				t.Errorf("Missing (-want +got):\n%s", diff)
			}
			if r.Agent != tc.agent || r.AgentSource != tc.source {
				t.Errorf("agent = %s (%s), want %s (%s)", r.Agent, r.AgentSource, tc.agent, tc.source)
			}
			var got []preflight.Status
			for _, ch := range r.Checks {
				got = append(got, ch.Status)
			}
			if diff := cmp.Diff(tc.statuses, got); diff != "" {
				t.Errorf("statuses of %v (-want +got):\n%s", preflight.Roles, diff)
			}
			if r.ProjectNumber != number || f.getProjects != 1 {
				t.Errorf("project number %q after %d GetProject calls, want %s after 1", r.ProjectNumber, f.getProjects, number)
			}
			if diff := cmp.Diff([]int32{3}, f.versions); diff != "" {
				t.Errorf("requested policy versions (-want +got):\n%s", diff)
			}
			var out strings.Builder
			if err := r.Write(&out); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			for _, role := range tc.missing {
				cmd := "gcloud projects add-iam-policy-binding " + project + " --member=" + tc.agent + " --role=" + role + " --condition=None"
				if !strings.Contains(text, cmd) {
					t.Errorf("output lacks %q:\n%s", cmd, text)
				}
			}
			if tc.wantOK == strings.Contains(text, "MISSING") || tc.wantOK != strings.Contains(text, "OK:") {
				t.Errorf("output verdict does not match OK()=%v:\n%s", tc.wantOK, text)
			}
		})
	}
}

func TestWriteMissing(t *testing.T) {
	_, c := serve(t, "my-proj", "", policy(
		binding(preflight.RoleInstanceAdmin, agent),
		conditional(preflight.RoleEditor, "until-2027", `request.time < timestamp("2027-01-01T00:00:00Z")`, agent)))
	r, err := preflight.Check(context.Background(), c, preflight.Options{Project: "my-proj"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := r.Write(&out); err != nil {
		t.Fatal(err)
	}
	want := `project my-proj (number 123456789012, universe googleapis.com)
Google APIs service agent: serviceAccount:123456789012@cloudservices.gserviceaccount.com (found in the project's IAM policy)

roles held at project level (conditional bindings do not count):
  roles/editor                    NOT granted: only under condition "until-2027: request.time < timestamp(\"2027-01-01T00:00:00Z\")"
  roles/owner                     not granted at project level
  roles/compute.instanceAdmin.v1  granted
  roles/iam.serviceAccountUser    not granted at project level

MISSING: roles/iam.serviceAccountUser
The service agent needs roles/editor (or roles/owner), or both roles/compute.instanceAdmin.v1 and roles/iam.serviceAccountUser.
  roles/iam.serviceAccountUser: attach a service account to the VMs it creates
Grant the missing roles (least privilege) with:
  gcloud projects add-iam-policy-binding my-proj --member=serviceAccount:123456789012@cloudservices.gserviceaccount.com --role=roles/iam.serviceAccountUser --condition=None

Not visible at project level: roles inherited from a folder or the organization,
roles held through a group, and custom roles carrying the same permissions. If the
agent holds the roles that way it may already have access; confirm with Policy
Troubleshooter, e.g.
  gcloud policy-intelligence troubleshoot-policy iam //cloudresourcemanager.googleapis.com/projects/my-proj --principal-email=123456789012@cloudservices.gserviceaccount.com --permission=compute.instances.create
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestWriteOK(t *testing.T) {
	_, c := serve(t, "my-proj", "", policy(binding(preflight.RoleEditor, agent)))
	r, err := preflight.Check(context.Background(), c, preflight.Options{Project: "my-proj"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := r.Write(&out); err != nil {
		t.Fatal(err)
	}
	want := `project my-proj (number 123456789012, universe googleapis.com)
Google APIs service agent: serviceAccount:123456789012@cloudservices.gserviceaccount.com (found in the project's IAM policy)

roles held at project level (conditional bindings do not count):
  roles/editor                    granted
  roles/owner                     not granted at project level
  roles/compute.instanceAdmin.v1  not granted at project level
  roles/iam.serviceAccountUser    not granted at project level

OK: the service agent holds roles/editor unconditionally at project level.
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

func TestProjectNumberGiven(t *testing.T) {
	f, c := serve(t, "my-proj", "", policy(binding(preflight.RoleEditor, agent)))
	r, err := preflight.Check(context.Background(), c, preflight.Options{Project: "my-proj", ProjectNumber: number})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || f.getProjects != 0 {
		t.Errorf("OK() = %v after %d GetProject calls, want true after 0", r.OK(), f.getProjects)
	}
}

func TestCheckErrors(t *testing.T) {
	tests := []struct {
		name    string
		project string
		opts    preflight.Options
		policy  *iampb.Policy
		is      error
		text    string
	}{
		{name: "no project", opts: preflight.Options{}, policy: policy(), is: preflight.ErrInvalid},
		{name: "bad number", opts: preflight.Options{Project: "my-proj", ProjectNumber: "12a"}, policy: policy(), is: preflight.ErrInvalid},
		{name: "bad domain", opts: preflight.Options{Project: "my-proj", AgentDomain: "x@y.com"}, policy: policy(), is: preflight.ErrInvalid},
		{name: "policy denied", opts: preflight.Options{Project: "my-proj"}, policy: nil, text: "resourcemanager.projects.getIamPolicy"},
		{name: "unknown project", opts: preflight.Options{Project: "other"}, policy: policy(), text: "reading project other"},
		{
			name: "S3NS agent not in policy", project: "s3ns:p", opts: preflight.Options{Project: "s3ns:p", Universe: "s3nsapis.fr"},
			policy: policy(), is: preflight.ErrAgentUnknown, text: "cloudservices.s3ns-system.iam.gserviceaccount.com or",
		},
		{
			name: "two agent domains", opts: preflight.Options{Project: "my-proj", Universe: "example.test"},
			policy: policy(binding(preflight.RoleEditor, "serviceAccount:"+number+"@cloudservices.a.test", "serviceAccount:"+number+"@cloudservices.b.test")),
			is:     preflight.ErrAgentAmbiguous,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			project := tc.project
			if project == "" {
				project = "my-proj"
			}
			_, c := serve(t, project, tc.opts.Universe, tc.policy)
			r, err := preflight.Check(context.Background(), c, tc.opts)
			if err == nil {
				t.Fatalf("Check = %+v, want an error", r)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q lacks %q", err, tc.text)
			}
		})
	}
}

// recorder answers every request with a 404 and remembers the hosts asked.
type recorder struct {
	mu    sync.Mutex
	hosts []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hosts = append(r.hosts, req.URL.Host)
	r.mu.Unlock()
	return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":{"code":404,"message":"x","status":"NOT_FOUND"}}`)), Request: req}, nil
}

// TestUniverseEndpoint: the client calls the universe's Resource Manager,
// whether the universe is given or comes from GOOGLE_CLOUD_UNIVERSE_DOMAIN.
func TestUniverseEndpoint(t *testing.T) {
	for _, tc := range []struct{ name, given, env, host string }{
		{name: "default", host: "cloudresourcemanager.googleapis.com"},
		{name: "given", given: "s3nsapis.fr", host: "cloudresourcemanager.s3nsapis.fr"},
		{name: "environment", env: "s3nsapis.fr", host: "cloudresourcemanager.s3nsapis.fr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOOGLE_CLOUD_UNIVERSE_DOMAIN", tc.env)
			rec := &recorder{}
			c, err := preflight.NewClient(context.Background(), tc.given, option.WithHTTPClient(&http.Client{Transport: rec}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := preflight.Check(context.Background(), c, preflight.Options{Project: "s3ns:p"}); err == nil {
				t.Fatal("Check succeeded against a server that answers 404")
			}
			if len(rec.hosts) == 0 || rec.hosts[0] != tc.host {
				t.Errorf("hosts %v, want %s", rec.hosts, tc.host)
			}
		})
	}
}
