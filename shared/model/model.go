// Package model holds flexslurm's durable domain records: the cluster, its
// node pools, its nodes (one record per Slurm node name, with a generation
// that increments each time a new VM is requested for the node) and the Slurm
// jobs flexslurm provisions for. These are the documents stored in Firestore
// and the snapshot every decision reads.
//
// Of flexslurm's packages it imports only nodeconfig and slurmstate (the
// typed facts of a Slurm snapshot); it does no I/O.
package model

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// NodeKind tells a static node (kept up to min_node_count whether or not a
// job waits) from a dynamic node (provisioned for pending jobs, up to
// max_node_count), as the managed service's scaling_spec has them
// (min_node_count, max_node_count).
type NodeKind string

// Node kinds.
const (
	NodeStatic  NodeKind = "static"
	NodeDynamic NodeKind = "dynamic"
)

// Phase is where the current generation of a node stands.
type Phase string

// Node phases. A generation moves Requested → Running → (Deleting →) Released,
// or straight to Released when Compute Engine ends its VM; a new generation
// starts again at Requested.
const (
	// PhaseRequested: capacity was asked for (a Flex-Start resize request
	// names this generation's VM); the VM is not running yet. Capacity may
	// queue for hours.
	PhaseRequested Phase = "requested"
	// PhaseRunning: the VM of this generation exists and runs.
	PhaseRunning Phase = "running"
	// PhaseDeleting: flexslurm asked Compute Engine to delete this
	// generation's VM (health replacement, release of an idle dynamic node,
	// surplus static node) and waits for it to be gone.
	PhaseDeleting Phase = "deleting"
	// PhaseReleased: no VM for this node and none wanted. The slot is free.
	PhaseReleased Phase = "released"
)

// Phases lists every phase, in lifecycle order.
var Phases = []Phase{PhaseRequested, PhaseRunning, PhaseDeleting, PhaseReleased}

// HasVM reports whether a VM of the current generation may exist or is
// wanted (any phase but Released).
func (p Phase) HasVM() bool { return p != PhaseReleased && p != "" }

// Serving reports whether the current generation is wanted: requested or
// running. A node that is Deleting or Released needs a new generation to
// serve again.
func (p Phase) Serving() bool { return p == PhaseRequested || p == PhaseRunning }

// EndReason says why a generation ended.
type EndReason string

// Reasons a generation ended.
const (
	EndExpired  EndReason = "expired"  // Compute Engine ended the VM at its max run duration
	EndHealth   EndReason = "health"   // replaced after a failed health check
	EndReleased EndReason = "released" // a dynamic node was released (idle, no job) or a static node became surplus
	EndLost     EndReason = "lost"     // the VM vanished without an expiry (deleted out of band)
	EndFailed   EndReason = "failed"   // capacity could not be obtained (request rejected or failed)
	EndTimeout  EndReason = "timeout"  // capacity queued past the queue timeout: cancelled and resubmitted
	// EndCancelled: the job a dynamic node's capacity was queued for ended
	// before the capacity came: its request cancelled, and a VM the request
	// made meanwhile left to the reconciler, which keeps it for a pending
	// job that can use the node and deletes it otherwise (plan, adopt.go).
	EndCancelled EndReason = "cancelled"
)

// RepairState is where the health repair of a node's current generation
// stands (Node.Repair). The decisions live in shared/plan (Repair,
// Reconcile, HostRepairFailed); docs/design/repair.md, "Health repair".
type RepairState string

// Repair states. A state belongs to the generation it was set for: a new
// generation starts without one.
const (
	// RepairNone: no repair in progress.
	RepairNone RepairState = ""
	// RepairAwaitDrain: a FAIL was reported and Slurm asked to drain the
	// node; the repair step waits until Slurm shows it drained (no job left).
	RepairAwaitDrain RepairState = "await_drain"
	// RepairHost: Compute Engine was asked to take the VM's host out of
	// service and restart the VM on a healthy one
	// (instances.reportHostAsFaulty); it waits for the VM to run again.
	RepairHost RepairState = "host_repair"
	// RepairBlocked: a FAIL arrived while the pool's repair budget was
	// used up; the node stays drained until the reconciler starts its
	// repair (oldest first) as other repairs finish.
	RepairBlocked RepairState = "blocked"
	// RepairDiagnosis: repeated INCONCLUSIVE verdicts drained the node for
	// an operator to diagnose; flexslurm takes no VM action.
	RepairDiagnosis RepairState = "diagnosis"
	// RepairAwaitReport: a Slurm snapshot shows the node drained by
	// flexslurm's own node-side hook for a failed health check of the
	// current VM, and no health.failure report of it has reached flexslurm
	// (lost, dead-lettered, or the Repair function down). Past
	// plan.Policy.UnreportedDrainGrace the reconciler repairs the node as
	// the report would have; a newer snapshot without that drain ends the
	// wait, and the report, when it comes, starts the repair at once.
	RepairAwaitReport RepairState = "await_report"
	// RepairLimit: a FAIL arrived on a node already repaired
	// plan.Policy.RepairNodeLimit times within plan.Policy.RepairNodeWindow
	// (Node.RepairCount): the node is left drained for an operator, with
	// that reason in Slurm; flexslurm takes no VM action until an
	// operator reports the node through reportFaultyNodes.
	RepairLimit RepairState = "limit"
)

// RepairStates lists every repair state.
var RepairStates = []RepairState{RepairNone, RepairAwaitDrain, RepairHost, RepairBlocked, RepairDiagnosis, RepairAwaitReport, RepairLimit}

// UnderRepair reports whether the state counts against the pool's repair
// budget: awaiting drain or in host repair.
func (r RepairState) UnderRepair() bool { return r == RepairAwaitDrain || r == RepairHost }

// Node is one Slurm node of a Flex-Start node pool. Its Name never changes;
// each VM that backs it is a new Generation with its own VM name, so a
// redelivered event for an old generation can never touch the new VM.
type Node struct {
	Name       string   `firestore:"name" json:"name"`             // Slurm node name, "<cluster>-<pool>-<index>"
	Pool       string   `firestore:"pool" json:"pool"`             // node pool id
	Index      int      `firestore:"index" json:"index"`           // 0-based; indexes below min_node_count are static
	Kind       NodeKind `firestore:"kind" json:"kind"`             // static or dynamic
	Generation int64    `firestore:"generation" json:"generation"` // ≥ 1 once a VM was ever requested
	Phase      Phase    `firestore:"phase" json:"phase"`
	VMName     string   `firestore:"vm_name" json:"vm_name,omitempty"` // "<node>-g<generation>"
	VMID       string   `firestore:"vm_id" json:"vm_id,omitempty"`     // numeric Compute instance id, as a string
	// Zone is the zone this generation's VM landed in, as Compute listed
	// it, for a node of a multi-zone pool (zones.go); "" otherwise, where
	// the VM is in the pool's zone.
	Zone string `firestore:"zone,omitempty" json:"zone,omitempty"`
	// ResizeRequest names the resize request that provisions this generation.
	ResizeRequest string `firestore:"resize_request" json:"resize_request,omitempty"`
	// MIG names the managed instance group that holds this generation's
	// resize request and VM: naming.RequestMIG of the request (one MIG per
	// resize request). Empty for a generation requested before that layout,
	// whose request and VM live in the pool's MIG (Pool.MIG).
	MIG string `firestore:"mig,omitempty" json:"mig,omitempty"`
	// MIGSeen is true once a reconciler listing showed MIG: a MIG seen and
	// then missing was deleted out of band, while one never seen may still
	// be on its way (commit, then act; a slow or redelivered action).
	MIGSeen bool `firestore:"mig_seen,omitempty" json:"mig_seen,omitempty"`
	// RequestOpen is true while this generation, ended before its VM ran
	// (released while its capacity was queued, or its queued request
	// cancelled past the queue timeout), still names a resize request that
	// may be active: it was cancelled, and flexslurm has not yet seen it end
	// (listed SUCCEEDED, FAILED or CANCELLED, a VM of the generation listed,
	// or the request not listed in Policy.MissThreshold consecutive passes,
	// counted by RequestMisses). The node gets no next generation while it
	// is set (plan: "one active request per node"). Every decision that ends
	// a generation whose request may still be queued sets it.
	RequestOpen   bool `firestore:"request_open" json:"request_open,omitempty"`
	RequestMisses int  `firestore:"request_misses" json:"request_misses,omitempty"`
	// JobID is the Slurm job a dynamic node was provisioned for ("" for static nodes).
	JobID string `firestore:"job_id" json:"job_id,omitempty"`
	// RequestedAt is when this generation's capacity was requested.
	RequestedAt time.Time `firestore:"requested_at" json:"requested_at,omitzero"`
	// RunningAt is when the VM was first seen running.
	RunningAt time.Time `firestore:"running_at" json:"running_at,omitzero"`
	// RunDuration is the run duration this generation's resize request
	// asks Compute for (requestedRunDuration), when it is not the pool's
	// (a request sized by its job's time limit, Pool.UseJobDuration); 0:
	// the pool's RunDuration. A request issued again asks the same.
	RunDuration time.Duration `firestore:"run_duration,omitempty" json:"run_duration,omitempty"`
	// TerminationTime is when Compute Engine will end the VM (the VM's
	// scheduling.terminationTimestamp, or creation + run duration).
	TerminationTime time.Time `firestore:"termination_time" json:"termination_time,omitzero"`
	// MissCount counts consecutive reconcile passes in which the VM of
	// MissGeneration was missing from Compute's list (eventual
	// consistency: a VM is not given up before several misses).
	MissCount      int   `firestore:"miss_count" json:"miss_count,omitempty"`
	MissGeneration int64 `firestore:"miss_generation" json:"miss_generation,omitempty"`
	// Observed is an unexpected (Slurm × VM × phase × kind) combination the
	// reconciler is watching since ObservedSince; it acts when it lasts
	// past a grace period.
	Observed      string    `firestore:"observed" json:"observed,omitempty"`
	ObservedSince time.Time `firestore:"observed_since" json:"observed_since,omitzero"`
	// Successor names the node that takes this static node's place before
	// its VM reaches its max run duration (make-before-break);
	// Predecessor names the node it replaces. Both are cleared when the
	// hand-over ends.
	Successor   string `firestore:"successor" json:"successor,omitempty"`
	Predecessor string `firestore:"predecessor" json:"predecessor,omitempty"`
	// Hedge marks a successor requested for the place of a static node
	// that was itself still waiting for capacity (its Predecessor): the
	// first of the two whose VM runs keeps the place, the other is
	// released. Cleared when that is settled.
	Hedge bool `firestore:"hedge" json:"hedge,omitempty"`
	// IdleSince is when Slurm was first seen to hold this node idle (no
	// job) in its current stretch; zero while it is busy.
	IdleSince time.Time `firestore:"idle_since" json:"idle_since,omitzero"`
	// StartedJob and StartedAt are the last job.started report
	// (PrologSlurmctld) that named this node: the job, and when flexslurm
	// recorded it. A Slurm snapshot taken before StartedAt says nothing of
	// whether the node is idle: a newer report says a job runs there, so
	// no decision releases the node or powers it down on that snapshot
	// (shared/plan, sources.go).
	StartedJob string    `firestore:"started_job" json:"started_job,omitempty"`
	StartedAt  time.Time `firestore:"started_at" json:"started_at,omitzero"`
	// Registered is true once Slurm showed this generation's node up
	// (idle, busy or drained): its bootstrap succeeded.
	Registered bool `firestore:"registered" json:"registered,omitempty"`
	// Resubmits counts queue-timeout resubmissions of a static node's
	// capacity (dynamic nodes count on their job).
	Resubmits int `firestore:"resubmits" json:"resubmits,omitempty"`
	// Repair is the health repair of the current generation (RepairNone
	// when none), RepairSince when it entered that state, RepairReason the
	// fault that started it (at most 512 bytes), RepairJob the job that
	// waits for the node's replacement ("" when none: a dynamic node is
	// then deleted, not replaced).
	Repair       RepairState `firestore:"repair" json:"repair,omitempty"`
	RepairSince  time.Time   `firestore:"repair_since" json:"repair_since,omitzero"`
	RepairReason string      `firestore:"repair_reason" json:"repair_reason,omitempty"`
	RepairJob    string      `firestore:"repair_job" json:"repair_job,omitempty"`
	// RepairCheck is the node-side hook whose failed check started the
	// repair (event.Health.Hook: prolog, epilog, health_check; "" when
	// not known, or not a hook's report).
	RepairCheck string `firestore:"repair_check" json:"repair_check,omitempty"`
	// HostRepaired is the generation whose VM Compute Engine already moved
	// to another host once (0: none). A FAIL on that generation again is
	// repaired by deleting and replacing the VM.
	HostRepaired int64 `firestore:"host_repaired" json:"host_repaired,omitempty"`
	// RepairCount counts the repairs started on this node, whatever its
	// generation, since RepairCountSince, the first of the current window
	// (plan.Policy.RepairNodeWindow): a node whose VMs keep failing is left
	// to an operator at plan.Policy.RepairNodeLimit (RepairLimit).
	RepairCount      int       `firestore:"repair_count" json:"repair_count,omitempty"`
	RepairCountSince time.Time `firestore:"repair_count_since" json:"repair_count_since,omitzero"`
	// InconclusiveCount counts INCONCLUSIVE health verdicts on the current
	// generation since InconclusiveSince (the first of the current window,
	// Policy.InconclusiveWindow).
	InconclusiveCount int       `firestore:"inconclusive_count" json:"inconclusive_count,omitempty"`
	InconclusiveSince time.Time `firestore:"inconclusive_since" json:"inconclusive_since,omitzero"`
	// EndWarned is the generation whose jobs were sent the warning before
	// its VM's end (plan.Policy.EndWarning; 0: none yet).
	EndWarned int64 `firestore:"end_warned" json:"end_warned,omitempty"`
	// SlurmCommand is the last command the reconciler sent Slurm to bring
	// this node's Slurm state in line with its VM (zero when none was sent
	// in this generation): it is sent again only once newer Slurm
	// snapshots show it not carried out (shared/plan, slurmcommand.go).
	SlurmCommand SentCommand `firestore:"slurm_command" json:"slurm_command,omitzero"`
	// LastEnd says why the previous generation ended ("" before any ended).
	LastEnd EndReason `firestore:"last_end" json:"last_end,omitempty"`
	// VersionMismatch is VersionMismatchVM's report that it runs another
	// flexslurm version than the functions that built its template
	// (node.version_mismatch), for status; it concerns the current
	// generation only while VersionMismatchVM is VMName.
	VersionMismatch   string `firestore:"version_mismatch,omitempty" json:"version_mismatch,omitempty"`
	VersionMismatchVM string `firestore:"version_mismatch_vm,omitempty" json:"version_mismatch_vm,omitempty"`
	// Reason is the last decision's reason, for operators.
	Reason    string    `firestore:"reason" json:"reason,omitempty"`
	UpdatedAt time.Time `firestore:"updated_at" json:"updated_at,omitzero"`
}

// SentCommand records the last Slurm command the reconciler sent for a
// node's generation: its name (power_up, resume, power_down_force), its
// attempt (the count of such sends in the generation, 1 for the first;
// the command id includes it), when it was sent, the Slurm snapshots
// taken since that still showed it not carried out (Misses, the latest
// taken at LastMiss), and Done once a later snapshot no longer asked for
// it.
type SentCommand struct {
	Command    string    `firestore:"command" json:"command,omitempty"`
	Generation int64     `firestore:"generation" json:"generation,omitempty"`
	Attempt    int       `firestore:"attempt" json:"attempt,omitempty"`
	SentAt     time.Time `firestore:"sent_at" json:"sent_at,omitzero"`
	Misses     int       `firestore:"misses" json:"misses,omitempty"`
	LastMiss   time.Time `firestore:"last_miss" json:"last_miss,omitzero"`
	Done       bool      `firestore:"done" json:"done,omitempty"`
}

// ClearRepair forgets the repair state of the node's generation (the
// generation ended, or its repair finished).
func (n *Node) ClearRepair() {
	n.Repair, n.RepairSince, n.RepairReason, n.RepairJob, n.RepairCheck = RepairNone, time.Time{}, "", "", ""
}

// JobState is flexslurm's view of a Slurm job.
type JobState string

// Job states.
const (
	JobPending   JobState = "pending"   // PENDING in Slurm (including requeued)
	JobRunning   JobState = "running"   // started (PrologSlurmctld ran)
	JobFinished  JobState = "finished"  // ended (EpilogSlurmctld ran)
	JobCancelled JobState = "cancelled" // cancelled while pending
)

// Active reports whether the job still needs nodes.
func (s JobState) Active() bool { return s == JobPending || s == JobRunning }

// JobStage is where provisioning a pending job stands, as the decision
// that last stored the job recorded it (its Reason says the same for
// people, and is never read back).
type JobStage string

// Job stages.
const (
	JobStageNone        JobStage = ""            // none recorded (the job was stored for another reason)
	JobStageWaiting     JobStage = "waiting"     // waits for room in its pool, or for the pool's backoff or breaker
	JobStageProvisioned JobStage = "provisioned" // its nodes are provisioned or in flight
)

// Job is a Slurm job that flexslurm provisions dynamic nodes for.
type Job struct {
	ID        string   `firestore:"id" json:"id"`               // Slurm job id
	Partition string   `firestore:"partition" json:"partition"` // Slurm partition
	Pool      string   `firestore:"pool" json:"pool"`           // node pool chosen for it
	State     JobState `firestore:"state" json:"state"`
	// NodesWanted is the node count the job asked for.
	NodesWanted int `firestore:"nodes_wanted" json:"nodes_wanted"`
	// Nodes are the Slurm nodes allocated to the job (from ResumeProgram) or
	// chosen by flexslurm when Slurm named none.
	Nodes []string `firestore:"nodes" json:"nodes"`
	// Generation counts provisioning attempts for this job; each new resize
	// request for it takes a new generation so its name and request id differ.
	Generation int64 `firestore:"generation" json:"generation"`
	// ResizeRequest is the current resize request serving the job.
	ResizeRequest string `firestore:"resize_request" json:"resize_request,omitempty"`
	Requeues      int    `firestore:"requeues" json:"requeues"`
	// AwaitingSlurm is true while Slurm, having given up resuming the
	// job's nodes (ResumeTimeout), has requeued the job and not yet
	// allocated it new ones: Nodes is empty and no capacity is bought for
	// it until Slurm's next allocation is known (its job.pending report, or
	// a newer snapshot).
	AwaitingSlurm bool `firestore:"awaiting_slurm" json:"awaiting_slurm,omitempty"`
	// Resubmits counts queue-timeout resubmissions of the job's capacity.
	Resubmits int `firestore:"resubmits" json:"resubmits,omitempty"`
	// TimeLimit is the job's time limit as Slurm last reported it (0 =
	// unknown or none).
	TimeLimit time.Duration `firestore:"time_limit" json:"time_limit,omitempty"`
	// Unfit says why no node of the job's pool can serve the job as asked
	// (plan.JobFit); empty while it fits. Told to the user in Slurm.
	Unfit string `firestore:"unfit,omitempty" json:"unfit,omitempty"`
	// Comment is the comment flexslurm last asked Slurm to show on the
	// job (its text after flexslurm's prefix; shared/plan, jobcomment.go):
	// why it still waits, in its user's words. Empty when none was set or
	// it was cleared. A new comment is sent only when it differs.
	Comment     string    `firestore:"comment,omitempty" json:"comment,omitempty"`
	SubmittedAt time.Time `firestore:"submitted_at" json:"submitted_at,omitzero"`
	UpdatedAt   time.Time `firestore:"updated_at" json:"updated_at,omitzero"`
	// Stage is what the decision that last stored the job recorded of its
	// provisioning; decisions read it, not Reason.
	Stage JobStage `firestore:"stage,omitempty" json:"stage,omitempty"`
	// Reason says why the job was last stored, for people only.
	Reason string `firestore:"reason" json:"reason,omitempty"`
	// ReportedAt is Slurm's time of the newest fact that set the job's
	// state in this record: the reported_at of the job report applied (on
	// the controller's clock, where the hooks run), or the taken_at of the
	// snapshot the reconciler decided from. A report made before it is
	// older than what the record holds (plan: staleJobReport). Zero for a
	// record stored before it existed, or one no such fact set yet.
	ReportedAt time.Time `firestore:"reported_at" json:"reported_at,omitzero"`
	// Incarnation counts the earlier Slurm jobs with this id that
	// flexslurm recorded: Slurm's job ids repeat (a controller started
	// without its StateSaveLocation counts from 1 again; ids wrap at
	// MaxJobId). A job is (ID, Incarnation): a job.pending for an id whose
	// recorded job has ended, reported after that end, is a new job and
	// replaces the ended record under the same document id, with
	// Incarnation one more, PreviousEnd that end, and the same Generation
	// counter (so its resize requests never take an earlier job's names).
	Incarnation int `firestore:"incarnation,omitempty" json:"incarnation,omitempty"`
	// PreviousEnd is Slurm's time of the end of the previous job with this
	// id (its record's ReportedAt, or, for a record stored before that
	// existed, its last change); zero for the first. A report made at or
	// before it is the earlier job's and never changes this one.
	PreviousEnd time.Time `firestore:"previous_end" json:"previous_end,omitzero"`
}

// Pool is the stored state of one Flex-Start node pool.
type Pool struct {
	ID   string `firestore:"id" json:"id"`
	Zone string `firestore:"zone" json:"zone"`
	// Zones and Region: a multi-zone pool's zones (the spec's "zones"
	// extension, zones.go) and the region its regional request MIGs live
	// in. Region is kept once set, so that a pool that goes back to one
	// zone still lists (and releases) the regional MIGs it made.
	Zones  []string `firestore:"zones,omitempty" json:"zones,omitempty"`
	Region string   `firestore:"region,omitempty" json:"region,omitempty"`
	// MIG and Template name the pool's Compute resources.
	MIG      string `firestore:"mig" json:"mig"`
	Template string `firestore:"template" json:"template"`
	// TemplateBody is the body of instance template Template, built once
	// when the spec was applied (shared/instancetemplate: the API's JSON,
	// without the name, which is a hash of it). Creating the pool's
	// template and MIG sends it as it is, however late. A few KB; a pool
	// record stored before it existed has it empty: the next
	// cluster.applied records it.
	TemplateBody string `firestore:"template_body" json:"template_body,omitempty"`
	// MinNodes and MaxNodes are scaling_spec.min_node_count / max_node_count.
	MinNodes int `firestore:"min_nodes" json:"min_nodes"`
	MaxNodes int `firestore:"max_nodes" json:"max_nodes"`
	// MaxRunDuration is the configured flex_start_max_duration (30 s–7 d);
	// RunDuration is what Compute is asked for (600 s–7 d, Compute API).
	MaxRunDuration time.Duration `firestore:"max_run_duration" json:"max_run_duration"`
	RunDuration    time.Duration `firestore:"run_duration" json:"run_duration"`
	// UseJobDuration is the pool extension "use_job_duration": a resize
	// request made for pending jobs asks for their time limit plus the
	// boot allowance, not RunDuration (shared/plan, RequestRunDuration).
	UseJobDuration bool `firestore:"use_job_duration,omitempty" json:"use_job_duration,omitempty"`
	// Ready is true once the template and MIG are known to exist.
	Ready bool `firestore:"ready" json:"ready"`
	// ProvisioningModel and MachineType are the pool spec's
	// provisioning_model (FLEX_START, RESERVATION, …) and
	// machine_spec.machine_type; they decide whether Compute Engine can
	// repair a host of the pool (shared/plan.HostRepairSupported). A record
	// written before they existed has them empty: no host repair.
	ProvisioningModel string `firestore:"provisioning_model" json:"provisioning_model,omitempty"`
	MachineType       string `firestore:"machine_type" json:"machine_type,omitempty"`
	// WorkloadPolicy names the pool's workload policy
	// (naming.WorkloadPolicy) when its spec asks for compact placement
	// (spec.PoolExtension.CompactPlacement), "" otherwise;
	// PlacementDistance is the policy's maxTopologyDistance ("" for none).
	// Every request of more than one VM is made in a MIG that references
	// the policy (docs/design/placement.md).
	WorkloadPolicy    string `firestore:"workload_policy" json:"workload_policy,omitempty"`
	PlacementDistance string `firestore:"placement_distance" json:"placement_distance,omitempty"`
	// WorkloadPolicyRefused is the workload policy Compute refused to
	// apply to a request's MIG (a 400 on the MIG's insert; some of
	// Google's pages say a Flex-Start MIG takes none), and
	// WorkloadPolicyError Compute's error code. While it equals
	// WorkloadPolicy, the pool's requests carry no policy: placement is
	// best effort until the pool's compact_placement changes
	// (docs/design/placement.md, "When Compute refuses the policy").
	WorkloadPolicyRefused string `firestore:"workload_policy_refused" json:"workload_policy_refused,omitempty"`
	WorkloadPolicyError   string `firestore:"workload_policy_error" json:"workload_policy_error,omitempty"`
	// CapacityWaits are the most recent waits for capacity (request to
	// registration in Slurm, or to VM creation without Slurm), in seconds,
	// newest last; the make-before-break lead time is learnt from them
	// (shared/plan, docs/design/expiry.md "Make-before-break").
	CapacityWaits []int64 `firestore:"capacity_waits" json:"capacity_waits,omitempty"`
	// OverlapSeconds accumulates node-seconds during which a static node
	// and its successor both ran (the cost of make-before-break).
	OverlapSeconds int64 `firestore:"overlap_seconds" json:"overlap_seconds,omitempty"`
	// MIGIncarnation counts MIGs of this pool found deleted out of band; it
	// is part of the MIG creation's request id (Compute ignores a repeated
	// request id for 60 minutes, so a re-creation needs a new one).
	MIGIncarnation int `firestore:"mig_incarnation" json:"mig_incarnation,omitempty"`
	// NodesBeyondMax is true while a node at or beyond MaxNodes may have a
	// VM requested or running: max_node_count was lowered under a node
	// still serving a job, or such a node was provisioned again. While it
	// is false, every node of the pool that serves is one of its first
	// MaxNodes slots, so a job event naming its nodes is decided from the
	// pool record, the job and those nodes alone (shared/plan.JobNarrow).
	// Set by any decision that leaves such a node serving, cleared by
	// decisions that see every node of the pool (cluster applied,
	// reconcile).
	NodesBeyondMax bool `firestore:"nodes_beyond_max" json:"nodes_beyond_max,omitempty"`
	// Removed is true once the pool left the cluster spec: its idle nodes
	// are released, then its empty MIG deleted and its records forgotten.
	Removed bool `firestore:"removed" json:"removed,omitempty"`
	// BackoffUntil: no capacity is requested for the pool (its machine type
	// in its zone) before this time, after capacity or quota errors.
	// BackoffAttempts counts consecutive failures (the exponent);
	// BackoffReason is the error class that set it ("capacity", "quota",
	// "permanent"). A success clears all three.
	BackoffUntil    time.Time `firestore:"backoff_until" json:"backoff_until,omitzero"`
	BackoffAttempts int       `firestore:"backoff_attempts" json:"backoff_attempts,omitempty"`
	BackoffReason   string    `firestore:"backoff_reason" json:"backoff_reason,omitempty"`
	// Condition is an operator-visible condition ("" when healthy), e.g.
	// "QuotaExceeded: …", "QueueTimeouts: …", "BootstrapFailures: …".
	Condition      string    `firestore:"condition" json:"condition,omitempty"`
	ConditionSince time.Time `firestore:"condition_since" json:"condition_since,omitzero"`
	// Shortage is what Compute reports of a queued (ACCEPTED) resize
	// request of the pool that is short of capacity or quota: the error of
	// its latest attempt (status.lastAttempt.error). nil when none.
	Shortage *Shortage `firestore:"shortage,omitempty" json:"shortage,omitempty"`
	// BootstrapFailures counts consecutive VMs whose node never registered
	// in Slurm; at Policy.BreakerThreshold the breaker opens
	// (BreakerOpenedAt) and provisioning stops until the cool-down ends and
	// a success closes it.
	BootstrapFailures int       `firestore:"bootstrap_failures" json:"bootstrap_failures,omitempty"`
	BreakerOpenedAt   time.Time `firestore:"breaker_opened_at" json:"breaker_opened_at,omitzero"`
	UpdatedAt         time.Time `firestore:"updated_at" json:"updated_at,omitzero"`
}

// Shortage is a pool's queued request waiting for capacity or quota, as
// Compute reports it. A record is replaced, never changed in place.
type Shortage struct {
	// Class is "capacity" or "quota".
	Class string `firestore:"class" json:"class"`
	// Code and Message are the Compute error of the latest attempt, e.g.
	// ZONE_RESOURCE_POOL_EXHAUSTED or QUOTA_EXCEEDED.
	Code    string `firestore:"code" json:"code"`
	Message string `firestore:"message" json:"message"`
	// Request is the queued resize request that reports it; Since is when
	// flexslurm first saw this class and code.
	Request string    `firestore:"request" json:"request"`
	Since   time.Time `firestore:"since" json:"since,omitzero"`
}

// Cluster is the stored cluster record: the effective spec as applied.
//
// Its Spec bytes and its Node.PoolImages map are replaced, never edited in
// place: a store shares them between the record it holds and every state
// it hands out (State.CloneEditable), so an edit in place would change
// what is stored without a write. A decision that applies a new spec puts
// a new record (plan.PutCluster) with its own slice and map.
type Cluster struct {
	ID string `firestore:"id" json:"id"`
	// Spec is the effective cluster spec JSON (shared/spec's EffectiveJSON).
	Spec []byte `firestore:"spec" json:"spec"`
	// SpecVersion increments with every applied spec that differs.
	SpecVersion int64  `firestore:"spec_version" json:"spec_version"`
	SpecSHA256  string `firestore:"spec_sha256" json:"spec_sha256"`
	Project     string `firestore:"project" json:"project"`
	// Node are the deployment's node settings applied with the spec
	// (images resolved): with the spec they determine every pool's
	// instance template.
	Node nodeconfig.Settings `firestore:"node" json:"node"`
	// CreatedAt is when this cluster record was first stored. A cluster
	// torn down and created again under the same id is a new incarnation:
	// the request ids of the Compute calls that create its resources
	// (templates, MIGs, resize requests) include it, so Compute does not
	// take a re-creation within its request-id window for a repeat of the
	// first. Zero for a record stored before it existed.
	CreatedAt time.Time `firestore:"created_at" json:"created_at,omitzero"`
	UpdatedAt time.Time `firestore:"updated_at" json:"updated_at,omitzero"`
}

// Incarnation is the cluster's incarnation key for request ids: "" for a
// record without CreatedAt (request ids as before it existed), otherwise
// CreatedAt in nanoseconds.
func (c *Cluster) Incarnation() string {
	if c == nil || c.CreatedAt.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.CreatedAt.UnixNano(), 10)
}

// SlurmNode is a node as the latest Slurm snapshot showed it: typed facts
// (base state, flags as a set, whose reason it is), parsed once when the
// snapshot was decoded; decisions read them only through their methods
// (Drained, Draining, ForeignDrain, OwnReasonFor, …).
type SlurmNode = slurmstate.Node

// SlurmJob is a pending or running job as the latest Slurm snapshot showed it.
type SlurmJob struct {
	ID        string              `firestore:"id" json:"id"`
	State     slurmstate.JobState `firestore:"state" json:"state"`                       // PENDING, CONFIGURING, RUNNING, COMPLETING, …
	Reason    string              `firestore:"reason,omitempty" json:"reason,omitempty"` // Slurm's reason, for display
	Partition string              `firestore:"partition,omitempty" json:"partition,omitempty"`
	Nodes     []string            `firestore:"nodes,omitempty" json:"nodes,omitempty"`
	NodeCount int                 `firestore:"node_count,omitempty" json:"node_count,omitempty"`
	// TimeLimitSeconds is the job's time limit (0 = unknown or none).
	TimeLimitSeconds int64 `firestore:"time_limit_s,omitempty" json:"time_limit_s,omitempty"`
}

// SlurmViewVersion is the version of the stored SlurmView: 1 stores each
// node's reason owner and generation (slurmstate.Node), which a view
// stored before (version 0) lacks; 2 also whether flexslurm's reason is a
// failed health check's (ReasonHealth), which Upgrade decides again for a
// view of version 1.
const SlurmViewVersion = 2

// SlurmView is the latest Slurm snapshot of a cluster, published by the
// agent beside slurmctld and stored for the reconciler.
//
// A view is never edited in place once it is in a state (its fields, its
// Nodes map and their Flags, its Jobs and their Nodes, its Config): a
// newer snapshot replaces State.Slurm whole (plan.Snapshot builds a new
// view). A store shares the view it holds with every state it hands out
// (State.CloneEditable), so an edit in place would change what is stored
// without a write; store.Memory detects one when the view is replaced
// (TestMemoryDetectsSharedEdits). Upgrade, which edits in place, is for a
// view just decoded that nothing shares yet.
type SlurmView struct {
	// Version is SlurmViewVersion when written; a view read with an older
	// one is brought up to date by Upgrade.
	Version    int                  `firestore:"version,omitempty" json:"version,omitempty"`
	TakenAt    time.Time            `firestore:"taken_at" json:"taken_at"`
	ReceivedAt time.Time            `firestore:"received_at" json:"received_at"`
	Nodes      map[string]SlurmNode `firestore:"nodes" json:"nodes"`
	Jobs       []SlurmJob           `firestore:"jobs" json:"jobs"`
	// Config is the agent's comparison of its cluster spec with Slurm's
	// live configuration; nil when the snapshot carried none.
	Config *SlurmConfigCheck `firestore:"config,omitempty" json:"config,omitempty"`
}

// SlurmConfigCheck is what the agent found comparing its cluster spec
// (SpecSHA256, as Cluster.SpecSHA256) with the configuration slurmctld
// runs with: each divergence is a problem and the slurm.conf change that
// fixes it; none when Slurm can serve the spec.
type SlurmConfigCheck struct {
	SpecSHA256  string            `firestore:"spec_sha256" json:"spec_sha256"`
	Divergences []SlurmDivergence `firestore:"divergences,omitempty" json:"divergences,omitempty"`
}

// SlurmDivergence is one way Slurm's configuration cannot serve the spec.
type SlurmDivergence struct {
	Problem string `firestore:"problem" json:"problem"`
	Fix     string `firestore:"fix" json:"fix"`
}

// Upgrade brings a view stored by an older version up to date: every
// node's facts are parsed again from its stored words and reason
// (slurmstate.ParseNode), which decides the facts the older version did
// not store, and job states are normalised.
func (v *SlurmView) Upgrade() {
	if v == nil || v.Version >= SlurmViewVersion {
		return
	}
	for name, n := range v.Nodes {
		v.Nodes[name] = slurmstate.ParseNode(name, n.Words(), n.Reason)
	}
	for i, j := range v.Jobs {
		v.Jobs[i].State, _ = slurmstate.ParseJobState([]string{string(j.State)})
	}
	v.Version = SlurmViewVersion
}

// State is a snapshot of one cluster (or of some of its pools) that a
// decision reads and edits. Maps are keyed by pool id, node name and job id.
type State struct {
	Cluster *Cluster // nil when the cluster was never applied
	Pools   map[string]*Pool
	Nodes   map[string]*Node
	Jobs    map[string]*Job
	// Slurm is the latest Slurm snapshot, loaded when the scope asks for
	// it (store.Scope.Slurm); nil when absent or not loaded. It may be
	// shared with the store: replace it, never edit it in place
	// (SlurmView).
	Slurm *SlurmView
	// EventNote, set by a decision, is stored with the processed-event
	// marker (not as a record) and handed back when the same event is
	// delivered again (store.DuplicateError), so a redelivery can replay
	// exactly the external actions its first delivery decided.
	EventNote []byte
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Pools: map[string]*Pool{}, Nodes: map[string]*Node{}, Jobs: map[string]*Job{}}
}

// Clone returns a deep copy: no pointer, slice or map of it is shared
// with s (TestCloneSharesNothing), so either can be edited without the
// other seeing it. Empty slices come out nil. The records of each kind are
// allocated together, and so are their slices' elements, which makes a
// clone a handful of allocations whatever its size.
func (s *State) Clone() *State {
	c := s.cloneEditable()
	if s.Cluster != nil {
		c.Cluster = s.Cluster.Clone()
	}
	if s.Slurm != nil {
		c.Slurm = s.Slurm.Clone()
	}
	return c
}

// CloneEditable is Clone but for the parts that are replaced, never
// edited in place, which it shares with s: the Slurm view (SlurmView) and
// the cluster record's Spec and Node.PoolImages (Cluster). Everything a
// decision may edit in place is copied as Clone copies it: the maps, the
// pool, node and job records with their slices, and the cluster record's
// own fields (TestCloneEditableSharesOnlyReplaced). It is the copy a
// store hands out (store.Memory's Read and Update): the Slurm view and
// the spec are the larger part of a state, and are copied only when a
// write replaces them.
func (s *State) CloneEditable() *State {
	c := s.cloneEditable()
	if s.Cluster != nil {
		cl := *s.Cluster
		c.Cluster = &cl
	}
	c.Slurm = s.Slurm
	return c
}

// cloneEditable copies s's maps, pool, node and job records and event
// note; the cluster record and the Slurm view are left to the caller.
func (s *State) cloneEditable() *State {
	c := &State{
		Pools: make(map[string]*Pool, len(s.Pools)),
		Nodes: make(map[string]*Node, len(s.Nodes)),
		Jobs:  make(map[string]*Job, len(s.Jobs)),
	}
	pools := make([]Pool, len(s.Pools))
	total := 0
	for _, v := range s.Pools {
		total += len(v.CapacityWaits)
	}
	waits := make([]int64, 0, total)
	i := 0
	for k, v := range s.Pools {
		p := &pools[i]
		i++
		waits = v.cloneInto(p, waits)
		c.Pools[k] = p
	}
	nodes := make([]Node, len(s.Nodes))
	i = 0
	// The copies are laid out pool by pool in index order, the order in
	// which a decision walks a pool's records: at thousands of nodes, a
	// walk in the map's order would find each record in a cache line of
	// its own.
	type entry struct {
		pool  string
		index int
		key   string
		node  *Node
	}
	order := make([]entry, 0, len(s.Nodes))
	for k, v := range s.Nodes {
		order = append(order, entry{v.Pool, v.Index, k, v})
	}
	slices.SortFunc(order, func(x, y entry) int {
		if c := strings.Compare(x.pool, y.pool); c != 0 {
			return c
		}
		if x.index != y.index {
			return cmp.Compare(x.index, y.index)
		}
		return strings.Compare(x.key, y.key)
	})
	for _, e := range order {
		n := &nodes[i]
		i++
		*n = *e.node
		c.Nodes[e.key] = n
	}
	jobs := make([]Job, len(s.Jobs))
	total = 0
	for _, v := range s.Jobs {
		total += len(v.Nodes)
	}
	names := make([]string, 0, total)
	i = 0
	for k, v := range s.Jobs {
		j := &jobs[i]
		i++
		*j = *v
		j.Nodes, names = carve(names, v.Nodes)
		c.Jobs[k] = j
	}
	c.EventNote = append([]byte(nil), s.EventNote...)
	return c
}

// carve copies src into the free room of backing (a new array when there is
// not enough: the caller sizes backing for every copy), and returns the copy (nil for an
// empty src, with its capacity capped at its length so that appending to
// it never reaches a neighbour) and what is left of backing.
func carve[T any](backing, src []T) (copied, rest []T) {
	if len(src) == 0 {
		return nil, backing
	}
	if cap(backing)-len(backing) < len(src) {
		backing = make([]T, 0, len(src))
	}
	start := len(backing)
	backing = append(backing, src...)
	return backing[start:len(backing):len(backing)], backing
}

// Clone returns a deep copy of the cluster record.
func (c *Cluster) Clone() *Cluster {
	out := *c
	out.Spec = append([]byte(nil), c.Spec...)
	if c.Node.PoolImages != nil {
		out.Node.PoolImages = make(map[string]string, len(c.Node.PoolImages))
		for k, v := range c.Node.PoolImages {
			out.Node.PoolImages[k] = v
		}
	}
	return &out
}

// Clone returns a deep copy of the pool record.
func (p *Pool) Clone() *Pool {
	out := new(Pool)
	p.cloneInto(out, nil)
	return out
}

// cloneInto makes out a deep copy of p, its capacity waits carved from
// waits (carve); it returns what is left of waits.
func (p *Pool) cloneInto(out *Pool, waits []int64) []int64 {
	*out = *p
	out.Zones = slices.Clone(p.Zones)
	out.CapacityWaits, waits = carve(waits, p.CapacityWaits)
	if p.Shortage != nil {
		sh := *p.Shortage
		out.Shortage = &sh
	}
	return waits
}

// Clone returns a copy of the node record (it holds no pointer, slice or
// map).
func (n *Node) Clone() *Node {
	out := *n
	return &out
}

// Clone returns a deep copy of the job record.
func (j *Job) Clone() *Job {
	out := *j
	out.Nodes = append([]string(nil), j.Nodes...)
	return &out
}

// Clone returns a deep copy of the Slurm view.
func (v *SlurmView) Clone() *SlurmView {
	out := *v
	if v.Nodes != nil {
		out.Nodes = make(map[string]SlurmNode, len(v.Nodes))
		total := 0
		for _, n := range v.Nodes {
			total += len(n.Flags)
		}
		flags := make(slurmstate.NodeFlags, 0, total)
		for k, n := range v.Nodes {
			n.Flags, flags = carve(flags, n.Flags)
			out.Nodes[k] = n
		}
	} else {
		out.Nodes = map[string]SlurmNode{}
	}
	if v.Jobs != nil {
		out.Jobs = make([]SlurmJob, len(v.Jobs))
		total := 0
		for _, j := range v.Jobs {
			total += len(j.Nodes)
		}
		names := make([]string, 0, total)
		for i, j := range v.Jobs {
			j.Nodes, names = carve(names, j.Nodes)
			out.Jobs[i] = j
		}
	} else {
		out.Jobs = []SlurmJob{}
	}
	if v.Config != nil {
		cfg := *v.Config
		cfg.Divergences = append([]SlurmDivergence(nil), v.Config.Divergences...)
		out.Config = &cfg
	}
	return &out
}

// CloneRecords is Clone for a decision that replaces records rather than
// editing them, and copies a record map before its first write: Pools and
// the cluster record are copied; the Nodes and Jobs maps, their records
// and the Slurm view are shared with s. The caller must never edit a
// shared record in place, and must replace c.Nodes (c.Jobs) with
// maps.Clone of it before it adds, replaces or deletes an entry. A
// decision that writes nothing (a steady reconcile pass over 10,000
// nodes) then copies no map of them.
func (s *State) CloneRecords() *State {
	c := &State{
		Pools:     make(map[string]*Pool, len(s.Pools)),
		Nodes:     s.Nodes,
		Jobs:      s.Jobs,
		Slurm:     s.Slurm,
		EventNote: s.EventNote,
	}
	if s.Cluster != nil {
		cl := *s.Cluster
		c.Cluster = &cl
	}
	for k, v := range s.Pools {
		p := *v
		p.CapacityWaits = append([]int64(nil), v.CapacityWaits...)
		c.Pools[k] = &p
	}
	return c
}

// PoolNodes returns the nodes of a pool ordered by index.
func (s *State) PoolNodes(pool string) []*Node {
	var out []*Node
	for _, n := range s.Nodes {
		if n.Pool == pool {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// NodeByVM finds the node whose current generation's VM has that name.
func (s *State) NodeByVM(vm string) (*Node, bool) {
	for _, n := range s.Nodes {
		if n.VMName == vm {
			return n, true
		}
	}
	return nil, false
}

// SortedJobs returns the jobs in a stable order (by id, numerically when both are numbers).
func (s *State) SortedJobs() []*Job {
	out := make([]*Job, 0, len(s.Jobs))
	for _, j := range s.Jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return lessJobID(out[a].ID, out[b].ID) })
	return out
}

func lessJobID(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// NodeName is the Slurm node name of index i in a pool: "<cluster>-<pool>-<i>"
// (slurm-gcp's "<cluster>-<nodeset>-<index>" convention).
func NodeName(cluster, pool string, i int) string {
	return fmt.Sprintf("%s-%s-%d", cluster, pool, i)
}

// VMName is the Compute instance name of a node's generation:
// "<node>-g<generation>". A new generation never reuses the name of a VM
// that may still be being deleted.
func VMName(node string, generation int64) string {
	return fmt.Sprintf("%s-g%d", node, generation)
}

// SortedNodes returns every node ordered by name.
func (s *State) SortedNodes() []*Node {
	out := make([]*Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SortedPools returns the pools ordered by id.
func (s *State) SortedPools() []*Pool {
	out := make([]*Pool, 0, len(s.Pools))
	for _, p := range s.Pools {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
