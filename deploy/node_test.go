package deploy

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/flexslurm/flexslurm/shared/nodeconfig"
)

// grantsTo lists "role on what" for every IAM member resource that grants
// something to member (a marker string).
func grantsTo(m *module, member string) []string {
	var out []string
	for _, b := range m.blocks {
		if _, ok := b.body.Attributes["role"]; !ok {
			continue
		}
		for _, in := range b.instances {
			if str1(get(in.value, "member")) != member {
				continue
			}
			on := "project"
			switch b.typ {
			case "google_pubsub_topic_iam_member":
				on, _ = topicName(m, get(in.value, "topic"))
				on = "topic " + on
			case "google_secret_manager_secret_iam_member":
				on = "secret " + str1(get(in.value, "secret_id"))
			case "google_storage_bucket_iam_member":
				on = "bucket " + str1(get(in.value, "bucket"))
			case "google_service_account_iam_member":
				if r, ok := m.ref1(get(in.value, "service_account_id")); ok {
					on = "account " + r.b.addr()
				}
			}
			out = append(out, str1(get(in.value, "role"))+" on "+on)
		}
	}
	sort.Strings(out)
	return out
}

func marker(t *testing.T, m *module, addr string) string {
	t.Helper()
	for s, r := range m.markers {
		if r.b.instAddr(r.key)+"."+r.attr == addr {
			return s
		}
	}
	t.Fatalf("no reference to %s in the configuration", addr)
	return ""
}

// TestNodeAccount: the node VMs' account holds exactly its least
// privileges, the functions may act as it and as no other account, and
// the node_settings output is what `flexslurm apply --node-settings`
// reads.
func TestNodeAccount(t *testing.T) {
	m := loadModule(t)
	node := marker(t, m, "google_service_account.node.member")
	want := []string{
		"roles/logging.logWriter on project",
		"roles/pubsub.publisher on topic health-failure",
		"roles/pubsub.publisher on topic job-pending",
		"roles/secretmanager.secretAccessor on secret flexvm-munge-key",
	}
	if d := cmp.Diff(want, grantsTo(m, node)); d != "" {
		t.Errorf("node account's roles (-want +got):\n%s", d)
	}
	for _, id := range []string{"scaleup", "expiry", "repair", "reconcile"} {
		fn := marker(t, m, "google_service_account.function[\""+id+"\"].member")
		var acts []string
		for _, g := range grantsTo(m, fn) {
			if bytes.Contains([]byte(g), []byte("serviceAccountUser")) {
				acts = append(acts, g)
			}
		}
		if d := cmp.Diff([]string{"roles/iam.serviceAccountUser on account google_service_account.node"}, acts); d != "" {
			t.Errorf("function %s acts as (-want +got):\n%s", id, d)
		}
	}
	if name := str1(get(m.blocksOf("google_secret_manager_secret")[0].instances[0].value, "secret_id")); name != "flexvm-munge-key" {
		t.Errorf("munge key secret %q, want flexvm-munge-key", name)
	}

	// The settings output decodes, strictly, as shared/nodeconfig Settings.
	out, diags := m.outputs["node_settings"].Value(m.ctx(cty.NilVal))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	js, err := ctyjson.Marshal(out, out.Type())
	if err != nil {
		t.Fatal(err)
	}
	var s nodeconfig.Settings
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("node_settings %s: %v", js, err)
	}
	if s.Image != "projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570" ||
		s.ConfServer != "flexvm-controller" || s.MungeKeySecret != "projects/my-proj/secrets/flexvm-munge-key/versions/latest" ||
		s.Topics != (nodeconfig.Topics{Jobs: "job-pending", Health: "health-failure"}) || s.Home.Type != nodeconfig.MountNFS || s.Home.Dir != "/home" {
		t.Errorf("node_settings = %+v", s)
	}

	// With a binary URL, the node account may read that bucket, and only it.
	given := maps.Clone(vars)
	given["node_binary_url"] = cty.StringVal("gs://my-proj-flexslurm/bin/flexslurm")
	given["home_nfs_source"] = cty.StringVal("10.0.0.2:/home")
	m2, err := load(".", given)
	if err != nil {
		t.Fatal(err)
	}
	got := grantsTo(m2, marker(t, m2, "google_service_account.node.member"))
	if !slices.Contains(got, "roles/storage.objectViewer on bucket my-proj-flexslurm") || len(got) != len(want)+1 {
		t.Errorf("node account's roles with a binary URL: %v", got)
	}
}
