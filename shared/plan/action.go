// Package plan holds flexslurm's decisions, pure: each function takes a state
// snapshot, the event and `now`, and returns the actions to take, each with
// its reason. Nothing here does I/O, logs or reads the clock, so every rule is
// table-tested. Record changes (Put*/Forget*) are actions too: the caller
// applies them to the snapshot inside the Firestore transaction (Apply) and
// runs the external actions (Compute, Slurm) after the commit.
//
// Every decision that acts on timing or thresholds takes a Policy; its unset
// fields take their values from the one table of defaults, DefaultPolicy.
//
// The rules:
//   - static nodes up to min_node_count when a cluster is created or resized;
//   - job pending → a MIG per node pool and one Flex-Start resize request per
//     job, never beyond max_node_count;
//   - static node expired → recreate, always;
//   - dynamic node expired → recreate only if a job is still pending for it;
//   - health failure → drain the node; once Slurm has drained it, move the
//     VM to a healthy host (reportHostAsFaulty), or delete and replace it
//     when that is not possible, fails or times out — a replacement at once
//     for a static node or a job that is pending or requeued — within the
//     pool's repair budget (repair.go).
//
// This package imports shared/model, shared/spec, shared/naming and
// shared/event (payload types only); never an adapter.
package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// Action is one thing to do. Record actions change the state; the others
// act on Compute Engine or Slurm.
type Action interface {
	// Why says why, for logs and operators.
	Why() string
	// String describes the action in one line.
	String() string
}

// PutCluster stores the cluster record.
type PutCluster struct {
	Cluster model.Cluster
	Reason  string
}

// PutPool stores a pool record.
type PutPool struct {
	Pool   model.Pool
	Reason string
}

// PutNode stores a node record.
type PutNode struct {
	Node   model.Node
	Reason string
}

// PutJob stores a job record.
type PutJob struct {
	Job    model.Job
	Reason string
}

// EnsurePool makes sure the pool's instance template exists, creating it
// when missing (each resize request's MIG is created with the request:
// CreateResizeRequest). Template and
// TemplateBody are the pool record's (model.Pool): the template as it was
// built when the spec was applied, which the executor sends as it is.
type EnsurePool struct {
	Pool         string
	Template     string
	TemplateBody string
	Reason       string
}

// CreateResizeRequest asks Compute Engine for Flex-Start capacity: a MIG
// of its own (MIG, naming.RequestMIG of the request: target size 0, the
// pool's current template, updatePolicy OPPORTUNISTIC, DO_NOTHING, no
// autoscaler) and in it a resize request naming exactly the VMs to create,
// with the pool's run duration. Name, MIG and RequestID are
// deterministic, so repeating it creates nothing twice.
type CreateResizeRequest struct {
	Pool        string
	MIG         string
	Name        string
	VMs         []string
	RunDuration time.Duration // 600–604800 s (Compute API)
	JobID       string        // "" for static nodes
	// WorkloadPolicy is the pool's workload policy (model.Pool) that the
	// MIG references (resourcePolicies.workloadPolicy) when the pool asks
	// for compact placement and the request is for more than one VM; ""
	// otherwise (placement.go).
	WorkloadPolicy string `json:",omitempty"`
	RequestID      string
	Reason         string
}

// CancelResizeRequest cancels a queued (ACCEPTED) resize request. MIG is
// the MIG that holds it: naming.RequestMIG of Name, or, for a request made
// before one MIG per request (Legacy), the pool's MIG.
type CancelResizeRequest struct {
	Pool      string
	MIG       string
	Legacy    bool
	Name      string
	RequestID string
	Reason    string
}

// DeleteResizeRequest deletes a resize request that reached a final state
// (SUCCEEDED, FAILED or CANCELLED) once its outcome is recorded, so the
// MIG's list of requests stays short. Its VMs stay (the discovery
// document's instanceGroupManagerResizeRequests.delete: "Deletes the
// specified, inactive resize request"). A request already gone is done.
type DeleteResizeRequest struct {
	Pool      string
	MIG       string
	Legacy    bool
	Name      string
	State     string // the final state it was seen in
	RequestID string
	Reason    string
}

// DeleteVMs deletes VMs of one MIG (instanceGroupManagers.deleteInstances):
// the MIG of one resize request (Request, MIG naming.RequestMIG of it) whose
// request has SUCCEEDED and that keeps other VMs serving, or (Request "")
// the pool's MIG of the layout before one MIG per request. A VM that is the
// last serving VM of its request's MIG is released by deleting the MIG
// (DeleteMIG) instead, so flexslurm never changes the target size of a MIG
// that may hold a queued request. Only VMs that belong to the pool (by name
// and label) are ever named.
type DeleteVMs struct {
	Pool      string
	MIG       string
	Request   string
	VMs       []string
	RequestID string
	Reason    string
}

// ReportHostAsFaulty asks Compute Engine to take the host of a node's VM
// out of service and restart the VM on a healthy host
// (instances.reportHostAsFaulty with disruptionSchedule IMMEDIATE,
// https://cloud.google.com/compute/docs/reference/rest/v1/instances/reportHostAsFaulty): the VM goes REPAIRING, then RUNNING again with the same name, id
// and termination time, keeping the capacity Flex-Start granted. Node and
// Generation name the node generation it repairs; JobID is the job that
// waits for it ("" when none), so a refusal can replace the VM for it
// (HostRepairFailed). RequestID is deterministic, so a repeated call
// within Compute's request-id window repairs nothing twice.
type ReportHostAsFaulty struct {
	Pool       string
	Node       string
	Generation int64
	VM         string
	// Behavior is the fault reason's behavior: CHIP_ERROR, PERFORMANCE,
	// SILENT_DATA_CORRUPTION or UNRECOVERABLE_GPU_ERROR.
	Behavior string
	// Description is the fault reason's description (at most
	// MaxFaultDescription bytes): the health check's reasons.
	Description string
	JobID       string
	RequestID   string
	Reason      string
}

// StartVM starts a node's VM that its host repair left stopped: a VM whose
// scheduling.automaticRestart is false stays TERMINATED after
// instances.reportHostAsFaulty
// (https://cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host;
// Cluster Toolkit's repair script starts it again), so the reconciler
// starts it (instances.start). Node and Generation name the node
// generation in host repair; RequestID is deterministic per VM.
type StartVM struct {
	Pool       string
	Node       string
	Generation int64
	VM         string
	RequestID  string
	Reason     string
}

// DeleteMIG deletes a MIG and with it its VMs and resize requests: the MIG
// of one resize request (Request, MIG naming.RequestMIG of it) once its
// request is final or cancelled and none of its VMs serves a node, or
// (Request "") the pool's MIG of the layout before one MIG per request once
// it is empty. VMs names the VMs it deletes that a node record names, for
// logs ("" when none).
type DeleteMIG struct {
	Pool      string
	MIG       string
	Request   string
	VMs       []string
	RequestID string
	Reason    string
}

// ForgetPool removes the records of a pool whose MIG is gone (a record
// action).
type ForgetPool struct {
	Pool   string
	Reason string
}

// SlurmCommand asks the Slurm agent to run one scontrol command.
type SlurmCommand struct {
	ID      string // deterministic
	Command event.SlurmOp
	Nodes   []string
	JobID   string
	// Reason says why, for the node's reason or the job's comment in
	// Slurm (rendered with flexslurm's prefix where the command leaves
	// flexslurm: event.RenderReason) and for logs.
	Reason string
	// Reservation, StartTime and DurationSeconds describe a maintenance
	// reservation (reservation_create / reservation_delete).
	Reservation     string
	StartTime       time.Time
	DurationSeconds int64
	// Signal is the signal a SlurmSignal sends (event.Signals).
	Signal string
}

// Alert raises an operator-visible condition that needs no action now.
type Alert struct {
	Pool   string
	Node   string
	Reason string
}

func (a PutCluster) Why() string          { return a.Reason }
func (a PutPool) Why() string             { return a.Reason }
func (a PutNode) Why() string             { return a.Reason }
func (a PutJob) Why() string              { return a.Reason }
func (a EnsurePool) Why() string          { return a.Reason }
func (a CreateResizeRequest) Why() string { return a.Reason }
func (a CancelResizeRequest) Why() string { return a.Reason }
func (a DeleteResizeRequest) Why() string { return a.Reason }
func (a DeleteVMs) Why() string           { return a.Reason }
func (a DeleteMIG) Why() string           { return a.Reason }
func (a ReportHostAsFaulty) Why() string  { return a.Reason }
func (a StartVM) Why() string             { return a.Reason }
func (a ForgetPool) Why() string          { return a.Reason }
func (a Alert) Why() string               { return a.Reason }

// Why of a SlurmCommand is its Reason; a job comment cleared has none.
func (a SlurmCommand) Why() string {
	if a.Reason == "" && a.Command == event.SlurmJobComment {
		return "clear flexslurm's comment on the job"
	}
	return a.Reason
}

func (a PutCluster) String() string {
	return fmt.Sprintf("put cluster %s (spec version %d)", a.Cluster.ID, a.Cluster.SpecVersion)
}
func (a PutPool) String() string {
	return fmt.Sprintf("put pool %s (min %d, max %d)", a.Pool.ID, a.Pool.MinNodes, a.Pool.MaxNodes)
}
func (a PutNode) String() string {
	return fmt.Sprintf("put node %s gen %d %s", a.Node.Name, a.Node.Generation, a.Node.Phase)
}
func (a PutJob) String() string { return fmt.Sprintf("put job %s %s", a.Job.ID, a.Job.State) }
func (a EnsurePool) String() string {
	return fmt.Sprintf("ensure template %s of pool %s", a.Template, a.Pool)
}
func (a CreateResizeRequest) String() string {
	return fmt.Sprintf("create MIG %s and resize request %s in pool %s for %s (%s)", a.MIG, a.Name, a.Pool, strings.Join(a.VMs, ","), a.RunDuration)
}
func (a CancelResizeRequest) String() string {
	return fmt.Sprintf("cancel resize request %s in MIG %s of pool %s", a.Name, a.MIG, a.Pool)
}
func (a DeleteResizeRequest) String() string {
	return fmt.Sprintf("delete %s resize request %s in MIG %s of pool %s", a.State, a.Name, a.MIG, a.Pool)
}
func (a DeleteVMs) String() string {
	return fmt.Sprintf("delete VMs %s of MIG %s of pool %s", strings.Join(a.VMs, ","), a.MIG, a.Pool)
}
func (a SlurmCommand) String() string {
	target := strings.Join(a.Nodes, ",")
	if a.JobID != "" {
		target = "job " + a.JobID
	}
	return fmt.Sprintf("slurm %s %s", a.Command, target)
}
func (a Alert) String() string { return fmt.Sprintf("alert pool %s node %s", a.Pool, a.Node) }
func (a ReportHostAsFaulty) String() string {
	return fmt.Sprintf("report the host of VM %s of pool %s as faulty (%s)", a.VM, a.Pool, a.Behavior)
}
func (a StartVM) String() string {
	return fmt.Sprintf("start VM %s of pool %s after its host repair", a.VM, a.Pool)
}
func (a DeleteMIG) String() string {
	if len(a.VMs) > 0 {
		return fmt.Sprintf("delete MIG %s of pool %s with VMs %s", a.MIG, a.Pool, strings.Join(a.VMs, ","))
	}
	return fmt.Sprintf("delete MIG %s of pool %s", a.MIG, a.Pool)
}
func (a ForgetPool) String() string { return fmt.Sprintf("forget removed pool %s", a.Pool) }

// IsRecord reports whether a changes the stored state (applied inside the
// transaction) rather than acting outside.
func IsRecord(a Action) bool {
	switch a.(type) {
	case PutCluster, PutPool, PutNode, PutJob, ForgetPool:
		return true
	}
	return false
}

// Apply applies the record actions to st, in order. External actions are ignored.
func Apply(st *model.State, actions []Action) {
	for _, a := range actions {
		switch a := a.(type) {
		case PutCluster:
			c := a.Cluster
			st.Cluster = &c
		case PutPool:
			p := a.Pool
			st.Pools[p.ID] = &p
		case PutNode:
			n := a.Node
			st.Nodes[n.Name] = &n
		case PutJob:
			j := a.Job
			j.Nodes = append([]string(nil), a.Job.Nodes...)
			st.Jobs[j.ID] = &j
		case ForgetPool:
			delete(st.Pools, a.Pool)
			for name, n := range st.Nodes {
				if n.Pool == a.Pool {
					delete(st.Nodes, name)
				}
			}
		}
	}
}

// External returns the actions that act outside the state.
func External(actions []Action) []Action {
	var out []Action
	for _, a := range actions {
		if !IsRecord(a) {
			out = append(out, a)
		}
	}
	return out
}
