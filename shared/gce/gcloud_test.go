package gce_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/clock"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
)

// envRequireGcloud makes TestGcloudOutsideClient fail instead of skipping
// when the gcloud CLI is missing (CI, which has it preinstalled).
const envRequireGcloud = "FLEXSLURM_REQUIRE_GCLOUD"

// recorded is one request a client sent.
type recorded struct {
	method, path string
	query        map[string][]string
	body         any
}

// recordedSim is a simulator on a manual clock behind a server that records
// every request.
type recordedSim struct {
	sim *computesim.Sim
	clk *clock.Manual
	url string
	mu  sync.Mutex
	log []recorded
}

func newRecordedSim(t *testing.T) *recordedSim {
	t.Helper()
	r := &recordedSim{clk: clock.NewManual(t0)}
	r.sim = computesim.New(computesim.Options{
		Project:       project,
		Seed:          7,
		CapacityDelay: func(string, string) time.Duration { return time.Hour },
	}, r.clk)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		rec := recorded{method: req.Method, path: req.URL.Path, query: req.URL.Query()}
		if len(bytes.TrimSpace(body)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber()
			if err := dec.Decode(&rec.body); err != nil {
				t.Errorf("%s %s: body is not JSON: %v", req.Method, req.URL.Path, err)
			}
		}
		r.mu.Lock()
		r.log = append(r.log, rec)
		r.mu.Unlock()
		r.sim.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *recordedSim) tick(d time.Duration) { r.sim.Tick(r.clk.Advance(d)) }

// first returns the first recorded request with this method and path.
func (r *recordedSim) first(method, path string) (recorded, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.log {
		if rec.method == method && rec.path == path {
			return rec, true
		}
	}
	return recorded{}, false
}

// gcloud runs the gcloud CLI against a simulator.
type gcloud struct {
	t   *testing.T
	bin string
	env []string
}

func newGcloud(t *testing.T, endpoint string) *gcloud {
	t.Helper()
	bin, err := exec.LookPath("gcloud")
	if err != nil {
		if os.Getenv(envRequireGcloud) == "1" {
			t.Fatalf("gcloud is not on PATH and %s=1", envRequireGcloud)
		}
		t.Skipf("SKIPPED: the gcloud CLI is not on PATH (install the Google Cloud CLI; set %s=1 to make this a failure)", envRequireGcloud)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLOUDSDK_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"CLOUDSDK_CONFIG="+t.TempDir(),
		"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE="+endpoint+"/compute/v1/",
		"CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true",
		"CLOUDSDK_CORE_DISABLE_PROMPTS=1",
		"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true",
		"CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true",
	)
	return &gcloud{t: t, bin: bin, env: env}
}

// run runs one gcloud command, requires exit 0 and returns its JSON output
// (nil when it printed nothing).
func (g *gcloud) run(args ...string) any {
	g.t.Helper()
	return g.runAll(args)[0]
}

// runAll runs gcloud commands one after the other (concurrent runs were
// slower: they share the configuration directory and the CPU), requires
// each to exit 0 and returns their JSON outputs in order.
func (g *gcloud) runAll(cmds ...[]string) []any {
	g.t.Helper()
	outs := make([]any, len(cmds))
	for i, args := range cmds {
		out, err := g.exec(args)
		if err != nil {
			g.t.Fatal(err)
		}
		outs[i] = out
	}
	return outs
}

func (g *gcloud) exec(args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append(args, "--project="+project, "--quiet", "--format=json")
	cmd := exec.CommandContext(ctx, g.bin, args...)
	cmd.Env = g.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	g.t.Logf("gcloud %s: %v", strings.Join(args, " "), time.Since(start).Round(10*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("gcloud %s: %w\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if len(bytes.TrimSpace(stdout.Bytes())) == 0 {
		return nil, nil
	}
	var out any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("gcloud %s: output is not JSON: %w\n%s", strings.Join(args, " "), err, stdout.String())
	}
	return out, nil
}

// one returns the only element of a JSON list, or the object itself.
func one(t *testing.T, v any) map[string]any {
	t.Helper()
	if l, ok := v.([]any); ok {
		if len(l) != 1 {
			t.Fatalf("want one resource, got %d: %v", len(l), v)
		}
		v = l[0]
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("want a JSON object, got %T: %v", v, v)
	}
	return m
}

func at(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, _ := v.(map[string]any)
		v = mm[k]
	}
	return v
}

const (
	gTemplate = "c1-h200-v1"
	gMIG      = "c1-h200"
	gMIGPath  = "/compute/v1/projects/" + project + "/zones/" + zone + "/instanceGroupManagers/" + gMIG
)

// TestGcloudOutsideClient runs the real gcloud CLI against the simulator for
// the operations flexslurm performs, checks each succeeds and that gcloud
// parses every answer, then performs the same operations with flexslurm's
// client and compares what the two sent, field by field. Every difference
// must be one docs/compute-contract.md explains (wantDiffs below mirrors its
// table).
func TestGcloudOutsideClient(t *testing.T) {
	gs := newRecordedSim(t)
	g := newGcloud(t, gs.url)
	started := time.Now()

	// A Flex-Start template with an image family, which gcloud resolves
	// first. CLI 528, installed here, predates Flex-Start's GA and offers
	// FLEX_START only under beta; GA gcloud accepts it since (see
	// docs/compute-contract.md). Beta commands use the same endpoint
	// override, so the body is checked against v1.
	tpl := one(t, g.run("beta", "compute", "instance-templates", "create", gTemplate,
		"--machine-type=a3-ultragpu-8g", "--accelerator=type=nvidia-h200-141gb,count=8",
		"--provisioning-model=FLEX_START", "--instance-termination-action=DELETE", "--max-run-duration=7200s",
		"--maintenance-policy=TERMINATE", "--no-restart-on-failure", "--reservation-affinity=none",
		"--image-family=debian-12", "--image-project=debian-cloud",
		"--boot-disk-type=hyperdisk-balanced", "--boot-disk-size=200GB",
		"--network=default", "--no-address", "--service-account=node@proj.iam.gserviceaccount.com", "--scopes=cloud-platform",
		"--labels=flexslurm-cluster=c1,flexslurm-pool=h200", "--metadata=enable-oslogin=TRUE",
		"--description=h200 pool"))
	if at(tpl, "name") != gTemplate || at(tpl, "properties", "scheduling", "provisioningModel") != "FLEX_START" ||
		at(tpl, "properties", "scheduling", "maxRunDuration", "seconds") != "7200" {
		t.Errorf("template as gcloud printed it: %v", tpl)
	}
	if _, ok := gs.first("GET", "/compute/v1/projects/debian-cloud/global/images/family/debian-12"); !ok {
		t.Error("gcloud did not resolve the image family through images.getFromFamily")
	}

	mig := one(t, g.run("compute", "instance-groups", "managed", "create", gMIG, "--zone="+zone,
		"--template="+gTemplate, "--size=0", "--base-instance-name="+gMIG, "--default-action-on-vm-failure=do-nothing"))
	if at(mig, "name") != gMIG || at(mig, "instanceLifecyclePolicy", "defaultActionOnFailure") != "DO_NOTHING" {
		t.Errorf("MIG as gcloud printed it: %v", mig)
	}

	// Named VMs need beta in CLI 528; GA creates by count.
	rrA := one(t, g.run("beta", "compute", "instance-groups", "managed", "resize-requests", "create", gMIG, "--zone="+zone,
		"--resize-request=rr-a", "--instances=c1-h200-a,c1-h200-b", "--requested-run-duration=2h"))
	if st := at(rrA, "state"); at(rrA, "name") != "rr-a" || (st != "CREATING" && st != "ACCEPTED") {
		t.Errorf("resize request rr-a as gcloud printed it: %v", rrA)
	}
	gs.tick(0)         // ACCEPTED
	gs.tick(time.Hour) // capacity: SUCCEEDED, VMs RUNNING
	rrB := one(t, g.run("compute", "instance-groups", "managed", "resize-requests", "create", gMIG, "--zone="+zone,
		"--resize-request=rr-b", "--resize-by=1", "--requested-run-duration=2h"))
	if at(rrB, "name") != "rr-b" {
		t.Errorf("resize request rr-b as gcloud printed it: %v", rrB)
	}
	gs.tick(0) // ACCEPTED, waiting for capacity

	reads := g.runAll(
		[]string{"compute", "instance-groups", "managed", "resize-requests", "list", gMIG, "--zone=" + zone},
		[]string{"compute", "instance-groups", "managed", "resize-requests", "describe", gMIG, "--zone=" + zone, "--resize-request=rr-b"},
		[]string{"compute", "instances", "list", "--zones=" + zone, "--filter=labels.flexslurm-pool=h200"},
	)
	list, _ := reads[0].([]any)
	var states []string
	for _, v := range list {
		m, _ := v.(map[string]any)
		states = append(states, fmt.Sprint(m["name"], "=", m["state"]))
	}
	if diff := cmp.Diff([]string{"rr-a=SUCCEEDED", "rr-b=ACCEPTED"}, states); diff != "" {
		t.Errorf("resize-requests list (-want +got):\n%s", diff)
	}
	if d := one(t, reads[1]); at(d, "state") != "ACCEPTED" || at(d, "resizeBy") != float64(1) {
		t.Errorf("resize-requests describe: %v", d)
	}
	vms, _ := reads[2].([]any)
	var names []string
	for _, v := range vms {
		m, _ := v.(map[string]any)
		names = append(names, fmt.Sprint(m["name"]))
	}
	if diff := cmp.Diff([]string{"c1-h200-a", "c1-h200-b"}, names); diff != "" {
		t.Errorf("instances list (-want +got):\n%s", diff)
	}
	g.run("compute", "instance-groups", "managed", "resize-requests", "cancel", gMIG, "--zone="+zone, "--resize-requests=rr-b")
	g.runAll(
		[]string{"compute", "instance-groups", "managed", "resize-requests", "delete", gMIG, "--zone=" + zone, "--resize-requests=rr-b"},
		[]string{"compute", "instances", "delete", "c1-h200-a", "--zone=" + zone},
	)
	t.Logf("gcloud: %d requests in %v", len(gs.log), time.Since(started).Round(time.Millisecond))

	// The resize request rr-b is gone, and so is c1-h200-a.
	fs := newRecordedSim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check, err := gce.New(ctx, project, option.WithEndpoint(gs.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	if rrs, err := check.ListResizeRequests(ctx, zone, gMIG); err != nil || len(rrs) != 1 || rrs[0].Name != "rr-a" {
		t.Errorf("after gcloud's cancel and delete: %v, %v", rrs, err)
	}
	if in, err := check.GetInstance(ctx, zone, "c1-h200-a"); err == nil && in.Status != "STOPPING" {
		t.Errorf("after gcloud's delete, c1-h200-a is %s", in.Status)
	}

	// The same operations with flexslurm's client.
	c, err := gce.New(ctx, project, option.WithEndpoint(fs.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The body flexslurm's templates have (shared/instancetemplate), with
	// gcloud's choices above: no subnetwork, no external address, the same
	// metadata.
	spec := flexSpec(gTemplate)
	spec.Properties.NetworkInterfaces = []instancetemplate.NetworkInterface{{Network: "projects/" + project + "/global/networks/default"}}
	spec.Properties.Metadata = &instancetemplate.Metadata{Items: []instancetemplate.MetadataItem{{Key: "enable-oslogin", Value: "TRUE"}}}
	if err := c.EnsureInstanceTemplate(ctx, spec, rid("template")); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureMIG(ctx, gce.MIGSpec{Zone: zone, Name: gMIG, Template: gTemplate, BaseInstanceName: gMIG}, rid("mig")); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateResizeRequest(ctx, zone, gMIG, gce.ResizeRequestSpec{Name: "rr-a", Instances: []string{"c1-h200-a", "c1-h200-b"}, RunDuration: 2 * time.Hour}, rid("rr-a")); err != nil {
		t.Fatal(err)
	}
	fs.tick(0)
	fs.tick(time.Hour)
	if err := c.CreateResizeRequest(ctx, zone, gMIG, gce.ResizeRequestSpec{Name: "rr-b", Instances: []string{"c1-h200-c"}, RunDuration: 2 * time.Hour}, rid("rr-b")); err != nil {
		t.Fatal(err)
	}
	fs.tick(0)
	if _, err := c.ListResizeRequests(ctx, zone, gMIG); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetResizeRequest(ctx, zone, gMIG, "rr-b"); err != nil {
		t.Fatal(err)
	}
	if err := c.CancelResizeRequest(ctx, zone, gMIG, "rr-b", rid("cancel rr-b")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteResizeRequest(ctx, zone, gMIG, "rr-b", rid("delete rr-b")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListInstances(ctx, zone, map[string]string{"flexslurm-pool": "h200"}); err != nil {
		t.Fatal(err)
	}

	// Field by field.
	ops := []struct{ name, method, path string }{
		{"instanceTemplates.insert", "POST", "/compute/v1/projects/" + project + "/global/instanceTemplates"},
		{"instanceGroupManagers.insert", "POST", "/compute/v1/projects/" + project + "/zones/" + zone + "/instanceGroupManagers"},
		{"instanceGroupManagerResizeRequests.insert", "POST", gMIGPath + "/resizeRequests"},
		{"instanceGroupManagerResizeRequests.list", "GET", gMIGPath + "/resizeRequests"},
		{"instanceGroupManagerResizeRequests.get", "GET", gMIGPath + "/resizeRequests/rr-b"},
		{"instanceGroupManagerResizeRequests.cancel", "POST", gMIGPath + "/resizeRequests/rr-b/cancel"},
		{"instanceGroupManagerResizeRequests.delete", "DELETE", gMIGPath + "/resizeRequests/rr-b"},
		{"instances.list", "GET", "/compute/v1/projects/" + project + "/zones/" + zone + "/instances"},
	}
	var diffs []string
	for _, op := range ops {
		gr, ok1 := gs.first(op.method, op.path)
		fr, ok2 := fs.first(op.method, op.path)
		if !ok1 || !ok2 {
			t.Errorf("%s (%s %s): sent by gcloud %v, by flexslurm %v", op.name, op.method, op.path, ok1, ok2)
			continue
		}
		gf, ff := map[string]string{}, map[string]string{}
		flatten("body", gr.body, gf, gs.url)
		flatten("body", fr.body, ff, fs.url)
		flattenQuery(gr.query, gf)
		flattenQuery(fr.query, ff)
		for _, k := range slices.Sorted(maps.Keys(union(gf, ff))) {
			gv, gok := gf[k]
			fv, fok := ff[k]
			if gok && fok && gv == fv {
				continue
			}
			if !gok {
				gv = "—"
			}
			if !fok {
				fv = "—"
			}
			diffs = append(diffs, op.name+" | "+k+" | "+gv+" | "+fv)
		}
	}
	if diff := cmp.Diff(wantDiffs, diffs); diff != "" {
		t.Errorf("differences between what gcloud and flexslurm send, against the ones docs/compute-contract.md explains (-explained +actual):\n%s", diff)
	}
}

// wantDiffs are the differences docs/compute-contract.md explains, as
// "operation | field | gcloud | flexslurm"; <endpoint> is the simulator's
// URL.
var wantDiffs = []string{
	"instanceTemplates.insert | body.properties.canIpForward | false | —",
	`instanceTemplates.insert | body.properties.description | — | "h200 pool"`,
	`instanceTemplates.insert | body.properties.disks[0].initializeParams.sourceImage | "<endpoint>/compute/v1/projects/debian-cloud/global/images/family/debian-12" | "projects/debian-cloud/global/images/family/debian-12"`,
	`instanceTemplates.insert | body.properties.disks[0].mode | "READ_WRITE" | —`,
	`instanceTemplates.insert | body.properties.networkInterfaces[0].network | "<endpoint>/compute/v1/projects/proj/global/networks/default" | "projects/proj/global/networks/default"`,
	"instanceTemplates.insert | query.alt | json | —",
	"instanceTemplates.insert | query.requestId | — | <uuid>",
	`instanceGroupManagers.insert | body.instanceTemplate | "<endpoint>/compute/v1/projects/proj/global/instanceTemplates/c1-h200-v1" | "projects/proj/global/instanceTemplates/c1-h200-v1"`,
	`instanceGroupManagers.insert | body.updatePolicy.type | — | "OPPORTUNISTIC"`,
	`instanceGroupManagers.insert | body.zone | "us-central1-a" | —`,
	"instanceGroupManagers.insert | query.alt | json | —",
	"instanceGroupManagers.insert | query.requestId | — | <uuid>",
	"instanceGroupManagerResizeRequests.insert | query.alt | json | —",
	"instanceGroupManagerResizeRequests.insert | query.requestId | — | <uuid>",
	"instanceGroupManagerResizeRequests.list | query.alt | json | —",
	"instanceGroupManagerResizeRequests.list | query.maxResults | 500 | —",
	"instanceGroupManagerResizeRequests.get | query.alt | json | —",
	"instanceGroupManagerResizeRequests.cancel | query.alt | json | —",
	"instanceGroupManagerResizeRequests.cancel | query.requestId | — | <uuid>",
	"instanceGroupManagerResizeRequests.delete | query.alt | json | —",
	"instanceGroupManagerResizeRequests.delete | query.requestId | — | <uuid>",
	"instances.list | query.alt | json | —",
	`instances.list | query.filter | — | (labels.flexslurm-pool = "h200")`,
	"instances.list | query.maxResults | 500 | —",
}

// flattenQuery writes query parameters into out as query.NAME → value, a
// request ID as <uuid>.
func flattenQuery(q map[string][]string, out map[string]string) {
	for k, v := range q {
		out["query."+k] = strings.Join(v, ",")
		if k == "requestId" {
			if _, err := uuid.Parse(v[0]); err == nil {
				out["query."+k] = "<uuid>"
			}
		}
	}
}

func union(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// flatten writes v's scalar leaves into out as path → JSON, with the
// simulator's URL written <endpoint>.
func flatten(path string, v any, out map[string]string, url string) {
	switch x := v.(type) {
	case nil:
	case map[string]any:
		for k, e := range x {
			flatten(path+"."+k, e, out, url)
		}
	case []any:
		for i, e := range x {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, out, url)
		}
	default:
		b, _ := json.Marshal(x)
		out[path] = strings.ReplaceAll(string(b), url, "<endpoint>")
	}
}
