package lang

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// File is one scenario file (docs/scenarios.md). Every key is optional but
// name, cluster and steps.
type File struct {
	// Name identifies the scenario in reports.
	Name string `yaml:"name"`
	// Description says what the scenario shows.
	Description string `yaml:"description,omitempty"`
	// Cluster is the cluster spec: a path relative to the scenario file, or
	// inline.
	Cluster ClusterRef `yaml:"cluster"`
	// Start is the simulated start time, RFC 3339; default
	// 2026-11-30T00:00:00Z.
	Start string `yaml:"start,omitempty"`
	// Simulator configures the Compute Engine simulator.
	Simulator Simulator `yaml:"simulator,omitempty"`
	// Policy sets flexslurm's decision knobs (plan.Policy).
	Policy Policy `yaml:"policy,omitempty"`
	// Delivery configures the Pub/Sub redelivery of nacked messages.
	Delivery Delivery `yaml:"delivery,omitempty"`
	// Reconcile configures the periodic reconcile tick (Cloud Scheduler).
	Reconcile Reconcile `yaml:"reconcile,omitempty"`
	// Slurm configures the Slurm model.
	Slurm Slurm `yaml:"slurm,omitempty"`
	// RandomFaults, when set, duplicates, delays and crashes messages at
	// random (seeded, decided per message identity).
	RandomFaults *RandomFaults `yaml:"random_faults,omitempty"`
	// Initial is the state before the first step.
	Initial Initial `yaml:"initial,omitempty"`
	// Invariants are checked after every event of the run and at the end.
	Invariants Invariants `yaml:"invariants,omitempty"`
	// Steps are the timed events, faults and assertions, in time order.
	Steps []Step `yaml:"steps"`
	// End is how long the run lasts, from the start; default the last
	// step's time. The run goes on to End processing whatever is due.
	End *Duration `yaml:"end,omitempty"`
	// Final are assertions evaluated at the end.
	Final []Check `yaml:"final,omitempty"`

	path string // the file, for resolving Cluster.Path and reports
}

// Simulator configures dev/computesim.
type Simulator struct {
	// Seed makes the simulator's ids and generated names deterministic.
	Seed uint64 `yaml:"seed,omitempty"`
	// CapacityDelay is how long a resize request stays ACCEPTED before its
	// VMs are created, for every zone and machine type not listed in
	// CapacityDelays. Default 0.
	CapacityDelay Duration `yaml:"capacity_delay,omitempty"`
	// CapacityDelays override CapacityDelay per zone and machine type.
	CapacityDelays []CapacityDelay `yaml:"capacity_delays,omitempty"`
	// AcceptDelay is how long a resize request stays CREATING.
	AcceptDelay Duration `yaml:"accept_delay,omitempty"`
	// DeleteDelay is how long a VM being deleted stays STOPPING.
	DeleteDelay Duration `yaml:"delete_delay,omitempty"`
	// RepairDelay is how long a VM stays REPAIRING after reportHostAsFaulty.
	RepairDelay Duration `yaml:"repair_delay,omitempty"`
	// ExpiryLogStyle is deferredDelete (default) or migDelete.
	ExpiryLogStyle string `yaml:"expiry_log_style,omitempty"`
	// ComputeReadings chooses how the simulator behaves on each open point
	// of Compute behaviour (computesim.ParseReadings: "lenient" (default),
	// "strict", or a comma list such as "lenient,IgnoreLabelFilter"). A
	// RunEndAudit it sets wins over ExpiryLogStyle.
	ComputeReadings string `yaml:"compute_readings,omitempty"`
}

// CapacityDelay is the capacity delay of one zone and machine type; an
// empty zone or machine type matches any.
type CapacityDelay struct {
	Zone        string   `yaml:"zone,omitempty"`
	MachineType string   `yaml:"machine_type,omitempty"`
	Delay       Duration `yaml:"delay"`
}

// Delivery configures Pub/Sub's handling of nacked messages (a push
// subscription's retry policy and dead-letter policy).
type Delivery struct {
	// MinBackoff is the first redelivery delay; default 10s.
	MinBackoff Duration `yaml:"min_backoff,omitempty"`
	// MaxBackoff caps the exponential backoff; default 10m.
	MaxBackoff Duration `yaml:"max_backoff,omitempty"`
	// MaxAttempts is the number of delivery attempts before the message is
	// dead-lettered; default 5 (Pub/Sub's dead-letter default).
	MaxAttempts int `yaml:"max_attempts,omitempty"`
}

// Reconcile configures the periodic reconcile tick.
type Reconcile struct {
	// Every is the tick period (Cloud Scheduler); 0 means no periodic tick.
	Every Duration `yaml:"every,omitempty"`
}

// Slurm configures the Slurm model (package slurmmodel).
type Slurm struct {
	// Simulate makes the model play slurmctld: it schedules submitted jobs
	// on nodes, calls ResumeProgram (job.pending), reports jobs started and
	// finished, suspends idle dynamic nodes (node.suspend) and notices lost
	// nodes. Without it the model only tracks the nodes that snapshot steps
	// name, applying flexslurm's commands and VM registrations to them.
	Simulate bool `yaml:"simulate,omitempty"`
	// SuspendTime is Slurm's SuspendTime: how long a dynamic node stays idle
	// before SuspendProgram powers it down; default 10m.
	SuspendTime Duration `yaml:"suspend_time,omitempty"`
	// ResumeTimeout is Slurm's ResumeTimeout: a node still powering up after
	// it is marked DOWN and ResumeFailProgram runs; 0 (default) never.
	ResumeTimeout Duration `yaml:"resume_timeout,omitempty"`
	// BootTime is how long after its VM runs a node's slurmd registers;
	// default 0.
	BootTime Duration `yaml:"boot_time,omitempty"`
	// SlurmdTimeout is how long a powered-up node without a VM stays
	// responding before Slurm marks it DOWN (simulate only); default 5m.
	SlurmdTimeout Duration `yaml:"slurmd_timeout,omitempty"`
	// SnapshotEvery publishes the model's snapshot (slurm.snapshot) this
	// often; 0 (default) only at snapshot steps.
	SnapshotEvery Duration `yaml:"snapshot_every,omitempty"`
	// PartitionLimits models a slurm.conf whose flex-start partitions carry
	// MaxTime (the pool's flex_start_max_duration) and MaxNodes (its
	// max_node_count), with EnforcePartLimits=ALL: a submission beyond
	// either is refused, as sbatch refuses it. Without it, a job asking for
	// more nodes than the partition has is still refused ("Requested node
	// configuration is not available") and a time limit is not checked.
	PartitionLimits bool `yaml:"partition_limits,omitempty"`
}

// RandomFaults injects delivery faults at random. Every decision is a hash
// of the seed and the message's identity (topic, payload type and subject,
// and how many such messages came before), so a message is treated the same
// whatever other steps a scenario has: a failing chaos scenario keeps its
// faults while it is shrunk.
type RandomFaults struct {
	// Seed selects the faults.
	Seed uint64 `yaml:"seed"`
	// Duplicate is the probability that a message is delivered again
	// (same id), once or twice, within DuplicateWithin of its delivery.
	Duplicate float64 `yaml:"duplicate,omitempty"`
	// DuplicateWithin bounds the duplicates' delay; default 15m.
	DuplicateWithin Duration `yaml:"duplicate_within,omitempty"`
	// Delay is the probability that a message is held for up to MaxDelay.
	// Delayed messages overtake each other: that is the reordering.
	Delay float64 `yaml:"delay,omitempty"`
	// MaxDelay bounds the delay; default 10m.
	MaxDelay Duration `yaml:"max_delay,omitempty"`
	// DelayTopics are the topics whose messages may be delayed; default
	// job-pending, health-failure, instance-expiry and slurm-snapshot
	// (scheduler ticks and cluster specs are never delayed).
	DelayTopics []string `yaml:"delay_topics,omitempty"`
	// Crash is the probability that a delivery attempt crashes at one of its
	// side-effect boundaries (commit, or before or after one of its first
	// three external actions).
	Crash float64 `yaml:"crash,omitempty"`
	// CrashAttempts is how many attempts of one message may crash; default 2.
	CrashAttempts int `yaml:"crash_attempts,omitempty"`
	// Until ends the random faults: messages published after this offset
	// from the start get none; 0 means the whole run.
	Until Duration `yaml:"until,omitempty"`
}

// Initial is the state before the first step.
type Initial struct {
	// Apply delivers the cluster spec at the start (before the first step),
	// as `flexslurm apply` would.
	Apply bool `yaml:"apply,omitempty"`
	// Nodes and Jobs are records written to the store at the start (after
	// Apply), with their JSON field names (model.Node, model.Job).
	Nodes Records `yaml:"nodes,omitempty"`
	Jobs  Records `yaml:"jobs,omitempty"`
	// ForeignVMs are VMs flexslurm does not own, created in the simulator
	// at the start through their own template and MIG.
	ForeignVMs []ForeignVM `yaml:"foreign_vms,omitempty"`
}

// ForeignVM is a VM that is not this cluster's: unlabelled, or labelled for
// another cluster, possibly named like one of this cluster's.
type ForeignVM struct {
	Name string `yaml:"name"`
	// Zone defaults to the first flex-start pool's zone.
	Zone string `yaml:"zone,omitempty"`
	// Labels are the VM's labels (none by default).
	Labels map[string]string `yaml:"labels,omitempty"`
	// MIG is the foreign MIG that holds it; default "user-<name>".
	MIG string `yaml:"mig,omitempty"`
}

// Invariants are properties checked after every event and at the end. A
// violated invariant is reported once, at its first violation, with the
// number of later evaluations that also failed.
type Invariants struct {
	// OneVMPerNode: never two live (not STOPPING) VMs of this cluster for
	// one node.
	OneVMPerNode bool `yaml:"one_vm_per_node,omitempty"`
	// OneRequestPerNode: never two active (CREATING or ACCEPTED) resize
	// requests naming VMs of one node.
	OneRequestPerNode bool `yaml:"one_request_per_node,omitempty"`
	// NoUnrecordedVM: a live VM labelled as this cluster's that no node
	// record names is gone within Within of the moment it became unrecorded.
	NoUnrecordedVM *Within `yaml:"no_unrecorded_vm,omitempty"`
	// StaticAtMin: every pool has min_node_count live VMs for its static
	// nodes, at the latest Within after capacity is available again: after
	// the later of the moment it fell below and the end of any Compute fault
	// window on resize-request creation, plus the capacity, accept and
	// delete delays.
	StaticAtMin *Within `yaml:"static_at_min,omitempty"`
	// IdleDynamicReleased: a dynamic node's VM that Slurm has not allocated
	// to any job for SuspendTime is gone within Within after that
	// (needs slurm.simulate).
	IdleDynamicReleased *Within `yaml:"idle_dynamic_released,omitempty"`
	// RepairProgress: no node record stays in a repair state that waits on
	// flexslurm (await_drain, host_repair, blocked) for longer than Within
	// (from the state's RepairSince). Nodes drained for diagnosis wait for
	// an operator and are not counted.
	RepairProgress *Within `yaml:"repair_progress,omitempty"`
	// ForeignUntouched: every foreign VM still exists and no call flexslurm
	// made names it or its MIG.
	ForeignUntouched bool `yaml:"foreign_untouched,omitempty"`
	// ForeignReservationsUntouched: no Slurm command flexslurm published
	// names a reservation whose name lacks Prefix.
	ForeignReservationsUntouched *Prefix `yaml:"foreign_reservations_untouched,omitempty"`
	// WithinMax: once a step applied another spec, a live VM that a node
	// record names, of a node at or beyond its pool's max_node_count in
	// that spec (or of a pool it dropped), on which no job of the Slurm
	// model runs, is gone within Within of the later of that apply and the
	// moment it was seen so.
	WithinMax *Within `yaml:"within_max,omitempty"`
	// OwnDrainFollowed: a running node that the Slurm model shows drained
	// with flexslurm's health-check reason for the VM its record's current
	// generation names, while the record holds no repair that follows it
	// (none, or await_report), is repaired or undrained within Within of
	// the first evaluation that saw it so: flexslurm finishes what its
	// node-side hook started, even when the health report never arrives
	// (needs the Slurm model).
	OwnDrainFollowed *Within `yaml:"own_drain_followed,omitempty"`
	// ArrivedCapacityKept: a VM of a node that no record has yet held
	// running (capacity that came) is not deleted by flexslurm while a
	// pending job flexslurm assigned the node could use it, per the newest
	// fact, with a new resize request made for the node: capacity that
	// arrives while its request is being cancelled serves the job
	// (docs/design/convergence.md).
	ArrivedCapacityKept bool `yaml:"arrived_capacity_kept,omitempty"`
}

// Within is a time bound. AfterFault extends it after a Compute fault: a
// deadline is never earlier than AfterFault plus Within after the end of
// the last compute_error window (or the last call it failed) on the calls
// the invariant depends on (flexslurm may be backing off then).
type Within struct {
	Within     Duration `yaml:"within"`
	AfterFault Duration `yaml:"after_fault,omitempty"`
}

// Prefix is a name prefix.
type Prefix struct {
	Prefix string `yaml:"prefix"`
}

// Step is one timed entry of the scenario. It has a time and exactly one
// action.
type Step struct {
	// At is the step's time (absolute offset, or +offset from the previous
	// step); default the previous step's time.
	At *At `yaml:"at,omitempty"`
	// Label names the message this step publishes, for later duplicate and
	// release steps and for counters.
	Label string `yaml:"label,omitempty"`
	// Delivery are faults on the message this step publishes.
	Delivery *DeliveryFaults `yaml:"delivery,omitempty"`

	Apply             *ApplyStep             `yaml:"apply,omitempty"`
	Job               *JobStep               `yaml:"job,omitempty"`
	Health            *HealthStep            `yaml:"health,omitempty"`
	Power             *PowerStep             `yaml:"power,omitempty"`
	Snapshot          *SnapshotStep          `yaml:"snapshot,omitempty"`
	Tick              *TickStep              `yaml:"tick,omitempty"`
	Advance           *Duration              `yaml:"advance,omitempty"`
	Expire            *VMRef                 `yaml:"expire,omitempty"`
	DeleteVM          *VMRef                 `yaml:"delete_vm,omitempty"`
	DeleteMIG         *PoolRef               `yaml:"delete_mig,omitempty"`
	FailResizeRequest *FailResizeRequestStep `yaml:"fail_resize_request,omitempty"`
	Capacity          *CapacityDelay         `yaml:"capacity,omitempty"`
	Submit            *SubmitStep            `yaml:"submit,omitempty"`
	Cancel            *CancelStep            `yaml:"cancel,omitempty"`
	Deliveries        *DeliveryRule          `yaml:"deliveries,omitempty"`
	Duplicate         *DuplicateStep         `yaml:"duplicate,omitempty"`
	Release           *ReleaseStep           `yaml:"release,omitempty"`
	Crash             *CrashStep             `yaml:"crash,omitempty"`
	ComputeError      *ComputeErrorStep      `yaml:"compute_error,omitempty"`
	ListOmit          *ListOmitStep          `yaml:"list_omit,omitempty"`
	Shortage          *ShortageStep          `yaml:"shortage,omitempty"`
	LateDecision      *LateDecisionStep      `yaml:"late_decision,omitempty"`
	Assert            []Check                `yaml:"assert,omitempty"`
	Always            *Watch                 `yaml:"always,omitempty"`

	line int
}

// UnmarshalYAML implements yaml.Unmarshaler, recording the step's line.
func (s *Step) UnmarshalYAML(n *yaml.Node) error {
	type plain Step
	if err := n.Decode((*plain)(s)); err != nil {
		return err
	}
	s.line = n.Line
	return nil
}

// Line is the step's line in its file (0 for generated steps).
func (s Step) Line() int { return s.line }

// ApplyStep publishes a cluster.applied event for the scenario's spec, or
// for another spec (a resize).
type ApplyStep struct {
	Cluster *ClusterRef `yaml:"cluster,omitempty"`
}

// JobStep publishes a job report (job-pending topic).
type JobStep struct {
	// Type is pending, started, finished or cancelled.
	Type      string   `yaml:"type"`
	ID        string   `yaml:"id"`
	Partition string   `yaml:"partition,omitempty"`
	Count     int      `yaml:"count,omitempty"`
	Nodes     []string `yaml:"nodes,omitempty"`
	Requeued  bool     `yaml:"requeued,omitempty"`
	// NodesUp (finished only): Slurm showed every one of nodes up as the
	// job ended (EpilogSlurmctld's nodes_up).
	NodesUp bool `yaml:"nodes_up,omitempty"`
	// TimeLimit is the job's time limit.
	TimeLimit Duration `yaml:"time_limit,omitempty"`
	// ReportedAt is when the hook saw the state (offset from the start);
	// default the step's time. An earlier time makes a late report.
	ReportedAt *At `yaml:"reported_at,omitempty"`
}

// HealthStep publishes a health.failure (health-failure topic) with a
// verdict: FAIL (default) or INCONCLUSIVE. With slurm.simulate, a FAIL
// drains the node in the model as the hook does (the job running there is
// requeued), an omitted job and job_state are taken from the model, and an
// omitted drained is whether the model then shows the node drained (DRAIN
// with no job); an INCONCLUSIVE changes nothing in the model.
type HealthStep struct {
	Node       string   `yaml:"node"`
	Generation int64    `yaml:"generation,omitempty"`
	VM         string   `yaml:"vm,omitempty"`
	Job        string   `yaml:"job,omitempty"`
	JobState   string   `yaml:"job_state,omitempty"`
	Reasons    []string `yaml:"reasons,omitempty"`
	// Verdict is FAIL or INCONCLUSIVE; "" is FAIL.
	Verdict string `yaml:"verdict,omitempty"`
	// Drained is the event's drained flag (the hook saw the node drained
	// after its drain); nil takes it from the Slurm model (false without
	// slurm.simulate).
	Drained *bool `yaml:"drained,omitempty"`
}

// PowerStep publishes a node power report (node.suspend or
// node.resume_failed, job-pending topic).
type PowerStep struct {
	// Type is suspend or resume_failed.
	Type   string   `yaml:"type"`
	Nodes  []string `yaml:"nodes"`
	Reason string   `yaml:"reason,omitempty"`
}

// SnapshotStep sets the Slurm model's view of the named nodes and jobs and
// publishes the model's snapshot (slurm-snapshot topic).
type SnapshotStep struct {
	Nodes []SnapshotNode `yaml:"nodes,omitempty"`
	Jobs  []SnapshotJob  `yaml:"jobs,omitempty"`
}

// SnapshotNode is a node's Slurm state, written as scontrol prints it:
// BASE+FLAG+FLAG ("IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING").
type SnapshotNode struct {
	Name   string `yaml:"name"`
	State  string `yaml:"state"`
	Reason string `yaml:"reason,omitempty"`
}

// SnapshotJob is a pending or running job as Slurm shows it.
type SnapshotJob struct {
	ID        string   `yaml:"id"`
	State     string   `yaml:"state"`
	Partition string   `yaml:"partition,omitempty"`
	Nodes     []string `yaml:"nodes,omitempty"`
	NodeCount int      `yaml:"node_count,omitempty"`
	Reason    string   `yaml:"reason,omitempty"`
}

// TickStep publishes one reconcile tick.
type TickStep struct {
	// Cluster limits the tick to one cluster; default every cluster.
	Cluster string `yaml:"cluster,omitempty"`
}

// VMRef names a VM, or a node whose live VM is meant.
type VMRef struct {
	VM   string `yaml:"vm,omitempty"`
	Node string `yaml:"node,omitempty"`
	// Optional makes the step do nothing when there is no such VM (instead
	// of failing the run).
	Optional bool `yaml:"optional,omitempty"`
}

// PoolRef names a node pool.
type PoolRef struct {
	Pool string `yaml:"pool"`
}

// FailResizeRequestStep ends active resize requests as FAILED, as Compute
// does when provisioning fails for good.
type FailResizeRequestStep struct {
	// Name is a resize request name; Match a regular expression on names;
	// Node selects the requests naming a VM of that node.
	Name  string `yaml:"name,omitempty"`
	Match string `yaml:"match,omitempty"`
	Node  string `yaml:"node,omitempty"`
	// Code and Message are status.error; default
	// ZONE_RESOURCE_POOL_EXHAUSTED.
	Code    string `yaml:"code,omitempty"`
	Message string `yaml:"message,omitempty"`
}

// SubmitStep submits a job to the Slurm model (slurm.simulate).
type SubmitStep struct {
	ID        string   `yaml:"id"`
	Nodes     int      `yaml:"nodes"`
	Partition string   `yaml:"partition,omitempty"`
	Runtime   Duration `yaml:"runtime,omitempty"`
	// TimeLimit is the job's time limit (sbatch --time); 0: none.
	TimeLimit Duration `yaml:"time_limit,omitempty"`
	// GPUs is the GPUs the job asks for on each node (sbatch
	// --gres=gpu:N): with it, jobs share a node whose GPUs (the pool's
	// accelerator_count, gres.conf) they do not use up; 0: the job has
	// its nodes to itself.
	GPUs int `yaml:"gpus,omitempty"`
	// Comment is the job's own comment (sbatch --comment), which
	// flexslurm never overwrites; "": none.
	Comment string `yaml:"comment,omitempty"`
}

// CancelStep cancels a job in the Slurm model (slurm.simulate).
type CancelStep struct {
	ID string `yaml:"id"`
}

// DeliveryFaults are faults on one message.
type DeliveryFaults struct {
	// Delay holds the message for this long before its first delivery.
	Delay Duration `yaml:"delay,omitempty"`
	// Duplicates delivers the message again (same id) at these offsets from
	// its first delivery; 0s is immediately after it.
	Duplicates []Duration `yaml:"duplicates,omitempty"`
	// RedeliverEvery delivers the message again every period, for
	// RedeliverFor after its first delivery.
	RedeliverEvery Duration `yaml:"redeliver_every,omitempty"`
	RedeliverFor   Duration `yaml:"redeliver_for,omitempty"`
	// Hold keeps the message in the named hold until a release step.
	Hold string `yaml:"hold,omitempty"`
	// Crash crashes the message's delivery attempts: the first attempt at
	// Crash[0], the second at Crash[1], … (points as in CrashStep).
	Crash []string `yaml:"crash,omitempty"`
}

// DeliveryRule applies faults to the messages published from its step on
// that match it: every topic and payload type, audit entries included.
type DeliveryRule struct {
	// Topic, Type, VM (a regular expression on the audit entry's instance),
	// Node and Job select messages; empty fields match any.
	Topic string `yaml:"topic,omitempty"`
	Type  string `yaml:"type,omitempty"`
	VM    string `yaml:"vm,omitempty"`
	Node  string `yaml:"node,omitempty"`
	Job   string `yaml:"job,omitempty"`
	// Times is how many messages the rule applies to; 0 means all.
	Times int `yaml:"times,omitempty"`
	// For is how long the rule stays in force; 0 means until the end.
	For Duration `yaml:"for,omitempty"`
	// Label names the matched messages.
	Label string `yaml:"label,omitempty"`
	// DeliveryFaults are applied to each matched message.
	DeliveryFaults `yaml:",inline"`
}

// DuplicateStep delivers labelled messages again, with their ids.
type DuplicateStep struct {
	Label string `yaml:"label"`
	// After delays the duplicate; default 0 (now).
	After Duration `yaml:"after,omitempty"`
	// Times is how many copies; default 1.
	Times int `yaml:"times,omitempty"`
}

// ReleaseStep delivers the messages of a hold.
type ReleaseStep struct {
	Hold string `yaml:"hold"`
	// Order is held (default: the order they were held in), reverse, or
	// shuffle (by Seed).
	Order string `yaml:"order,omitempty"`
	Seed  uint64 `yaml:"seed,omitempty"`
}

// CrashStep crashes the next matching delivery attempts at a side-effect
// boundary of the handler. Point is one of:
//
//	commit              after the Firestore transaction committed, before any action
//	before:KIND         before the first external action of that kind
//	after:KIND          after the first external action of that kind ran
//	before#N, after#N   before or after the Nth external action (1-based)
//
// KIND is an action type of shared/plan in snake_case (create_resize_request,
// cancel_resize_request, delete_vms, slurm_command, ensure_pool, alert, …);
// action:KIND means before:KIND. A crash stops the handler there and makes
// it return an error: the message is nacked and redelivered. A crash "after"
// the last action makes the attempt end as a crash although every side
// effect happened (the acknowledgement was lost).
type CrashStep struct {
	Point string `yaml:"point"`
	Topic string `yaml:"topic,omitempty"`
	Type  string `yaml:"type,omitempty"`
	Label string `yaml:"label,omitempty"`
	// Times is how many attempts crash; default 1.
	Times int `yaml:"times,omitempty"`
}

// ComputeErrorStep makes Compute calls fail: calls flexslurm makes that
// match Method, Path and Body get Status (an HTTP error with Reason), or,
// with Code, succeed with an operation that ends DONE with that error code
// (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED, …). It applies to the next
// Times matching calls, or to every matching call for For (or until Until),
// or both (whichever ends first); with neither, to one call.
type ComputeErrorStep struct {
	// Name identifies the fault in counters (injected_errors); default
	// "compute-error-<step index>".
	Name string `yaml:"name,omitempty"`
	// Method is the HTTP method (POST, GET, DELETE); empty matches any.
	Method string `yaml:"method,omitempty"`
	// Path and Body are regular expressions on the URL path and the request
	// body; empty matches any.
	Path string `yaml:"path,omitempty"`
	Body string `yaml:"body,omitempty"`
	// Status is the HTTP status (default 503 with Code, else 500).
	Status  int      `yaml:"status,omitempty"`
	Reason  string   `yaml:"reason,omitempty"`
	Code    string   `yaml:"code,omitempty"`
	Message string   `yaml:"message,omitempty"`
	Times   int      `yaml:"times,omitempty"`
	For     Duration `yaml:"for,omitempty"`
	Until   *At      `yaml:"until,omitempty"`
}

// ShortageStep makes Compute short of capacity or quota, as Compute
// reports it: resize requests still queue (insert succeeds), stay ACCEPTED
// and carry each provisioning attempt's error in status.lastAttempt.error
// until the shortage ends, then are provisioned (docs/scenarios.md). It
// lasts For (or until Until); with neither, until the end.
type ShortageStep struct {
	// Name identifies the shortage; a later shortage of the same name
	// replaces it. Default "shortage-<step index>".
	Name string `yaml:"name,omitempty"`
	// Zone and MachineType select the requests short; empty matches any.
	Zone        string `yaml:"zone,omitempty"`
	MachineType string `yaml:"machine_type,omitempty"`
	// Code is ZONE_RESOURCE_POOL_EXHAUSTED (default),
	// ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS, RESOURCE_POOL_EXHAUSTED or
	// QUOTA_EXCEEDED.
	Code    string `yaml:"code,omitempty"`
	Message string `yaml:"message,omitempty"`
	// Metric and Limit describe a quota shortage (errorDetails.quotaInfo).
	Metric string   `yaml:"metric,omitempty"`
	Limit  float64  `yaml:"limit,omitempty"`
	For    Duration `yaml:"for,omitempty"`
	Until  *At      `yaml:"until,omitempty"`
}

// ShortageCodes are the codes a shortage step accepts.
var ShortageCodes = []string{"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "RESOURCE_POOL_EXHAUSTED", "QUOTA_EXCEEDED"}

// Watch checks assertions after every event for a while: from its step
// until For later (or Until, or the end).
type Watch struct {
	Name   string   `yaml:"name,omitempty"`
	For    Duration `yaml:"for,omitempty"`
	Until  *At      `yaml:"until,omitempty"`
	Checks []Check  `yaml:"checks"`
}

// Check is one assertion; it may combine several of its parts, each
// reported on its own.
type Check struct {
	// Name labels the check in reports.
	Name           string           `yaml:"name,omitempty"`
	VMs            *VMCheck         `yaml:"vms,omitempty"`
	Nodes          []NodeCheck      `yaml:"nodes,omitempty"`
	Jobs           []JobCheck       `yaml:"jobs,omitempty"`
	ResizeRequests *RRCheck         `yaml:"resize_requests,omitempty"`
	SlurmCommands  *CommandCheck    `yaml:"slurm_commands,omitempty"`
	SlurmNodes     []SlurmNodeCheck `yaml:"slurm_nodes,omitempty"`
	SlurmJobs      []SlurmJobCheck  `yaml:"slurm_jobs,omitempty"`
	Counter        *CounterCheck    `yaml:"counter,omitempty"`
	Pools          []PoolCheck      `yaml:"pools,omitempty"`
	// Invariant evaluates one named invariant now, strictly (no grace):
	// one_vm_per_node, one_request_per_node, no_unrecorded_vm,
	// static_at_min, no_idle_dynamic_vm, repair_progress (no node left in
	// await_drain, host_repair or blocked), foreign_untouched,
	// foreign_reservations_untouched (prefix flexslurm-), no_dead_letters,
	// quiet (no message queued or held), no_mig_left (every MIG of the
	// cluster in Compute is one a node serves from).
	Invariant StringList `yaml:"invariant,omitempty"`
	// Readings limits the check to runs whose simulator readings
	// (computesim.Readings, simulator.compute_readings or
	// --compute-readings) have each named on/off switch as given, e.g.
	// {RefuseWorkloadPolicyOnFlexStart: true}; under other readings the
	// check is not evaluated. It lets one scenario state what flexslurm
	// does under each reading of an open point.
	Readings map[string]bool `yaml:"readings,omitempty"`

	line int
}

// UnmarshalYAML implements yaml.Unmarshaler, recording the check's line.
func (c *Check) UnmarshalYAML(n *yaml.Node) error {
	type plain Check
	if err := n.Decode((*plain)(c)); err != nil {
		return err
	}
	c.line = n.Line
	return nil
}

// Line is the check's line in its file (0 if generated).
func (c Check) Line() int { return c.line }

// Count bounds a number: exactly Count, or between Min and Max.
type Count struct {
	Count *int `yaml:"count,omitempty"`
	Min   *int `yaml:"min,omitempty"`
	Max   *int `yaml:"max,omitempty"`
}

// Expect compares a number with a Count and describes both.
func (c Count) Expect(n int) (bool, string) {
	switch {
	case c.Count != nil:
		return n == *c.Count, fmt.Sprintf("%d", *c.Count)
	case c.Min != nil && c.Max != nil:
		return n >= *c.Min && n <= *c.Max, fmt.Sprintf("between %d and %d", *c.Min, *c.Max)
	case c.Min != nil:
		return n >= *c.Min, fmt.Sprintf("at least %d", *c.Min)
	case c.Max != nil:
		return n <= *c.Max, fmt.Sprintf("at most %d", *c.Max)
	}
	return true, ""
}

// IsSet reports whether the Count bounds anything.
func (c Count) IsSet() bool { return c.Count != nil || c.Min != nil || c.Max != nil }

// VMCheck checks the simulator's VMs of this cluster (by label). Names, when
// given (an empty list included), must be exactly the live VMs selected.
type VMCheck struct {
	// Pool and Node select VMs; empty: every VM of the cluster.
	Pool string `yaml:"pool,omitempty"`
	Node string `yaml:"node,omitempty"`
	// Names is the exact set of selected VMs.
	Names []string `yaml:"names,omitempty"`
	Count `yaml:",inline"`
	// IncludeStopping counts VMs being deleted (STOPPING) too.
	IncludeStopping bool `yaml:"include_stopping,omitempty"`
	// Foreign selects the VMs that are not this cluster's instead.
	Foreign bool `yaml:"foreign,omitempty"`
	// BootDiskSizeGB, when set, is the boot disk size every selected VM
	// must have (what its instance template gave it).
	BootDiskSizeGB int64 `yaml:"boot_disk_size_gb,omitempty"`
	// Zone, when set, is the zone every selected VM must be in (where
	// Compute placed a multi-zone pool's request, docs/design/zones.md).
	Zone string `yaml:"zone,omitempty"`
	// PoolTemplate, when true, requires every selected VM to have been
	// created from the instance template its pool's record names now.
	PoolTemplate bool `yaml:"pool_template,omitempty"`
	// EndBy, when set, requires every selected VM to end (its termination
	// time) no later than this offset from the start.
	EndBy *Duration `yaml:"end_by,omitempty"`
	// EndAfter, when set, requires every selected VM to end (its
	// termination time) no earlier than this offset from the start.
	EndAfter *Duration `yaml:"end_after,omitempty"`
}

// NodeCheck checks a node record; only the fields given are compared.
type NodeCheck struct {
	Name       string  `yaml:"name"`
	Exists     *bool   `yaml:"exists,omitempty"`
	Phase      string  `yaml:"phase,omitempty"`
	Generation *int64  `yaml:"generation,omitempty"`
	Kind       string  `yaml:"kind,omitempty"`
	Job        *string `yaml:"job,omitempty"`
	LastEnd    string  `yaml:"last_end,omitempty"`
	VM         string  `yaml:"vm,omitempty"`
	// Repair is the node's repair state: none, await_drain, host_repair,
	// blocked or diagnosis.
	Repair string `yaml:"repair,omitempty"`
	// HostRepaired is the generation whose VM was host-repaired (0: none).
	HostRepaired *int64 `yaml:"host_repaired,omitempty"`
}

// PoolCheck checks a pool record; only the fields given are compared.
type PoolCheck struct {
	ID string `yaml:"id"`
	// Shortage is the class of the shortage the pool records (capacity,
	// quota), or none; ShortageCode its Compute code.
	Shortage     string `yaml:"shortage,omitempty"`
	ShortageCode string `yaml:"shortage_code,omitempty"`
	// Condition is a prefix of the pool's condition; "none" for no
	// condition.
	Condition string `yaml:"condition,omitempty"`
	// Backoff is the class of the backoff in force (capacity, quota,
	// permanent), or none.
	Backoff string `yaml:"backoff,omitempty"`
	// WorkloadPolicyRefused is the workload policy Compute refused for
	// the pool (model.Pool.WorkloadPolicyRefused), or none.
	WorkloadPolicyRefused string `yaml:"workload_policy_refused,omitempty"`
}

// JobCheck checks a job record.
type JobCheck struct {
	ID     string   `yaml:"id"`
	Exists *bool    `yaml:"exists,omitempty"`
	State  string   `yaml:"state,omitempty"`
	Nodes  []string `yaml:"nodes,omitempty"`
}

// RRCheck checks the simulator's resize requests.
type RRCheck struct {
	// Name, Match (a regular expression), Node (requests naming a VM of
	// the node) and Job (requests of the job, by name) select requests.
	Name  string `yaml:"name,omitempty"`
	Match string `yaml:"match,omitempty"`
	Node  string `yaml:"node,omitempty"`
	Job   string `yaml:"job,omitempty"`
	// State keeps requests in one of these states (CREATING, ACCEPTED,
	// SUCCEEDED, FAILED, CANCELLED); "active" stands for CREATING and
	// ACCEPTED.
	State StringList `yaml:"state,omitempty"`
	// Names is the exact set of selected request names.
	Names []string `yaml:"names,omitempty"`
	Count `yaml:",inline"`
	// States maps request names to their expected state.
	States map[string]string `yaml:"states,omitempty"`
	// WorkloadPolicies maps request names to the workload policy their MIG
	// references ("" for none: compact placement, docs/design/placement.md).
	WorkloadPolicies map[string]string `yaml:"workload_policies,omitempty"`
}

// CommandCheck counts the Slurm commands flexslurm published.
type CommandCheck struct {
	Command        string `yaml:"command,omitempty"`
	Node           string `yaml:"node,omitempty"`
	Job            string `yaml:"job,omitempty"`
	ReasonContains string `yaml:"reason_contains,omitempty"`
	// From and To bound the publication time (offsets from the start).
	From  *At `yaml:"from,omitempty"`
	To    *At `yaml:"to,omitempty"`
	Count `yaml:",inline"`
}

// SlurmNodeCheck checks a node in the Slurm model.
type SlurmNodeCheck struct {
	Name string `yaml:"name"`
	// State is the exact BASE+FLAGS state (flag order does not matter).
	State string `yaml:"state,omitempty"`
	// Flags must be set; NotFlags must not.
	Flags    []string `yaml:"flags,omitempty"`
	NotFlags []string `yaml:"not_flags,omitempty"`
	// Serviceable: Slurm can run a job on the node (docs/scenarios.md).
	Serviceable *bool `yaml:"serviceable,omitempty"`
}

// SlurmJobCheck checks a job in the Slurm model (slurm.simulate).
type SlurmJobCheck struct {
	ID string `yaml:"id"`
	// State is the job's state: PENDING, CONFIGURING, RUNNING, COMPLETED,
	// CANCELLED, or REFUSED (sbatch refused it).
	State string `yaml:"state,omitempty"`
	// Comment is a regular expression the job's Comment must match
	// ("^$": no comment).
	Comment *string `yaml:"comment,omitempty"`
	// MinRestarts: the job was requeued at least this often.
	MinRestarts int `yaml:"min_restarts,omitempty"`
	// MaxRestarts: the job was requeued at most this often (0: never, so
	// no VM's end killed it).
	MaxRestarts *int `yaml:"max_restarts,omitempty"`
	// Nodes, when set, are the nodes Slurm allocated the job (its latest
	// allocation), in any order.
	Nodes []string `yaml:"nodes,omitempty"`
}

// ListOmitStep makes Compute listings succeed but leave something out:
// VMs whose name matches VM disappear from the instance lists (zonal and
// aggregated) and from listManagedInstances, or, with Field, only that
// field of theirs (status, creationTimestamp, scheduling
// .terminationTimestamp, …; dotted for nested fields) does. It applies to
// the next Times listings that match, or to every one for For (or until
// Until), or both (whichever ends first); with neither, to one listing.
type ListOmitStep struct {
	// Name identifies the omission in counters (injected_errors); default
	// "list-omit-<step index>".
	Name string `yaml:"name,omitempty"`
	// VM is a regular expression on VM names; required.
	VM string `yaml:"vm"`
	// Field is the JSON field of the VM to omit; empty omits the VM.
	Field string   `yaml:"field,omitempty"`
	Times int      `yaml:"times,omitempty"`
	For   Duration `yaml:"for,omitempty"`
	Until *At      `yaml:"until,omitempty"`
}

// LateDecisionStep makes reconcile passes decide late, as on a loaded
// instance: a pass reads the pool records and lists Compute as usual, then
// what falls due within Lag happens (deliveries to every function, other
// reconcile passes, the simulator's transitions, the Slurm model) and the
// clock moves on, and only then does the pass's transaction run, with the
// later time, against the earlier lists. It applies to every pass that
// starts listing while the step is in force (For, or until Until; with
// neither, until the end) and while no other pass is late: one loaded
// instance at a time. A lag ends at the next step's time at the latest
// (steps keep their times), so a pass that a step's own message starts
// (a tick step, settled at once) is not late.
type LateDecisionStep struct {
	// Lag is how long after its lists a pass decides; required.
	Lag   Duration `yaml:"lag"`
	For   Duration `yaml:"for,omitempty"`
	Until *At      `yaml:"until,omitempty"`
}

// CounterCheck checks a counter.
type CounterCheck struct {
	// Counter is one of compute_calls, resize_requests_created, deliveries,
	// acks, nacks, redeliveries, duplicates, dead_letters, injected_errors.
	Counter string `yaml:"counter"`
	// Method, Path and Body (regular expressions) select compute_calls;
	// Outcome keeps ok, error or injected calls (default any).
	Method  string `yaml:"method,omitempty"`
	Path    string `yaml:"path,omitempty"`
	Body    string `yaml:"body,omitempty"`
	Outcome string `yaml:"outcome,omitempty"`
	// Match selects resize_requests_created by name (a regular expression).
	Match string `yaml:"match,omitempty"`
	// Topic, Type and Label select delivery counters.
	Topic string `yaml:"topic,omitempty"`
	Type  string `yaml:"type,omitempty"`
	Label string `yaml:"label,omitempty"`
	// Fault selects injected_errors by compute_error name.
	Fault string `yaml:"fault,omitempty"`
	// From and To bound the time counted (offsets from the start).
	From  *At `yaml:"from,omitempty"`
	To    *At `yaml:"to,omitempty"`
	Count `yaml:",inline"`
	// PerHourMax bounds the count in every one-hour window within From–To.
	PerHourMax *int `yaml:"per_hour_max,omitempty"`
}
