// Package deploy holds flexslurm's Terraform configuration. Its test checks
// the configuration against the code it deploys: entry points registered in
// ../functions.go, topic and environment names of shared/config, dead-letter
// names of shared/status, the reconcile tick's payload, the Firestore TTL
// field, and the roles documented in README.md.
package deploy

import (
	"encoding/base64"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/status"
)

// vars are the values of the variables without default.
var vars = map[string]cty.Value{
	"project":             cty.StringVal("my-proj"),
	"region":              cty.StringVal("europe-west4"),
	"cluster_spec_file":   cty.StringVal("../examples/cluster_config.json"),
	"controller_instance": cty.StringVal("zones/europe-west4-a/instances/flexvm-controller"),
}

func loadModule(t *testing.T) *module {
	t.Helper()
	m, err := load(".", vars)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// goConsts returns the string constants declared in a Go file, by name.
func goConsts(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// registered returns the entry points ../functions.go registers with
// functions.CloudEvent (or HTTP), its first argument resolved through the
// file's constants.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	all, _ := registeredKinds(t)
	return all
}

// registeredHTTP returns the entry points functions.go registers with
// functions.HTTP (the API function, deploy/api.tf).
func registeredHTTP(t *testing.T) map[string]bool {
	t.Helper()
	_, http := registeredKinds(t)
	return http
}

// registeredKinds returns every registered entry point, and those
// registered with functions.HTTP.
func registeredKinds(t *testing.T) (map[string]bool, map[string]bool) {
	t.Helper()
	path := filepath.Join("..", "functions.go")
	consts := goConsts(t, path)
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, http := map[string]bool{}, map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "functions" || (sel.Sel.Name != "CloudEvent" && sel.Sel.Name != "HTTP") {
			return true
		}
		v := ""
		switch a := call.Args[0].(type) {
		case *ast.Ident:
			if c, ok := consts[a.Name]; ok {
				v = c
			} else {
				t.Errorf("functions.go registers %s, not a constant of the file", a.Name)
			}
		case *ast.BasicLit:
			v, _ = strconv.Unquote(a.Value)
		}
		if v != "" {
			out[v] = true
			if sel.Sel.Name == "HTTP" {
				http[v] = true
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatal("functions.go registers no entry point")
	}
	return out, http
}

// prefixed returns the values of the constants whose name starts with p.
func prefixed(consts map[string]string, p string) map[string]string {
	out := map[string]string{}
	for n, v := range consts {
		if strings.HasPrefix(n, p) {
			out[n] = v
		}
	}
	return out
}

// topicName returns the name of the topic a value refers to: the name of
// the google_pubsub_topic instance its marker names, or the value itself
// when it is a created topic's name.
func topicName(m *module, v cty.Value) (string, bool) {
	if r, ok := m.ref1(v); ok {
		if r.b.typ != "google_pubsub_topic" || r.instance() == nil {
			return "", false
		}
		return str(get(r.instance().value, "name"))
	}
	s, ok := str(v)
	if !ok {
		return "", false
	}
	return s, slices.Contains(createdTopics(m), s)
}

func createdTopics(m *module) []string {
	var out []string
	for _, b := range m.blocksOf("google_pubsub_topic") {
		for _, in := range b.instances {
			if n, ok := str(get(in.value, "name")); ok {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// deployment is one google_cloudfunctions2_function instance.
type deployment struct {
	key string
	v   cty.Value
}

// functionsOf returns the event-driven deployments (the HTTP API function,
// google_cloudfunctions2_function.api, is checked by api_test.go).
func functionsOf(t *testing.T, m *module) []deployment {
	t.Helper()
	var out []deployment
	for _, b := range m.blocksOf("google_cloudfunctions2_function") {
		if b.name == "api" {
			continue
		}
		if b.instances == nil {
			t.Fatalf("%s: for_each could not be evaluated", b.addr())
		}
		for _, in := range b.instances {
			out = append(out, deployment{b.instAddr(in.key), in.value})
		}
	}
	if len(out) == 0 {
		t.Fatal("no google_cloudfunctions2_function")
	}
	return out
}

// TestFunctions: every deployment runs a registered entry point on go126
// from the one source upload, is triggered by a created topic with retries
// on, runs and is triggered as the service account of its entry point (one
// per entry point, which may invoke that deployment), and gets only
// shared/config's environment variables.
func TestFunctions(t *testing.T) {
	m := loadModule(t)
	reg := registered(t)
	exported := map[string]bool{}
	for _, v := range prefixed(goConsts(t, filepath.Join("..", "functions.go")), "Entry") {
		exported[v] = true
	}
	if diff := cmp.Diff(exported, reg); diff != "" {
		t.Errorf("functions.go: Entry* constants and registrations differ (-constants +registered):\n%s", diff)
	}
	env := prefixed(goConsts(t, filepath.Join("..", "shared", "config", "config.go")), "Env")
	envNames := map[string]string{}
	for n, v := range env {
		envNames[v] = n
	}
	topics := createdTopics(m)
	deployed := map[string]bool{}
	identity := map[string]string{} // entry point → service account instance
	identityOf := map[string]string{}
	for _, f := range functionsOf(t, m) {
		entry, ok := str(get(f.v, "build_config", 0, "entry_point"))
		switch {
		case !ok:
			t.Errorf("%s: entry_point is not a known string", f.key)
		case !reg[entry]:
			t.Errorf("%s: entry point %q is not registered in functions.go (registered: %v)", f.key, entry, keys(reg))
		}
		deployed[entry] = true
		if rt, _ := str(get(f.v, "build_config", 0, "runtime")); rt != "go126" {
			t.Errorf("%s: runtime %q, want go126 (compute ≥ v1.70 needs Go 1.26)", f.key, rt)
		}
		if obj := str1(get(f.v, "build_config", 0, "source", 0, "storage_source", 0, "object")); obj == "" || obj != sourceObject(t, m) {
			t.Errorf("%s: source object %q is not the uploaded archive %q", f.key, obj, sourceObject(t, m))
		}
		tr := get(f.v, "event_trigger", 0)
		if et, _ := str(get(tr, "event_type")); et != "google.cloud.pubsub.topic.v1.messagePublished" {
			t.Errorf("%s: event type %q", f.key, et)
		}
		if rp, _ := str(get(tr, "retry_policy")); rp != "RETRY_POLICY_RETRY" {
			t.Errorf("%s: retry policy %q, want RETRY_POLICY_RETRY", f.key, rp)
		}
		topic, ok := topicName(m, get(tr, "pubsub_topic"))
		if !ok {
			t.Errorf("%s: reads %v, which is not a topic this configuration creates (%v)", f.key, get(tr, "pubsub_topic"), topics)
		} else if !slices.Contains(status.ConsumedTopics, topic) {
			t.Errorf("%s: reads %s, missing from shared/status.ConsumedTopics (its dead letters would not be shown)", f.key, topic)
		}
		run, ok1 := m.ref1(get(f.v, "service_config", 0, "service_account_email"))
		trig, ok2 := m.ref1(get(tr, "service_account_email"))
		if !ok1 || !ok2 || run.b.typ != "google_service_account" || run.b != trig.b || run.key != trig.key {
			t.Errorf("%s: runs as %v and is triggered as %v, want the same google_service_account", f.key,
				get(f.v, "service_config", 0, "service_account_email"), get(tr, "service_account_email"))
		} else {
			sa := run.b.instAddr(run.key)
			if prev, ok := identity[entry]; ok && prev != sa {
				t.Errorf("%s: entry point %s runs as %s and as %s: want one account per entry point", f.key, entry, prev, sa)
			}
			if other, ok := identityOf[sa]; ok && other != entry {
				t.Errorf("%s: %s is shared by entry points %s and %s", f.key, sa, other, entry)
			}
			identity[entry], identityOf[sa] = sa, entry
			if !invokes(m, f.key, run) {
				t.Errorf("%s: no roles/run.invoker for %s on its service", f.key, sa)
			}
		}
		vars := get(f.v, "service_config", 0, "environment_variables")
		if vars == cty.NilVal || !vars.IsWhollyKnown() {
			t.Errorf("%s: environment is not known", f.key)
			continue
		}
		for k := range vars.AsValueMap() {
			if _, ok := envNames[k]; !ok {
				t.Errorf("%s: environment variable %s is not one of shared/config's (%v)", f.key, k, keys(envNames))
			}
		}
		if v, _ := str(get(vars, env["EnvControllerVM"])); v != "zones/europe-west4-a/instances/flexvm-controller" {
			t.Errorf("%s: %s = %q, want var.controller_instance (controller reports are refused without it)", f.key, env["EnvControllerVM"], v)
		}
		for _, local := range []string{env["EnvComputeEndpoint"], env["EnvClock"], env["EnvIdentityCertsURL"]} {
			if _, ok := vars.AsValueMap()[local]; ok {
				t.Errorf("%s: sets %s, which is for the local system only", f.key, local)
			}
		}
		if p, _ := str(get(vars, env["EnvProject"])); p != "my-proj" {
			t.Errorf("%s: %s = %q, want the project", f.key, env["EnvProject"], p)
		}
	}
	for _, d := range apiFunction(t, m) {
		deployed[str1(get(d.v, "build_config", 0, "entry_point"))] = true
	}
	if diff := cmp.Diff(reg, deployed); diff != "" {
		t.Errorf("registered entry points not deployed (-registered +deployed):\n%s", diff)
	}
}

// sourceObject returns the name of the one bucket object, which must be
// the source archive, named after its content.
func sourceObject(t *testing.T, m *module) string {
	t.Helper()
	objs := m.blocksOf("google_storage_bucket_object")
	if len(objs) != 1 || len(objs[0].instances) != 1 {
		t.Fatalf("want one google_storage_bucket_object, have %d", len(objs))
	}
	arch := m.blocksOf("data.archive_file")
	if len(arch) != 1 || len(arch[0].instances) != 1 {
		t.Fatalf("want one archive_file, have %d", len(arch))
	}
	o := objs[0].instances[0].value
	name := str1(get(o, "name"))
	rs := m.refs(name)
	if str1(get(o, "source")) != str1(get(arch[0].instances[0].value, "output_path")) ||
		len(rs) != 1 || rs[0].attr != "output_sha256" || rs[0].b != arch[0] {
		t.Errorf("bucket object %q (from %v) is not the source archive named by its hash", name, get(o, "source"))
	}
	return name
}

// invokes reports whether a google_cloud_run_v2_service_iam_member grants
// roles/run.invoker to sa on the service of function instance fn.
func invokes(m *module, fn string, sa ref) bool {
	for _, b := range m.blocksOf("google_cloud_run_v2_service_iam_member") {
		for _, in := range b.instances {
			role, _ := str(get(in.value, "role"))
			svc, ok1 := m.ref1(get(in.value, "name"))
			mem, ok2 := m.ref1(get(in.value, "member"))
			if role == "roles/run.invoker" && ok1 && ok2 && svc.b.instAddr(svc.key) == fn &&
				svc.attr == "service_config[0].service" && mem.b == sa.b && mem.key == sa.key {
				return true
			}
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestTopics: the configuration creates exactly shared/config's topics, and
// for each topic whose subscriptions dead-letter (shared/status), its
// dead-letter topic, the holding subscription status peeks, and the Pub/Sub
// service agent's right to publish there.
func TestTopics(t *testing.T) {
	m := loadModule(t)
	var want []string
	for _, v := range prefixed(goConsts(t, filepath.Join("..", "shared", "config", "config.go")), "Topic") {
		want = append(want, v)
	}
	for _, c := range status.ConsumedTopics {
		want = append(want, status.DeadLetterTopic(c))
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, createdTopics(m)); diff != "" {
		t.Errorf("topics (-shared/config and dead letters +created):\n%s", diff)
	}
	agent, _ := str(m.locals["pubsub_agent"])
	if !strings.HasPrefix(agent, "serviceAccount:service-⟨data.google_project.this.number⟩@gcp-sa-pubsub.") {
		t.Fatalf("local.pubsub_agent = %q", agent)
	}
	subs := map[string]cty.Value{}
	for _, b := range m.blocksOf("google_pubsub_subscription") {
		for _, in := range b.instances {
			name, _ := str(get(in.value, "name"))
			subs[name] = in.value
		}
	}
	for _, c := range status.ConsumedTopics {
		dl := status.DeadLetterTopic(c)
		s, ok := subs[status.DeadLetterSubscription(c)]
		if !ok {
			t.Errorf("no subscription %s holding %s", status.DeadLetterSubscription(c), dl)
		} else if got, _ := topicName(m, get(s, "topic")); got != dl {
			t.Errorf("subscription %s is on %q, want %s", status.DeadLetterSubscription(c), got, dl)
		}
		if !granted(m, "google_pubsub_topic_iam_member", "roles/pubsub.publisher", agent, func(v cty.Value) bool {
			got, _ := topicName(m, get(v, "topic"))
			return got == dl
		}) {
			t.Errorf("the Pub/Sub service agent may not publish to %s", dl)
		}
	}
	// Subscriptions this configuration owns with a dead-letter policy: the
	// service agent acknowledges on them.
	for name, s := range subs {
		dlp := get(s, "dead_letter_policy", 0)
		if dlp == cty.NilVal {
			continue
		}
		if _, ok := topicName(m, get(dlp, "dead_letter_topic")); !ok {
			t.Errorf("subscription %s dead-letters to %v, not a created topic", name, get(dlp, "dead_letter_topic"))
		}
		if !granted(m, "google_pubsub_subscription_iam_member", "roles/pubsub.subscriber", agent, func(v cty.Value) bool {
			sub, _ := str(get(v, "subscription"))
			return sub == name
		}) {
			t.Errorf("the Pub/Sub service agent may not acknowledge on %s", name)
		}
	}
	// Eventarc's subscriptions get theirs from dead-letters.sh, driven by
	// this output: one line per function, naming its trigger and the
	// dead-letter topic of the topic it reads.
	out, diags := m.outputs["eventarc_dead_letters"].Value(m.ctx(cty.NilVal))
	lines, _ := str(out)
	if diags.HasErrors() || lines == "" {
		t.Fatalf("output eventarc_dead_letters: %v %s", out, diags.Error())
	}
	for _, f := range functionsOf(t, m) {
		topic, _ := topicName(m, get(f.v, "event_trigger", 0, "pubsub_topic"))
		found := false
		for _, l := range strings.Split(lines, "\n") {
			fields := strings.Fields(l)
			if len(fields) != 4 {
				t.Fatalf("eventarc_dead_letters line %q: want TRIGGER TOPIC ATTEMPTS AGENT", l)
			}
			tr, ok1 := m.markers[fields[0]]
			dl, ok2 := m.markers[fields[1]]
			if ok1 && ok2 && tr.b.instAddr(tr.key) == f.key && tr.attr == "event_trigger[0].trigger" && fields[3] == agent {
				found = dl.instance() != nil && str1(get(dl.instance().value, "name")) == status.DeadLetterTopic(topic)
			}
		}
		if !found {
			t.Errorf("eventarc_dead_letters has no line for %s → %s", f.key, status.DeadLetterTopic(topic))
		}
	}
}

func str1(v cty.Value) string { s, _ := str(v); return s }

// granted reports whether an IAM member resource of type typ grants role to
// member on a resource match accepts.
func granted(m *module, typ, role, member string, match func(cty.Value) bool) bool {
	for _, b := range m.blocksOf(typ) {
		for _, in := range b.instances {
			r, _ := str(get(in.value, "role"))
			mem, _ := str(get(in.value, "member"))
			if r == role && mem == member && match(in.value) {
				return true
			}
		}
	}
	return false
}

// TestLogSink: the sink routes Compute's system events (deferredDelete,
// deferredStop, preemptions, …) and the activity log's VM deletes to the
// expiry topic, and its writer identity may publish there.
func TestLogSink(t *testing.T) {
	m := loadModule(t)
	sinks := m.blocksOf("google_logging_project_sink")
	if len(sinks) != 1 || len(sinks[0].instances) != 1 {
		t.Fatalf("want one google_logging_project_sink, have %d", len(sinks))
	}
	sink := sinks[0].instances[0].value
	dest, _ := str(get(sink, "destination"))
	rs := m.refs(dest)
	if !strings.HasPrefix(dest, "pubsub.googleapis.com/") || len(rs) != 1 || rs[0].attr != "id" {
		t.Fatalf("destination %q is not pubsub.googleapis.com/<topic id>", dest)
	}
	if n, _ := str(get(rs[0].instance().value, "name")); n != "instance-expiry" {
		t.Errorf("the sink writes to %s, want instance-expiry", n)
	}
	filter, _ := str(get(sink, "filter"))
	for _, want := range []string{
		`logName="projects/my-proj/logs/cloudaudit.googleapis.com%2Fsystem_event"`,
		`resource.type="gce_instance"`,
		`logName="projects/my-proj/logs/cloudaudit.googleapis.com%2Factivity"`,
		`protoPayload.serviceName="compute.googleapis.com"`,
	} {
		if !strings.Contains(filter, want) {
			t.Errorf("filter lacks %s:\n%s", want, filter)
		}
	}
	// A methodName filter on the system events would drop deferredDelete
	// and deferredStop, whose names are not documented (https://cloud.google.com/compute/docs/logging/audit-logging lists
	// neither).
	if sys := filter[:strings.Index(filter, "%2Factivity")]; strings.Contains(sys, "methodName") {
		t.Errorf("the system_event part filters on methodName:\n%s", filter)
	}
	if get(sink, "unique_writer_identity").True() != true {
		t.Error("unique_writer_identity is not set")
	}
	writer := "⟨google_logging_project_sink." + sinks[0].name + ".writer_identity⟩"
	if !granted(m, "google_pubsub_topic_iam_member", "roles/pubsub.publisher", writer, func(v cty.Value) bool {
		n, _ := topicName(m, get(v, "topic"))
		return n == "instance-expiry"
	}) {
		t.Error("the sink's writer identity may not publish to instance-expiry")
	}
}

// TestScheduler: the job publishes a reconcile tick the Reconcile function
// decodes, on reconcile-tick.
func TestScheduler(t *testing.T) {
	m := loadModule(t)
	jobs := m.blocksOf("google_cloud_scheduler_job")
	if len(jobs) != 1 || len(jobs[0].instances) != 1 {
		t.Fatalf("want one google_cloud_scheduler_job, have %d", len(jobs))
	}
	pt := get(jobs[0].instances[0].value, "pubsub_target", 0)
	if n, _ := topicName(m, get(pt, "topic_name")); n != "reconcile-tick" {
		t.Errorf("the job publishes to %q, want reconcile-tick", n)
	}
	data, ok := str(get(pt, "data"))
	raw, err := base64.StdEncoding.DecodeString(data)
	if !ok || err != nil {
		t.Fatalf("data %q is not base64: %v", data, err)
	}
	if _, err := event.DecodeTick(raw); err != nil {
		t.Errorf("the tick %s does not decode: %v", raw, err)
	}
	if s, _ := str(get(jobs[0].instances[0].value, "schedule")); s != "*/5 * * * *" {
		t.Errorf("schedule %q, want var.reconcile_schedule's default", s)
	}
}

// TestFirestore: a TTL policy on the field and collection group the store
// writes event markers to.
func TestFirestore(t *testing.T) {
	m := loadModule(t)
	src, err := os.ReadFile(filepath.Join("..", "shared", "store", "firestore.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := goConsts(t, filepath.Join("..", "shared", "store", "firestore.go"))
	field := regexp.MustCompile("ExpireAt +time.Time +`firestore:\"([a-z_]+)\"`").FindSubmatch(src)
	if field == nil || consts["eventsColl"] == "" {
		t.Fatal("shared/store/firestore.go: no eventMarker.ExpireAt field tag or eventsColl constant")
	}
	found := false
	for _, b := range m.blocksOf("google_firestore_field") {
		for _, in := range b.instances {
			if str1(get(in.value, "collection")) == consts["eventsColl"] && str1(get(in.value, "field")) == string(field[1]) &&
				get(in.value, "ttl_config", 0) != cty.NilVal {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no google_firestore_field with ttl_config on %s.%s", consts["eventsColl"], field[1])
	}
	if len(m.blocksOf("google_firestore_database")) != 1 {
		t.Error("want one google_firestore_database")
	}
}

// globRe turns an archive_file exclude (doublestar glob) into a regexp.
func globRe(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// TestSourceArchive: the uploaded archive is the repository root without
// what .gcloudignore drops: the root package and its dependencies are in,
// deploy/, the CLI, docs and tests data are out.
func TestSourceArchive(t *testing.T) {
	m := loadModule(t)
	arch := m.blocksOf("data.archive_file")
	if len(arch) != 1 {
		t.Fatalf("want one archive_file, have %d", len(arch))
	}
	a := arch[0].instances[0].value
	if d, _ := str(get(a, "source_dir")); filepath.Clean(d) != ".." {
		t.Errorf("source_dir %q is not the repository root", d)
	}
	excludes := strs(get(a, "excludes"))
	if len(excludes) == 0 {
		t.Fatal("no excludes: .gcloudignore is not honoured")
	}
	var res []*regexp.Regexp
	for _, p := range excludes {
		res = append(res, globRe(p))
	}
	excluded := func(path string) bool {
		for _, re := range res {
			if re.MatchString(path) {
				return true
			}
		}
		return false
	}
	for path, want := range map[string]bool{
		"functions.go": false, "go.mod": false, "go.sum": false,
		"shared/store/firestore.go": false, "functions/scaleup/scaleup.go": false,
		"shared/store/firestore_test.go": false, // tests compile nowhere but cost nothing
		"deploy/main.tf":                 true, "deploy/.build/source.zip": true, "cmd/flexslurm/main.go": true,
		"README.md": true, "docs/events.md": true, ".git/HEAD": true, "bin/flexslurm": true,
		"shared/spec/testdata/example.golden": true, "cloudbuild.yaml": true, ".run/local/ScaleUp.log": true,
		"examples/cluster_config.json": true, ".ci/run": true,
	} {
		if excluded(path) != want {
			t.Errorf("%s excluded = %v, want %v (excludes %v)", path, !want, want, excludes)
		}
	}
	// The Go buildpack builds the upload's root directory: every root .go
	// file must ship, and none may be a test file (one package only).
	roots, _ := filepath.Glob(filepath.Join("..", "*.go"))
	for _, r := range roots {
		name := filepath.Base(r)
		if strings.HasSuffix(name, "_test.go") {
			t.Errorf("root file %s: the buildpack rejects a second (test) package at the root", name)
		} else if excluded(name) {
			t.Errorf("root file %s is excluded from the upload", name)
		}
	}
}

// readmeRoles returns the roles of README.md's table "Roles granted by
// this configuration".
func readmeRoles(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Roles granted by this configuration"
	_, sec, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	out := map[string]bool{}
	re := regexp.MustCompile("^\\| *`((?:projects/P/)?roles/[A-Za-z0-9_.]+)`")
	for _, l := range strings.Split(sec, "\n") {
		if mm := re.FindStringSubmatch(l); mm != nil {
			out[mm[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md's roles table lists no role")
	}
	return out
}

// grantedRoles returns every role granted by the Terraform configuration
// (the role attribute of any resource instance) and by deploy/*.sh
// (--role=), each with where it is granted.
func grantedRoles(t *testing.T, m *module) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, b := range m.blocks {
		if _, ok := b.body.Attributes["role"]; !ok {
			continue
		}
		if b.instances == nil {
			t.Errorf("%s: for_each could not be evaluated", b.addr())
		}
		for _, in := range b.instances {
			r, ok := roleName(m, get(in.value, "role"))
			if !ok {
				t.Errorf("%s: role is not a known string", b.instAddr(in.key))
				continue
			}
			out[r] = append(out[r], b.instAddr(in.key))
		}
	}
	scripts, _ := filepath.Glob("*.sh")
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, mm := range regexp.MustCompile(`--role[= ]"?(roles/[A-Za-z0-9_.]+)`).FindAllStringSubmatch(string(b), -1) {
			out[mm[1]] = append(out[mm[1]], s)
		}
	}
	return out
}

// roleName returns the role a binding grants: a predefined role's name, or
// for one of this configuration's custom roles "projects/P/roles/ROLE_ID"
// as README.md writes it, with its for_each key (the function identity)
// written IDENTITY.
func roleName(m *module, v cty.Value) (string, bool) {
	if r, ok := m.ref1(v); ok {
		if r.b.typ != "google_project_iam_custom_role" || r.attr != "name" || r.instance() == nil {
			return "", false
		}
		id, ok := str(get(r.instance().value, "role_id"))
		if !ok {
			return "", false
		}
		if r.key != "" {
			id = strings.Replace(id, "_"+r.key+"_", "_IDENTITY_", 1)
		}
		return "projects/P/roles/" + id, true
	}
	return str(v)
}

// TestRolesDocumented: the roles granted and the roles README.md lists are
// the same set, and project-wide grants stay within a short allowlist.
func TestRolesDocumented(t *testing.T) {
	m := loadModule(t)
	doc := readmeRoles(t)
	got := grantedRoles(t, m)
	for r, where := range got {
		if !doc[r] {
			t.Errorf("%s is granted (%s) but not documented in README.md", r, strings.Join(where, ", "))
		}
	}
	for r := range doc {
		if _, ok := got[r]; !ok {
			t.Errorf("README.md documents %s, which nothing grants", r)
		}
	}
	for _, typ := range []string{"google_project_iam_binding", "google_project_iam_policy"} {
		if len(m.blocksOf(typ)) > 0 {
			t.Errorf("%s is authoritative: it would remove other principals' grants", typ)
		}
	}
	// Project-wide grants: everything else is on one topic, subscription,
	// bucket, repository or service.
	projectWide := map[string]bool{"roles/datastore.user": true, "roles/logging.logWriter": true,
		// Their permissions are checked against the code by
		// TestComputePermissionsFollowTheCode.
		"projects/P/roles/flexslurm_IDENTITY_compute_project": true, "projects/P/roles/flexslurm_IDENTITY_compute_cluster": true}
	for _, b := range m.blocksOf("google_project_iam_member") {
		for _, in := range b.instances {
			r, _ := roleName(m, get(in.value, "role"))
			if !projectWide[r] {
				t.Errorf("%s grants %s on the whole project", b.instAddr(in.key), r)
			}
			if r == "roles/datastore.user" && !strings.Contains(str1(get(in.value, "condition", 0, "expression")), "/databases/") {
				t.Errorf("%s: Firestore access is not limited to flexslurm's database", b.instAddr(in.key))
			}
		}
	}
}

// TestFormat: `terraform fmt` leaves the configuration as it is.
func TestFormat(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("SKIP (loud): terraform is not installed; formatting not checked")
	}
	cmd := exec.Command(tf, "fmt", "-check", "-diff", ".")
	// No version check against the network.
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("terraform fmt -check: %v\n%s", err, out)
	}
}

// TestEvaluatorSeesDrift guards the checks themselves: a configuration
// whose function names an unregistered entry point and an uncreated topic
// must be caught by the helpers the checks use.
func TestEvaluatorSeesDrift(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "deploy")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*.tf")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), `entry_point = "Expiry", topic = "instance-expiry"`, `entry_point = "Expire", topic = "instance-expired"`, 1)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// file() paths are relative to the module directory.
	if err := os.WriteFile(filepath.Join(base, ".gcloudignore"), []byte("deploy/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	given := map[string]cty.Value{}
	for k, v := range vars {
		given[k] = v
	}
	spec, _ := filepath.Abs(filepath.Join("..", "examples", "cluster_config.json"))
	given["cluster_spec_file"] = cty.StringVal(spec)
	m, err := load(dir, given)
	if err != nil {
		t.Fatal(err)
	}
	reg := registered(t)
	var bad []string
	for _, f := range functionsOf(t, m) {
		entry := str1(get(f.v, "build_config", 0, "entry_point"))
		_, ok := topicName(m, get(f.v, "event_trigger", 0, "pubsub_topic"))
		if !reg[entry] || !ok {
			bad = append(bad, fmt.Sprintf("%s:%s:%v", f.key, entry, ok))
		}
	}
	if diff := cmp.Diff([]string{`google_cloudfunctions2_function.fn["expiry"]:Expire:false`}, bad); diff != "" {
		t.Errorf("drift seen (-want +got):\n%s", diff)
	}
}
