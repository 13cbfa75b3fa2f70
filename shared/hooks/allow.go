package hooks

import (
	"fmt"
	"maps"
	"slices"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
)

// Role is what a user that spools messages on a host is there for; it
// decides which topics and event types that user's spool directory may
// carry (RoleSends).
type Role string

// Roles.
const (
	// RoleNode is root on a node VM: the node-side hooks (Prolog, Epilog,
	// HealthCheckProgram) report health failures. The bootstrap reports a
	// failed boot directly, never through the spool.
	RoleNode Role = "node"
	// RoleController is the SlurmUser (and root) on the controller: the
	// controller hooks report jobs and power events, the agent its command
	// results.
	RoleController Role = "controller"
)

// topicKind names one of the topics a spool may publish to; SpoolTopics
// maps it to the topic id.
type topicKind int

const (
	topicJobs topicKind = iota
	topicHealth
	topicResults
)

// roleSends is the allow-list: for each role, the topics (by kind) and the
// event types each may carry. It is the only place this is decided; it
// lists exactly what shared/hooks (hooks.go) and shared/agent (run.go)
// spool, which TestRoleSendsMatchesWhatTheHooksSend checks against the
// hooks' real output.
var roleSends = map[Role]map[topicKind][]string{
	RoleNode: {
		topicHealth: {event.TypeHealthFailure},
	},
	RoleController: {
		topicJobs: {event.TypeJobPending, event.TypeJobStarted, event.TypeJobFinished, event.TypeJobCancelled,
			event.TypeNodeSuspend, event.TypeResumeFailed},
		topicResults: {event.TypeCommandResult},
	},
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { _, ok := roleSends[r]; return ok }

// SpoolTopics are the topic ids the roles send to.
type SpoolTopics struct {
	// Jobs, Health and Results: config.TopicJobs, config.TopicHealthFailure
	// and config.TopicCommandResults when empty.
	Jobs, Health, Results string
}

func (t SpoolTopics) id(k topicKind) string {
	def := func(s, d string) string {
		if s == "" {
			return d
		}
		return s
	}
	switch k {
	case topicJobs:
		return def(t.Jobs, config.TopicJobs)
	case topicHealth:
		return def(t.Health, config.TopicHealthFailure)
	default:
		return def(t.Results, config.TopicCommandResults)
	}
}

// SpoolPolicy says which per-user directories of a spool are published and
// what each may carry. A directory whose user has no role is never read.
type SpoolPolicy struct {
	// Senders maps the uid of each user whose directory is published to
	// its roles (several only where one host plays both parts: the local
	// system and the tests).
	Senders map[int][]Role
	// Topics are the topic ids of the roles.
	Topics SpoolTopics
}

// Allows reports whether the directory of uid may carry a message of
// event type typ to topic.
func (p SpoolPolicy) Allows(uid int, topic, typ string) bool {
	for _, r := range p.Senders[uid] {
		for k, types := range roleSends[r] {
			if p.Topics.id(k) == topic && slices.Contains(types, typ) {
				return true
			}
		}
	}
	return false
}

// Sender reports whether uid's directory is published at all.
func (p SpoolPolicy) Sender(uid int) bool { return len(p.Senders[uid]) > 0 }

// SpoolSenders is the hooks configuration's spool_senders: user id → roles,
// written as {"0": ["node"]} (encoding/json writes integer keys as
// strings).
type SpoolSenders map[int][]Role

// Validate reports unknown roles and negative user ids.
func (s SpoolSenders) Validate() error {
	for uid, roles := range s {
		if uid < 0 {
			return fmt.Errorf("spool_senders: user id %d is negative", uid)
		}
		if len(roles) == 0 {
			return fmt.Errorf("spool_senders: user id %d has no role", uid)
		}
		for _, r := range roles {
			if !r.Valid() {
				return fmt.Errorf("spool_senders: user id %d: role %q is not %q or %q", uid, r, RoleNode, RoleController)
			}
		}
	}
	return nil
}

// Equal reports whether s and o name the same users with the same roles.
func (s SpoolSenders) Equal(o SpoolSenders) bool {
	return maps.EqualFunc(s, o, func(a, b []Role) bool { return slices.Equal(a, b) })
}
