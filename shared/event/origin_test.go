package event

import (
	"errors"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/config"
)

func TestSplitTopic(t *testing.T) {
	for name, want := range map[string][2]string{
		"projects/p/topics/job-pending":       {"p", "job-pending"},
		"projects/domain.com:p/topics/t":      {"domain.com:p", "t"},
		"projects/p/topics/":                  {},
		"projects//topics/t":                  {},
		"projects/p/subscriptions/t":          {},
		"projects/p/topics/t/extra":           {},
		"":                                    {},
		"//pubsub.googleapis.com/projects/p/": {},
	} {
		p, topic, ok := SplitTopic(name)
		if ok != (want != [2]string{}) || p != want[0] || topic != want[1] {
			t.Errorf("SplitTopic(%q) = %q, %q, %v; want %q", name, p, topic, ok, want)
		}
	}
}

// TestCheckOriginSaysWhere: a refusal wraps ErrRefused (never ErrMalformed:
// the payload may be perfectly formed) and names the topic it came from
// and the one that type is accepted from.
func TestCheckOriginSaysWhere(t *testing.T) {
	m := &Message{Topic: "projects/p/topics/" + config.TopicJobs}
	err := CheckOrigin(m, "p", config.EntryScaleUp, TypeClusterApply)
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrMalformed) {
		t.Fatalf("cluster.applied from job-pending: %v, want ErrRefused only", err)
	}
	for _, want := range []string{`"cluster.applied"`, config.TopicJobs, "only from " + config.TopicClusterSpec} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	if err := CheckOrigin(m, "p", config.EntryScaleUp, TypeJobPending); err != nil {
		t.Errorf("job.pending from job-pending: %v", err)
	}
	if err := CheckOrigin(m, "q", config.EntryScaleUp, TypeJobPending); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `"q"`) {
		t.Errorf("a topic of project p for a deployment in q: %v", err)
	}
	if err := CheckOrigin(m, "p", config.EntryRepair, TypeJobPending); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "Repair does not read") {
		t.Errorf("job-pending delivered to Repair: %v", err)
	}
}

// TestTopicTypesCoverEveryType: every payload type travels on exactly one
// topic, and every topic of shared/config carries something.
func TestTopicTypesCoverEveryType(t *testing.T) {
	seen := map[string]string{}
	for topic, types := range TopicTypes {
		for _, typ := range types {
			if prev, ok := seen[typ]; ok {
				t.Errorf("%s travels on %s and %s", typ, prev, topic)
			}
			seen[typ] = topic
		}
	}
	for _, typ := range []string{TypeJobPending, TypeJobStarted, TypeJobFinished, TypeJobCancelled, TypeClusterApply,
		TypeHealthFailure, TypeReconcileTick, TypeSlurmCommand, TypeNodeSuspend, TypeResumeFailed, TypeBootstrapFail, TypeVersionMismatch,
		TypeSlurmSnapshot, TypeCommandResult, TypeAuditLog} {
		if seen[typ] == "" {
			t.Errorf("%s travels on no topic", typ)
		}
	}
	for _, topic := range []string{config.TopicJobs, config.TopicClusterSpec, config.TopicExpiry, config.TopicHealthFailure,
		config.TopicReconcile, config.TopicSlurmCommands, config.TopicSlurmSnapshot, config.TopicCommandResults} {
		if len(TopicTypes[topic]) == 0 {
			t.Errorf("topic %s carries no type", topic)
		}
	}
}
