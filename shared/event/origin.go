package event

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flexslurm/flexslurm/shared/config"
)

// ErrRefused marks an event refused for where it came from: a type its
// topic may not carry, a topic its function does not read, a topic of
// another project, or (shared/identity) a sender that did not prove it is
// the VM the report names. A handler logs it, counts it and acknowledges
// it (retrying cannot make it acceptable); it is never acted on.
var ErrRefused = errors.New("event refused")

// TypeAuditLog stands for a Compute audit-log entry, the one payload
// without a flexslurm header (the expiry log sink's).
const TypeAuditLog = "compute.audit_log"

// TopicTypes are the payload types each topic may carry: the hooks and
// the agent publish each type to its own topic, and a type arriving on any
// other topic is refused where it is decoded (CheckOrigin). Above all a
// cluster spec is accepted only from cluster-spec, which only the operator
// may publish to (config.TopicPublishers).
var TopicTypes = map[string][]string{
	config.TopicJobs: {TypeJobPending, TypeJobStarted, TypeJobFinished, TypeJobCancelled,
		TypeNodeSuspend, TypeResumeFailed, TypeBootstrapFail, TypeVersionMismatch},
	config.TopicClusterSpec:    {TypeClusterApply},
	config.TopicExpiry:         {TypeAuditLog},
	config.TopicHealthFailure:  {TypeHealthFailure},
	config.TopicReconcile:      {TypeReconcileTick},
	config.TopicSlurmSnapshot:  {TypeSlurmSnapshot},
	config.TopicSlurmCommands:  {TypeSlurmCommand},
	config.TopicCommandResults: {TypeCommandResult},
}

// TopicOf is the topic a payload type travels on ("" for an unknown type).
func TopicOf(typ string) string {
	for topic, types := range TopicTypes {
		if slices.Contains(types, typ) {
			return topic
		}
	}
	return ""
}

// SplitTopic splits a full topic name, projects/PROJECT/topics/TOPIC.
func SplitTopic(name string) (project, topic string, ok bool) {
	rest, ok := strings.CutPrefix(name, "projects/")
	if !ok {
		return "", "", false
	}
	project, topic, ok = strings.Cut(rest, "/topics/")
	if !ok || project == "" || topic == "" || strings.Contains(topic, "/") {
		return "", "", false
	}
	return project, topic, true
}

// CheckOrigin refuses (ErrRefused) a message of payload type typ unless it
// came from a topic of project (when project is not empty) that entry
// reads (config.EntryTopics) and that may carry typ (TopicTypes). A
// message whose topic is unknown is refused too: the CloudEvent source
// names it for every delivery Eventarc and functions-framework make.
func CheckOrigin(m *Message, project, entry, typ string) error {
	p, topic, ok := SplitTopic(m.Topic)
	if !ok {
		return fmt.Errorf("%w: %s came from no known topic (CloudEvent source %q)", ErrRefused, describeType(typ), m.Topic)
	}
	if project != "" && p != project {
		return fmt.Errorf("%w: %s came from topic %s of project %q, not this deployment's %q", ErrRefused, describeType(typ), topic, p, project)
	}
	if !slices.Contains(config.EntryTopics[entry], topic) {
		return fmt.Errorf("%w: %s came from topic %s, which %s does not read (it reads %s)", ErrRefused, describeType(typ), topic, entry, strings.Join(config.EntryTopics[entry], ", "))
	}
	if !slices.Contains(TopicTypes[topic], typ) {
		want := TopicOf(typ)
		if want == "" {
			return fmt.Errorf("%w: %s is not a type topic %s carries", ErrRefused, describeType(typ), topic)
		}
		return fmt.Errorf("%w: %s came from topic %s; it is accepted only from %s", ErrRefused, describeType(typ), topic, want)
	}
	return nil
}

func describeType(typ string) string {
	if typ == "" {
		return "a payload without a type"
	}
	return fmt.Sprintf("a %q payload", typ)
}
