// Package event defines flexslurm's event payloads (the JSON carried in
// Pub/Sub messages, schema version 1, documented in docs/events.md), decodes
// the CloudEvents that Eventarc / functions-framework hand to a function
// (google.cloud.pubsub.topic.v1.messagePublished), and decodes the Compute
// Engine audit-log LogEntry that a Logging sink publishes.
//
// Decoders never panic, bound their input (MaxPayloadBytes) and return an
// error wrapping ErrMalformed for input that will never decode, so handlers
// can acknowledge it instead of retrying forever.
//
// flexslurm's own payloads decode with encoding/json/v2's rules (the
// github.com/go-json-experiment/json mirror of it, which is the standard
// library's implementation when built with Go 1.27 or GOEXPERIMENT=jsonv2),
// strictly: an unknown member is an error, names match exactly ("Version"
// is not "version"), a member named twice is an error and so is invalid
// UTF-8 — a payload whose reading would depend on a name's case or on
// which of two values wins is malformed — and a time must be RFC 3339
// (encoding/json took a one-digit hour or a comma before the fraction).
// Errors name the member and its JSON pointer ("/nodes/3"). The Pub/Sub
// envelope and the Compute audit-log entry are Google's formats and
// decode leniently, unknown members ignored (FromCloudEvent, DecodeAudit).
//
// Of flexslurm's packages it imports only config (topic ids),
// nodeconfig and slurmstate (the typed Slurm facts of a snapshot).
package event

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/flexslurm/flexslurm/shared/inputs"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/text"
)

// SchemaVersion is the version of every payload defined here.
const SchemaVersion = 1

// MaxPayloadBytes bounds a decoded message payload (Pub/Sub allows 10 MB; no
// flexslurm payload comes near 1 MiB, so more is malformed).
const MaxPayloadBytes = 1 << 20

// ErrMalformed marks input that can never be decoded or is invalid. A
// handler logs and acknowledges it (returns nil): retrying cannot help.
var ErrMalformed = errors.New("malformed event")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// malformedJSON wraps a decoding error: what was being decoded, then the
// JSON error, which names the member and where it is.
func malformedJSON(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrMalformed, what, err)
}

// Payload types, in the "type" field of every payload.
const (
	TypeJobPending      = "job.pending"           // Slurm put the job in PENDING and asked for nodes (ResumeProgram), or it was requeued
	TypeJobStarted      = "job.started"           // the job started (PrologSlurmctld)
	TypeJobFinished     = "job.finished"          // the job ended (EpilogSlurmctld)
	TypeJobCancelled    = "job.cancelled"         // the job was cancelled while pending
	TypeClusterApply    = "cluster.applied"       // a validated cluster spec was applied (created or resized)
	TypeHealthFailure   = "health.failure"        // a node's health check failed or was inconclusive
	TypeReconcileTick   = "reconcile.tick"        // Cloud Scheduler's periodic tick
	TypeSlurmCommand    = "slurm.command"         // a command for the Slurm agent
	TypeNodeSuspend     = "node.suspend"          // Slurm powered nodes down (SuspendProgram): release their VMs
	TypeResumeFailed    = "node.resume_failed"    // Slurm gave up on nodes it resumed (ResumeFailProgram)
	TypeBootstrapFail   = "node.bootstrap_failed" // a VM's bootstrap (flexslurm node boot) failed: its node will not register
	TypeVersionMismatch = "node.version_mismatch" // a VM's flexslurm binary is not the version of the functions that built its template
	TypeSlurmSnapshot   = "slurm.snapshot"        // the agent's periodic view of Slurm, for the reconciler
	TypeCommandResult   = "slurm.command_result"  // the agent's report of one command it ran
)

// Header is common to every payload.
type Header struct {
	Version int    `json:"version"` // SchemaVersion
	Type    string `json:"type"`    // one of the Type* constants
	Cluster string `json:"cluster"` // cluster id
}

// Job is a job lifecycle report (types job.*), published by the Slurm hooks
// to the job-pending topic.
type Job struct {
	Header
	JobID     string `json:"job_id"`              // Slurm job id (digits)
	Partition string `json:"partition,omitempty"` // Slurm partition
	// NodeCount is the number of nodes the job needs (≥ 1 for job.pending).
	NodeCount int `json:"node_count,omitempty"`
	// Nodes are the Slurm nodes the job was allocated (ResumeProgram's
	// SLURM_RESUME_FILE); empty when flexslurm should choose.
	Nodes []string `json:"nodes,omitempty"`
	// Requeued is true when the job is pending again after it had started.
	Requeued bool `json:"requeued,omitempty"`
	// NodesUp (job.finished only) is true when the hook saw every one of
	// Nodes up in Slurm as the job ended (none powering up or powered
	// down): the job ran there, so their capacity came, whether or not
	// flexslurm has seen the VMs yet. False when the hook could not tell.
	NodesUp bool `json:"nodes_up,omitempty"`
	// TimeLimit is the job's time limit in seconds (0 = unknown or none).
	TimeLimitSeconds int64     `json:"time_limit_s,omitempty"`
	ReportedAt       time.Time `json:"reported_at,omitzero"`
}

// Cluster is published by `flexslurm apply` after validating a spec.
type Cluster struct {
	Header
	// Spec is the effective cluster spec (shared/spec EffectiveJSON).
	Spec json.RawMessage `json:"spec"`
	// Node are the deployment's node settings, images resolved by
	// `flexslurm apply` (shared/nodeconfig Settings).
	Node      *nodeconfig.Settings `json:"node"`
	AppliedAt time.Time            `json:"applied_at,omitzero"`
}

// Health verdicts a health.failure carries (the node-side check's verdict;
// PASS is never published).
const (
	// VerdictFail: the check found a fault. The hook drained the node;
	// flexslurm repairs it (docs/design/repair.md, "Health repair").
	VerdictFail = "FAIL"
	// VerdictInconclusive: the check could not decide (it timed out, could
	// not run, a probe was unavailable). The hook left the node in
	// service; repeated verdicts drain it for diagnosis.
	VerdictInconclusive = "INCONCLUSIVE"
)

// The node-side hooks whose health check a health.failure reports
// (Health.Hook): Slurm's Prolog, Epilog and HealthCheckProgram on the node.
// A report without one (a hook of an earlier version, or none: an
// operator's reportFaultyNodes) is a "health check" failure.
const (
	HealthHookProlog      = "prolog"
	HealthHookEpilog      = "epilog"
	HealthHookHealthCheck = "health_check"
)

// HealthHooks lists the values Health.Hook may take besides "".
var HealthHooks = []string{HealthHookProlog, HealthHookEpilog, HealthHookHealthCheck}

// Health is a health-check verdict published by the node-side hooks: a
// failure (FAIL) or an inconclusive check (INCONCLUSIVE).
type Health struct {
	Header
	// Hook is the hook whose check this is (HealthHooks; "" unknown). It
	// is the reporting VM's word, shown in messages, never decided on.
	Hook       string `json:"hook,omitempty"`
	Node       string `json:"node"`       // Slurm node name
	Generation int64  `json:"generation"` // node generation the check ran on (0 = unknown, resolved from the VM name)
	VMName     string `json:"vm_name,omitempty"`
	JobID      string `json:"job_id,omitempty"`
	// JobState is the job's state as the hook saw it: "pending", "requeued",
	// "running" or "" when no job was involved.
	JobState string   `json:"job_state,omitempty"`
	Verdict  string   `json:"verdict"`           // VerdictFail or VerdictInconclusive
	Reasons  []string `json:"reasons,omitempty"` // at most 16, each at most 512 bytes
	// Drained is set by the hook when, after it drained the node on a FAIL,
	// `scontrol show node` showed the node DRAINED: the DRAIN flag with no
	// job left on it (base state neither allocated nor mixed, not
	// completing). False when the node was still draining, or unknown.
	Drained   bool      `json:"drained,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

// Node is a node power report (types node.suspend, node.resume_failed),
// published by SuspendProgram / ResumeFailProgram to the job-pending topic.
type Node struct {
	Header
	Nodes      []string  `json:"nodes"`            // Slurm node names (expanded hostlist), at most 10000
	Reason     string    `json:"reason,omitempty"` // at most 512 bytes
	ReportedAt time.Time `json:"reported_at,omitzero"`
}

// Bootstrap steps a node.bootstrap_failed names (Bootstrap.Step).
const (
	BootstrapStepIdentity = "identity" // instance name, zone, project or the node config attribute
	BootstrapStepFirewall = "firewall" // restricting the metadata server to root
	BootstrapStepMungeKey = "munge_key"
	BootstrapStepHome     = "home"
	BootstrapStepMunged   = "munged"
	BootstrapStepHooks    = "hooks"
	BootstrapStepSlurmd   = "slurmd"
)

// Bootstrap reports that a VM's bootstrap failed (type
// node.bootstrap_failed), published by the VM to the job-pending topic: its
// node will not register in Slurm. flexslurm counts it toward the pool's
// bootstrap breaker and replaces the VM.
type Bootstrap struct {
	Header
	Node   string `json:"node"`    // Slurm node name
	VMName string `json:"vm_name"` // "<node>-g<generation>"
	// Step is the step that failed (BootstrapStep*).
	Step string `json:"step"`
	// Error is the failure, at most 512 bytes.
	Error    string    `json:"error,omitempty"`
	FailedAt time.Time `json:"failed_at,omitzero"`
}

var bootstrapSteps = []string{BootstrapStepIdentity, BootstrapStepFirewall, BootstrapStepMungeKey, BootstrapStepHome,
	BootstrapStepMunged, BootstrapStepHooks, BootstrapStepSlurmd}

// DecodeBootstrap decodes and validates a node.bootstrap_failed payload.
func DecodeBootstrap(data []byte) (*Bootstrap, error) {
	var b Bootstrap
	if err := decodePayload(data, &b, &b.Header); err != nil {
		return nil, err
	}
	if b.Type != TypeBootstrapFail {
		return nil, malformed("type %q is not %s", b.Type, TypeBootstrapFail)
	}
	if !ValidNodeName(b.Node) {
		return nil, malformed("node %q is not a valid node name", b.Node)
	}
	if gen, ok := strings.CutPrefix(b.VMName, b.Node+"-g"); !ok || gen == "" || strings.Trim(gen, "0123456789") != "" || !ValidNodeName(b.VMName) {
		return nil, malformed("vm_name %q is not a VM of node %s (<node>-g<generation>)", b.VMName, b.Node)
	}
	found := false
	for _, s := range bootstrapSteps {
		found = found || s == b.Step
	}
	if !found {
		return nil, malformed("step %q is not one of %s", b.Step, strings.Join(bootstrapSteps, ", "))
	}
	if len(b.Error) > MaxHealthReasonBytes {
		return nil, malformed("error of %d bytes is above the limit of %d", len(b.Error), MaxHealthReasonBytes)
	}
	return &b, nil
}

// MaxVersionBytes bounds each version a node.version_mismatch carries.
const MaxVersionBytes = 128

// versionRE is what a version (shared/version.Info.ID) may hold: a module
// version, `git describe`'s output or a commit, with "+" and "-dirty".
var versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

// VersionMismatch reports that a VM's bootstrap runs a flexslurm binary of
// another version than the functions that built its instance template
// (type node.version_mismatch), published by the VM to the job-pending
// topic once its bootstrap ends. The node is not replaced for it: the
// report is recorded on the node for `flexslurm status` to warn about.
type VersionMismatch struct {
	Header
	Node   string `json:"node"`    // Slurm node name
	VMName string `json:"vm_name"` // "<node>-g<generation>"
	// NodeVersion is the version of the binary the VM runs;
	// FunctionsVersion the one recorded in its template
	// (nodeconfig.AttrVersion).
	NodeVersion      string    `json:"node_version"`
	FunctionsVersion string    `json:"functions_version"`
	ReportedAt       time.Time `json:"reported_at,omitzero"`
}

// DecodeVersionMismatch decodes and validates a node.version_mismatch
// payload.
func DecodeVersionMismatch(data []byte) (*VersionMismatch, error) {
	var v VersionMismatch
	if err := decodePayload(data, &v, &v.Header); err != nil {
		return nil, err
	}
	if v.Type != TypeVersionMismatch {
		return nil, malformed("type %q is not %s", v.Type, TypeVersionMismatch)
	}
	if !ValidNodeName(v.Node) {
		return nil, malformed("node %q is not a valid node name", v.Node)
	}
	if gen, ok := strings.CutPrefix(v.VMName, v.Node+"-g"); !ok || gen == "" || strings.Trim(gen, "0123456789") != "" || !ValidNodeName(v.VMName) {
		return nil, malformed("vm_name %q is not a VM of node %s (<node>-g<generation>)", v.VMName, v.Node)
	}
	for _, f := range []struct{ name, v string }{{"node_version", v.NodeVersion}, {"functions_version", v.FunctionsVersion}} {
		if len(f.v) > MaxVersionBytes || !versionRE.MatchString(f.v) {
			return nil, malformed("%s %q is not a version (letters, digits, . _ + -, at most %d bytes)", f.name, f.v, MaxVersionBytes)
		}
	}
	if v.NodeVersion == v.FunctionsVersion {
		return nil, malformed("node_version and functions_version are both %q: no mismatch", v.NodeVersion)
	}
	return &v, nil
}

// SnapshotNode is one node in a Slurm snapshot: its name and its facts,
// which travel as Slurm's words — "state" (the base state, lower case:
// idle, allocated, mixed, down, …), "flags" (upper case: CLOUD,
// POWERED_DOWN, POWERING_UP, DRAIN, NOT_RESPONDING, …) and "reason" — and
// are parsed again by DecodeSnapshot (slurmstate.ParseNode), which also
// decides whose reason it is: a snapshot of any agent version decodes to
// the same facts.
type SnapshotNode struct {
	Name string `json:"name"`
	slurmstate.Node
}

// SnapshotJob is one pending or running job in a Slurm snapshot.
type SnapshotJob struct {
	ID        string              `json:"id"`
	State     slurmstate.JobState `json:"state"`            // PENDING, RUNNING, CONFIGURING, COMPLETING, …
	Reason    string              `json:"reason,omitempty"` // for display
	Partition string              `json:"partition,omitempty"`
	Nodes     []string            `json:"nodes,omitempty"`
	NodeCount int                 `json:"node_count,omitempty"`
	Restarts  int                 `json:"restarts,omitempty"`
	// TimeLimitSeconds is the job's time limit (0 = unknown or none).
	TimeLimitSeconds int64 `json:"time_limit_s,omitempty"`
}

// SlurmSnapshot is the agent's periodic view of Slurm (topic slurm-snapshot).
type SlurmSnapshot struct {
	Header
	TakenAt time.Time      `json:"taken_at"`
	Nodes   []SnapshotNode `json:"nodes"`
	Jobs    []SnapshotJob  `json:"jobs"`
	// Config is the agent's comparison of its cluster spec with the
	// configuration slurmctld runs with; nil when it could not compare.
	Config *ConfigCheck `json:"config,omitempty"`
}

// Limits of a ConfigCheck.
const (
	MaxConfigDivergences    = 100
	MaxConfigDivergenceText = 2048
)

// ConfigCheck is what the agent found comparing its cluster spec with
// Slurm's live configuration (shared/slurm Diverge).
type ConfigCheck struct {
	// SpecSHA256 is the hex SHA-256 of the effective spec the agent
	// compared (as the cluster record's spec_sha256): when it differs from
	// the applied spec's, the agent runs with another spec.
	SpecSHA256 string `json:"spec_sha256"`
	// Divergences are the ways Slurm cannot serve that spec, each with the
	// slurm.conf change that fixes it; empty when it can.
	Divergences []ConfigDivergence `json:"divergences,omitempty"`
}

// ConfigDivergence is one way Slurm's configuration cannot serve the spec.
type ConfigDivergence struct {
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// CommandResult is the agent's report of one command (topic slurm-command-results).
type CommandResult struct {
	Header
	ID      string    `json:"id"`      // the command's id
	Command SlurmOp   `json:"command"` // the command's name
	OK      bool      `json:"ok"`
	Skipped bool      `json:"skipped,omitempty"` // already applied (idempotent) or not applicable
	Detail  string    `json:"detail,omitempty"`  // scontrol's output or error, at most 2048 bytes
	At      time.Time `json:"at"`
}

// Tick is the reconciler's scheduled tick. An empty body is a tick for every cluster.
type Tick struct {
	Header
}

// SlurmOp is what a Slurm command asks the agent to do; the agent renders
// it to scontrol.
type SlurmOp string

// Slurm command names, as the agent runs them through scontrol.
const (
	SlurmPowerDown      SlurmOp = "power_down"
	SlurmPowerDownForce SlurmOp = "power_down_force"
	SlurmResume         SlurmOp = "resume"
	SlurmPowerUp        SlurmOp = "power_up"
	SlurmDrain          SlurmOp = "drain"
	SlurmDown           SlurmOp = "down"
	SlurmRequeue        SlurmOp = "requeue"
	SlurmStartNow       SlurmOp = "start_now"
	// SlurmJobComment sets a job's Comment to Reason (scontrol update
	// jobid=J comment=…), so its user sees in Slurm why flexslurm does not
	// provision it; an empty Reason clears a comment flexslurm set. A
	// user's own comment (one without flexslurm's prefix) is never
	// overwritten.
	SlurmJobComment SlurmOp = "job_comment"
	// SlurmReservationCreate creates (or moves) a maintenance reservation
	// on nodes; SlurmReservationDelete deletes one. Names carry
	// ReservationPrefix.
	SlurmReservationCreate SlurmOp = "reservation_create"
	SlurmReservationDelete SlurmOp = "reservation_delete"
	// SlurmUpdateAddress sets a node's NodeAddr (and NodeHostname).
	SlurmUpdateAddress SlurmOp = "update_address"
	// SlurmSignal sends Signal to the batch shell of every job running on
	// the nodes (scancel --batch --signal=SIG --state=RUNNING
	// --nodelist=NODES): the warning before a node's VM ends, which a
	// batch script traps to checkpoint (docs/user.md).
	SlurmSignal SlurmOp = "signal"
)

// Signals a SlurmSignal may send: the ones a batch script traps to be told
// of an end (none that cannot be trapped, and none Slurm uses for itself).
var Signals = []string{"USR1", "USR2", "TERM", "INT", "HUP", "URG"}

// JobCommentPrefix starts every job comment flexslurm sets; a comment
// without it is the user's and is never overwritten. MaxJobComment bounds
// its length.
const (
	JobCommentPrefix = slurmstate.ReasonPrefix
	MaxJobComment    = 512
)

// RenderReason renders the reason of a Slurm command as Slurm shows it:
// why, as a decision gave it, after flexslurm's prefix (a node's reason,
// a job's comment), which tells flexslurm's reasons from anyone else's
// when a snapshot is parsed (slurmstate.Owner); a job comment is cut to
// MaxJobComment. An empty why stays empty (no reason; a comment
// cleared). A why that already carries the prefix is one decided before
// reasons were rendered here (replayed from an event's stored actions)
// and is kept as it is.
func RenderReason(op SlurmOp, why string) string {
	if why == "" {
		return ""
	}
	// A why may carry a node's health reasons or a job's fields: one
	// line, so that it neither ends a line of Slurm's state or of
	// `scontrol show -o` output nor is refused by DecodeSlurmCommand.
	r := inputs.OneLine(why)
	if !strings.HasPrefix(r, slurmstate.ReasonPrefix) {
		r = slurmstate.ReasonPrefix + " " + r
	}
	if op == SlurmJobComment {
		r = text.Truncate(r, MaxJobComment) // never splits a UTF-8 sequence
	}
	return r
}

// SlurmCommand asks the Slurm agent to run one scontrol command.
type SlurmCommand struct {
	Header
	ID      string   `json:"id"` // deterministic: the agent applies each id once
	Command SlurmOp  `json:"command"`
	Nodes   []string `json:"nodes,omitempty"`
	JobID   string   `json:"job_id,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// Reservation names a maintenance reservation (reservation_create,
	// reservation_delete); it always starts with ReservationPrefix.
	Reservation string `json:"reservation,omitempty"`
	// StartTime and DurationSeconds place a reservation (reservation_create).
	StartTime       time.Time `json:"start_time,omitzero"`
	DurationSeconds int64     `json:"duration_s,omitempty"`
	// Address is a node's new NodeAddr (update_address).
	Address string `json:"address,omitempty"`
	// Signal is the signal a SlurmSignal sends, one of Signals.
	Signal string `json:"signal,omitempty"`
}

// ReservationPrefix starts the name of every Slurm reservation flexslurm
// creates; flexslurm never touches a reservation without it.
const ReservationPrefix = "flexslurm-"

var (
	jobIDRe    = regexp.MustCompile(`^[0-9]{1,12}(_[0-9]{1,9})?$`)
	clusterRe  = regexp.MustCompile(`^[a-z][a-z0-9]{0,9}$`)
	nodeNameRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// reservationRe: flexslurm's prefix, then Slurm-safe characters.
	reservationRe = regexp.MustCompile(`^flexslurm-[a-z0-9-]{1,100}$`)
	// addressRe: an IPv4/IPv6 address or a host name.
	addressRe = regexp.MustCompile(`^[A-Za-z0-9.:-]{1,253}$`)
)

// ValidNodeName reports whether s is an acceptable flexslurm Slurm node
// name: lowercase RFC1035 characters, at most 63 bytes (Compute's name limit).
func ValidNodeName(s string) bool {
	// nodeNameRe, without the regexp machinery: a snapshot checks every
	// node's name (TestValidatorsMatchTheirPatterns).
	if len(s) == 0 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validJobID reports whether s matches jobIDRe (the same test by hand: a
// snapshot checks every job's id).
func validJobID(s string) bool {
	digits := func(s string, max int) bool {
		if len(s) == 0 || len(s) > max {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	id, task, array := strings.Cut(s, "_")
	return digits(id, 12) && (!array || digits(task, 9))
}

// decodeStrict decodes data into v, refusing unknown members and a second
// value after the first.
func decodeStrict(data []byte, v any) error {
	_, err := decodeStrictRest(data, v)
	return err
}

// strictOptions are the options of a payload's decode: encoding/json/v2's
// defaults (exact names; duplicate names and invalid UTF-8 rejected) and
// unknown members rejected.
var strictOptions = jsonv2.RejectUnknownMembers(true)

// valueDecoder reads one JSON value from a byte slice, reporting where it
// ended. Pooled: a jsontext.Decoder keeps the stacks it grew.
type valueDecoder struct {
	buf bytes.Buffer // aliases the data being decoded (jsontext reads a bytes.Buffer in place)
	dec jsontext.Decoder
}

var valueDecoders = sync.Pool{New: func() any { return new(valueDecoder) }}

// decodeStrictRest is decodeStrict, also reporting whether a closing
// bracket or brace follows the value (after white space), which is not an
// error here: a payload with one is a malformed header (PeekHeader), not
// a malformed body. Anything else after the value is an error.
func decodeStrictRest(data []byte, v any) (rest bool, err error) {
	if len(data) > MaxPayloadBytes {
		return false, malformed("payload is %d bytes, above the %d-byte limit", len(data), MaxPayloadBytes)
	}
	d := valueDecoders.Get().(*valueDecoder)
	d.buf = *bytes.NewBuffer(data)
	d.dec.Reset(&d.buf, strictOptions)
	err = jsonv2.UnmarshalDecode(&d.dec, v)
	end := d.dec.InputOffset()
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf) // no reference to data stays in the pool
	valueDecoders.Put(d)
	if err != nil {
		return false, malformedJSON("decoding payload", err)
	}
	tail := bytes.TrimLeft(data[end:], " \t\r\n")
	switch {
	case len(tail) == 0:
		return false, nil
	case tail[0] == ']' || tail[0] == '}':
		return true, nil
	default:
		return false, malformed("trailing data after the JSON payload at byte %d", len(data)-len(tail))
	}
}

// decodePayload decodes a payload whose type embeds Header (at h) strictly
// and checks its header: the same errors, in the same order, as
// decodeStrict followed by PeekHeader, without reading the bytes a third
// time. Once data decoded strictly into a value embedding Header, with
// nothing but white space after it, PeekHeader's decode of the same bytes
// into a Header gives the same header (the same members, read by the same
// rules, only unknown ones ignored instead of refused) and no error;
// otherwise PeekHeader itself reports.
func decodePayload(data []byte, v any, h *Header) error {
	rest, err := decodeStrictRest(data, v)
	if err != nil {
		return err
	}
	if rest {
		_, err := PeekHeader(data)
		return err
	}
	return checkHeader(*h)
}

// PeekHeader reads the common header of a payload.
func PeekHeader(data []byte) (Header, error) {
	var h Header
	if len(data) > MaxPayloadBytes {
		return h, malformed("payload is %d bytes, above the %d-byte limit", len(data), MaxPayloadBytes)
	}
	// The payload's rules (exact names, no duplicates, valid UTF-8), but
	// other members ignored: the header of any payload type.
	if err := jsonv2.Unmarshal(data, &h); err != nil {
		return h, malformedJSON("decoding payload header", err)
	}
	return h, checkHeader(h)
}

func checkHeader(h Header) error {
	if h.Version != SchemaVersion {
		return malformed("payload version %d is not supported (want %d)", h.Version, SchemaVersion)
	}
	if !clusterRe.MatchString(h.Cluster) {
		return malformed("cluster %q is not a cluster id (^[a-z][a-z0-9]{0,9}$)", h.Cluster)
	}
	return nil
}

// DecodeJob decodes and validates a job.* payload.
func DecodeJob(data []byte) (*Job, error) {
	var j Job
	if err := decodePayload(data, &j, &j.Header); err != nil {
		return nil, err
	}
	switch j.Type {
	case TypeJobPending, TypeJobStarted, TypeJobFinished, TypeJobCancelled:
	default:
		return nil, malformed("type %q is not a job event", j.Type)
	}
	if !jobIDRe.MatchString(j.JobID) {
		return nil, malformed("job_id %q is not a Slurm job id", j.JobID)
	}
	if j.Type == TypeJobPending && j.NodeCount < 1 && len(j.Nodes) == 0 {
		return nil, malformed("job.pending %s: node_count must be ≥ 1 or nodes given", j.JobID)
	}
	if j.NodeCount < 0 || j.NodeCount > 10000 {
		return nil, malformed("node_count %d is outside 0–10000", j.NodeCount)
	}
	if len(j.Nodes) > 10000 {
		return nil, malformed("%d nodes is above the 10000 limit", len(j.Nodes))
	}
	for _, n := range j.Nodes {
		if !ValidNodeName(n) {
			return nil, malformed("node name %q is not valid", n)
		}
	}
	if j.NodeCount == 0 {
		j.NodeCount = len(j.Nodes)
	}
	if len(j.Nodes) > 0 && len(j.Nodes) != j.NodeCount {
		return nil, malformed("job %s names %d nodes but node_count is %d", j.JobID, len(j.Nodes), j.NodeCount)
	}
	if j.NodesUp && (j.Type != TypeJobFinished || len(j.Nodes) == 0) {
		return nil, malformed("nodes_up is only for a job.finished that names its nodes (%s of job %s names %d)", j.Type, j.JobID, len(j.Nodes))
	}
	return &j, nil
}

// DecodeCluster decodes a cluster.applied payload (the spec itself is
// validated by shared/spec).
func DecodeCluster(data []byte) (*Cluster, error) {
	var c Cluster
	if err := decodePayload(data, &c, &c.Header); err != nil {
		return nil, err
	}
	if c.Type != TypeClusterApply {
		return nil, malformed("type %q is not %s", c.Type, TypeClusterApply)
	}
	if len(c.Spec) == 0 {
		return nil, malformed("cluster.applied without a spec")
	}
	if c.Node == nil {
		return nil, malformed("cluster.applied without node settings (node): apply it with flexslurm apply --node-settings")
	}
	if err := c.Node.Validate(true); err != nil {
		return nil, malformed("cluster.applied node settings: %v", err)
	}
	return &c, nil
}

// Bounds on health-failure evidence.
const (
	MaxHealthReasons     = 16
	MaxHealthReasonBytes = 512
)

// DecodeHealth decodes and validates a health.failure payload: verdict
// FAIL or INCONCLUSIVE (anything else is malformed), drained only with
// FAIL, at most MaxHealthReasons reasons of MaxHealthReasonBytes each.
func DecodeHealth(data []byte) (*Health, error) {
	var h Health
	if err := decodePayload(data, &h, &h.Header); err != nil {
		return nil, err
	}
	if h.Type != TypeHealthFailure {
		return nil, malformed("type %q is not %s", h.Type, TypeHealthFailure)
	}
	if !ValidNodeName(h.Node) {
		return nil, malformed("node %q is not a valid node name", h.Node)
	}
	if h.Generation < 0 {
		return nil, malformed("generation %d is negative", h.Generation)
	}
	switch h.Verdict {
	case VerdictFail, VerdictInconclusive:
	default:
		return nil, malformed("verdict %q is not %s or %s", h.Verdict, VerdictFail, VerdictInconclusive)
	}
	if h.Drained && h.Verdict != VerdictFail {
		return nil, malformed("drained is only reported with a %s verdict (the hook drains on %s only)", VerdictFail, VerdictFail)
	}
	if h.JobID != "" && !jobIDRe.MatchString(h.JobID) {
		return nil, malformed("job_id %q is not a Slurm job id", h.JobID)
	}
	switch h.JobState {
	case "", "pending", "requeued", "running":
	default:
		return nil, malformed("job_state %q is not one of pending, requeued, running", h.JobState)
	}
	if h.Hook != "" && !slices.Contains(HealthHooks, h.Hook) {
		return nil, malformed("hook %q is not one of %s", h.Hook, strings.Join(HealthHooks, ", "))
	}
	if len(h.Reasons) > MaxHealthReasons {
		return nil, malformed("%d reasons is above the limit of %d", len(h.Reasons), MaxHealthReasons)
	}
	for _, r := range h.Reasons {
		if len(r) > MaxHealthReasonBytes {
			return nil, malformed("a reason of %d bytes is above the limit of %d", len(r), MaxHealthReasonBytes)
		}
	}
	return &h, nil
}

// DecodeTick decodes a reconcile tick; an empty or "{}" body is a tick for
// every cluster.
func DecodeTick(data []byte) (*Tick, error) {
	t := &Tick{}
	s := strings.TrimSpace(string(data))
	if s == "" || s == "{}" {
		return t, nil
	}
	if err := decodeStrict(data, t); err != nil {
		return nil, err
	}
	if t.Type != TypeReconcileTick {
		return nil, malformed("type %q is not %s", t.Type, TypeReconcileTick)
	}
	if t.Cluster != "" && !clusterRe.MatchString(t.Cluster) {
		return nil, malformed("cluster %q is not a cluster id", t.Cluster)
	}
	return t, nil
}

// DecodeSlurmCommand decodes a slurm.command payload.
func DecodeSlurmCommand(data []byte) (*SlurmCommand, error) {
	var c SlurmCommand
	if err := decodePayload(data, &c, &c.Header); err != nil {
		return nil, err
	}
	if c.Type != TypeSlurmCommand {
		return nil, malformed("type %q is not %s", c.Type, TypeSlurmCommand)
	}
	switch c.Command {
	case SlurmPowerDown, SlurmPowerDownForce, SlurmResume, SlurmPowerUp, SlurmDrain, SlurmDown:
		if len(c.Nodes) == 0 {
			return nil, malformed("%s needs nodes", c.Command)
		}
	case SlurmRequeue, SlurmStartNow, SlurmJobComment:
		if !jobIDRe.MatchString(c.JobID) {
			return nil, malformed("%s needs a job_id, got %q", c.Command, c.JobID)
		}
		if c.Command == SlurmJobComment && c.Reason != "" &&
			(!strings.HasPrefix(c.Reason, JobCommentPrefix) || strings.ContainsAny(c.Reason, "\n\r") || len(c.Reason) > MaxJobComment) {
			return nil, malformed("job_comment: reason must start with %q, be one line and at most %d bytes", JobCommentPrefix, MaxJobComment)
		}
	case SlurmReservationCreate, SlurmReservationDelete:
		if !reservationRe.MatchString(c.Reservation) {
			return nil, malformed("%s: reservation %q must match %s", c.Command, c.Reservation, reservationRe)
		}
		if c.Command == SlurmReservationCreate && (len(c.Nodes) == 0 || c.StartTime.IsZero() || c.DurationSeconds <= 0) {
			return nil, malformed("reservation_create needs nodes, start_time and a positive duration_s")
		}
	case SlurmUpdateAddress:
		if len(c.Nodes) != 1 || !addressRe.MatchString(c.Address) {
			return nil, malformed("update_address needs one node and an address, got %d nodes and %q", len(c.Nodes), c.Address)
		}
	case SlurmSignal:
		if len(c.Nodes) == 0 || !slices.Contains(Signals, c.Signal) {
			return nil, malformed("signal needs nodes and a signal among %v, got %d nodes and %q", Signals, len(c.Nodes), c.Signal)
		}
	default:
		return nil, malformed("unknown command %q", c.Command)
	}
	for _, n := range c.Nodes {
		if !ValidNodeName(n) {
			return nil, malformed("node name %q is not valid", n)
		}
	}
	// The reason becomes one scontrol argument (reason=…, comment=…):
	// no control character, which would end a line of Slurm's state.
	if inputs.HasControl(c.Reason) {
		return nil, malformed("%s: reason %q holds a control character", c.Command, c.Reason)
	}
	return &c, nil
}

// Message is a decoded Pub/Sub message from a messagePublished CloudEvent.
type Message struct {
	ID          string            // Pub/Sub message id (the CloudEvent id when absent)
	Data        []byte            // payload
	Attributes  map[string]string // message attributes
	PublishTime time.Time         // zero when absent
	Topic       string            // "projects/P/topics/T", from the CloudEvent source
}

// pushEnvelope is the data of a google.cloud.pubsub.topic.v1.messagePublished
// CloudEvent: a push delivery's body, {"message": {"data", "attributes",
// "messageId", "message_id", "publishTime", "publish_time"}, "subscription"}
// (https://cloud.google.com/pubsub/docs/push,
// https://github.com/googleapis/google-cloudevents/blob/main/proto/google/events/cloud/pubsub/v1/data.proto).
// message_id is the legacy duplicate of messageId, read when messageId is
// absent; publish_time and anything else (message.@type, orderingKey, …)
// are ignored.
type pushEnvelope struct {
	Message struct {
		Data        pushData          `json:"data"`
		Attributes  map[string]string `json:"attributes"`
		MessageID   string            `json:"messageId"`
		MessageID2  string            `json:"message_id"`
		PublishTime string            `json:"publishTime"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}

// pushData is message.data, base64 decoded with encoding/base64's
// StdEncoding as encoding/json decoded a []byte (padding required, line
// breaks skipped, which encoding/json/v2's RFC 4648 decoding refuses);
// null or absent is no data, "" is empty data.
type pushData []byte

// UnmarshalJSONFrom decodes the base64 string straight from the
// decoder's buffer.
func (p *pushData) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		*p = nil
		return nil
	case '"':
	case '[':
		return errors.New("an array, not a base64 string")
	case '{':
		return errors.New("an object, not a base64 string")
	default:
		return fmt.Errorf("%s, not a base64 string", v)
	}
	s := []byte(v[1 : len(v)-1]) // valid until the decoder reads on
	if bytes.IndexByte(s, '\\') >= 0 {
		if s, err = jsontext.AppendUnquote(nil, v); err != nil {
			return err
		}
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		return err
	}
	*p = b[:n]
	return nil
}

// envelopeOptions decode Google's envelope leniently, as encoding/json
// did: unknown members ignored (v2's default), a duplicate member's last
// value taken, invalid UTF-8 replaced. Names match exactly: Pub/Sub
// writes them so, and encoding/json's case-insensitive match never
// mattered for them (no two of them differ only in case).
var envelopeOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// PubSubType is the CloudEvent type of a Pub/Sub message.
const PubSubType = "google.cloud.pubsub.topic.v1.messagePublished"

// FromCloudEvent decodes a Pub/Sub messagePublished CloudEvent.
func FromCloudEvent(e cloudevents.Event) (*Message, error) {
	if e.Type() != PubSubType {
		return nil, malformed("CloudEvent %s has type %q, want %s", e.ID(), e.Type(), PubSubType)
	}
	if len(e.Data()) > 2*MaxPayloadBytes {
		return nil, malformed("CloudEvent %s data is %d bytes, above the limit", e.ID(), len(e.Data()))
	}
	var env pushEnvelope
	if err := jsonv2.Unmarshal(e.Data(), &env, envelopeOptions); err != nil {
		return nil, malformedJSON(fmt.Sprintf("CloudEvent %s: decoding Pub/Sub envelope", e.ID()), err)
	}
	m := &Message{Data: env.Message.Data, Attributes: env.Message.Attributes, ID: env.Message.MessageID}
	if m.ID == "" {
		m.ID = env.Message.MessageID2
	}
	if m.ID == "" {
		m.ID = e.ID()
	}
	if env.Message.PublishTime != "" {
		if t, err := time.Parse(time.RFC3339Nano, env.Message.PublishTime); err == nil {
			m.PublishTime = t
		}
	}
	if m.PublishTime.IsZero() && !e.Time().IsZero() {
		m.PublishTime = e.Time()
	}
	m.Topic = strings.TrimPrefix(e.Source(), "//pubsub.googleapis.com/")
	return m, nil
}

// MaxNodesPerEvent bounds the node lists of node events and snapshots.
const MaxNodesPerEvent = 10000

// DecodeNode decodes and validates a node.* payload.
func DecodeNode(data []byte) (*Node, error) {
	var n Node
	if err := decodePayload(data, &n, &n.Header); err != nil {
		return nil, err
	}
	if n.Type != TypeNodeSuspend && n.Type != TypeResumeFailed {
		return nil, malformed("type %q is not a node event", n.Type)
	}
	if len(n.Nodes) == 0 || len(n.Nodes) > MaxNodesPerEvent {
		return nil, malformed("%s needs 1–%d nodes, got %d", n.Type, MaxNodesPerEvent, len(n.Nodes))
	}
	for _, name := range n.Nodes {
		if !ValidNodeName(name) {
			return nil, malformed("node name %q is not valid", name)
		}
	}
	if len(n.Reason) > MaxHealthReasonBytes {
		return nil, malformed("reason of %d bytes is above the limit of %d", len(n.Reason), MaxHealthReasonBytes)
	}
	return &n, nil
}

// DecodeSnapshot decodes and validates a slurm.snapshot payload.
func DecodeSnapshot(data []byte) (*SlurmSnapshot, error) {
	var s SlurmSnapshot
	if err := decodePayload(data, &s, &s.Header); err != nil {
		return nil, err
	}
	if err := checkSnapshot(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DecodeSnapshotOrTick decodes a payload of the reconciler's topics: a
// slurm.snapshot (snap) or else a reconcile tick (tick). It returns what
// reading the header (PeekHeader), then DecodeSnapshot when the header is
// a valid snapshot's and DecodeTick otherwise, return — the same values
// and errors — while reading a snapshot's bytes once instead of twice.
//
// Why the one strict decode into a SlurmSnapshot gives what PeekHeader
// would: when it succeeds with nothing but white space after the value,
// its header is the one PeekHeader reads, with no error
// (decodePayload); when it fails, PeekHeader runs to tell a snapshot with
// a bad body (DecodeSnapshot's error is the strict decode's) from a
// payload of another type; with anything after the value, PeekHeader
// fails and the payload is decoded as a tick, as before.
func DecodeSnapshotOrTick(data []byte) (snap *SlurmSnapshot, tick *Tick, err error) {
	var s SlurmSnapshot
	rest, err := decodeStrictRest(data, &s)
	switch {
	case err == nil && !rest:
		if checkHeader(s.Header) == nil && s.Type == TypeSlurmSnapshot {
			if err := checkSnapshot(&s); err != nil {
				return nil, nil, err
			}
			return &s, nil, nil
		}
	case err != nil:
		if h, herr := PeekHeader(data); herr == nil && h.Type == TypeSlurmSnapshot {
			return nil, nil, err
		}
	}
	tick, err = DecodeTick(data)
	return nil, tick, err
}

// checkSnapshot validates a snapshot decoded with a valid header, and
// parses its nodes' and jobs' states.
func checkSnapshot(s *SlurmSnapshot) error {
	if s.Type != TypeSlurmSnapshot {
		return malformed("type %q is not %s", s.Type, TypeSlurmSnapshot)
	}
	if len(s.Nodes) > MaxNodesPerEvent || len(s.Jobs) > 100000 {
		return malformed("snapshot of %d nodes and %d jobs is above the limits (%d nodes, 100000 jobs)", len(s.Nodes), len(s.Jobs), MaxNodesPerEvent)
	}
	for i, n := range s.Nodes {
		if !ValidNodeName(n.Name) {
			return malformed("node name %q is not valid", n.Name)
		}
		s.Nodes[i].Node = slurmstate.ParseNode(n.Name, n.Words(), n.Reason)
	}
	for i, j := range s.Jobs {
		if !validJobID(j.ID) {
			return malformed("job id %q is not a Slurm job id", j.ID)
		}
		s.Jobs[i].State, _ = slurmstate.ParseJobState([]string{string(j.State)})
	}
	if c := s.Config; c != nil {
		if len(c.Divergences) > MaxConfigDivergences {
			return malformed("config: %d divergences are above the limit of %d", len(c.Divergences), MaxConfigDivergences)
		}
		for _, d := range c.Divergences {
			if len(d.Problem) > MaxConfigDivergenceText || len(d.Fix) > MaxConfigDivergenceText {
				return malformed("config: a divergence of %d+%d bytes is above the limit of %d each", len(d.Problem), len(d.Fix), MaxConfigDivergenceText)
			}
		}
	}
	return nil
}
