package deploy

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/status"
)

// TestEntryTopics: each entry point registered in functions.go is
// deployed once per topic it reads (shared/config EntryTopics, which the
// functions enforce), and on no other topic.
func TestEntryTopics(t *testing.T) {
	m := loadModule(t)
	reg := registered(t)
	for e := range registeredHTTP(t) {
		delete(reg, e) // served over HTTP, reads no topic (api_test.go)
	}
	if d := cmp.Diff(keys(reg), keys(config.EntryTopics)); d != "" {
		t.Errorf("entry points registered and in shared/config EntryTopics differ (-registered +EntryTopics):\n%s", d)
	}
	deployed := map[string][]string{}
	for _, f := range functionsOf(t, m) {
		entry := str1(get(f.v, "build_config", 0, "entry_point"))
		topic, ok := topicName(m, get(f.v, "event_trigger", 0, "pubsub_topic"))
		if !ok {
			continue // TestFunctions names it
		}
		if !slices.Contains(config.EntryTopics[entry], topic) {
			t.Errorf("%s: entry point %s is triggered by %s, which it refuses (it reads %v)", f.key, entry, topic, config.EntryTopics[entry])
		}
		if slices.Contains(deployed[entry], topic) {
			t.Errorf("%s: a second deployment of %s on %s", f.key, entry, topic)
		}
		deployed[entry] = append(deployed[entry], topic)
	}
	for entry, want := range config.EntryTopics {
		got := slices.Sorted(slices.Values(deployed[entry]))
		if d := cmp.Diff(slices.Sorted(slices.Values(want)), got); d != "" {
			t.Errorf("%s: topics deployed differ from those it reads (-reads +deployed):\n%s", entry, d)
		}
	}
}

// publisherOf names the shared/config publishing identity a grant's member
// is on topic, or "" for a member that is none of them. The API function's
// account is a function account that also publishes cluster specs.
func publisherOf(m *module, member, topic string) string {
	if r, ok := m.markers[member]; ok {
		switch {
		case r.b.typ == "google_service_account" && r.b.name == "slurm" && r.attr == "member":
			return config.PublisherSlurm
		case r.b.typ == "google_service_account" && r.b.name == "node" && r.attr == "member":
			return config.PublisherNode
		case r.b.typ == "google_service_account" && r.b.name == "function" && r.key == "api" && r.attr == "member" && topic == config.TopicClusterSpec:
			return config.PublisherAPI
		case r.b.typ == "google_service_account" && r.b.name == "function" && r.attr == "member":
			return config.PublisherFunction
		case r.b.typ == "google_logging_project_sink" && r.attr == "writer_identity":
			return config.PublisherSink
		}
	}
	return ""
}

// TestTopicPublishers: every publish grant on a topic goes to an identity
// shared/config TopicPublishers allows for it (the table the functions'
// origin checks follow), every identity the table allows and this
// configuration creates is granted, and a dead-letter topic is published
// to by the Pub/Sub service agent alone. No grant lets a node or the
// Slurm account publish a cluster spec; the API function's account alone
// of this configuration's may.
func TestTopicPublishers(t *testing.T) {
	m := loadModule(t)
	agent := "serviceAccount:service-" + "⟨data.google_project.this.number⟩"
	have := map[string]map[string]bool{}
	for _, typ := range []string{"google_pubsub_topic_iam_member", "google_pubsub_topic_iam_binding", "google_pubsub_topic_iam_policy"} {
		for _, b := range m.blocksOf(typ) {
			if typ != "google_pubsub_topic_iam_member" {
				t.Errorf("%s: only additive google_pubsub_topic_iam_member grants are expected", b.addr())
				continue
			}
			for _, in := range b.instances {
				where := b.instAddr(in.key)
				topic, ok := topicName(m, get(in.value, "topic"))
				if !ok {
					t.Errorf("%s: grants on %v, not a topic this configuration creates", where, get(in.value, "topic"))
					continue
				}
				role, member := str1(get(in.value, "role")), str1(get(in.value, "member"))
				if role != "roles/pubsub.publisher" {
					t.Errorf("%s: grants %s on topic %s; only roles/pubsub.publisher is expected", where, role, topic)
				}
				if base, ok := strings.CutSuffix(topic, "-dead-letter"); ok && slices.Contains(status.ConsumedTopics, base) {
					if !strings.HasPrefix(member, agent) {
						t.Errorf("%s: %s may publish to dead-letter topic %s; only the Pub/Sub service agent may", where, member, topic)
					}
					continue
				}
				who := publisherOf(m, member, topic)
				if who == "" || !slices.Contains(config.TopicPublishers[topic], who) {
					t.Errorf("%s: %s (%q) may publish to %s, which only %v may (shared/config TopicPublishers)", where, member, who, topic, config.TopicPublishers[topic])
					continue
				}
				if have[topic] == nil {
					have[topic] = map[string]bool{}
				}
				have[topic][who] = true
			}
		}
	}
	// The operator publishes specs with its own credentials and Cloud
	// Scheduler as its service agent: neither is granted here.
	for topic, whos := range config.TopicPublishers {
		for _, who := range whos {
			if who == config.PublisherOperator || who == config.PublisherScheduler {
				continue
			}
			if !have[topic][who] {
				t.Errorf("shared/config TopicPublishers lets %s publish to %s, but nothing grants it", who, topic)
			}
		}
	}
	if specs := keys(have[config.TopicClusterSpec]); len(specs) > 0 && !slices.Equal(specs, []string{config.PublisherAPI}) {
		t.Errorf("identities of this configuration other than the API function's may publish cluster specs: %v", specs)
	}
}
