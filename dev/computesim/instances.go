package computesim

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

func (s *Sim) instanceLocked(req *request) (*instanceRec, *apiError) {
	key := instanceKey(req.project, req.zone, req.name)
	in := s.instances[key]
	if in == nil {
		return nil, errNotFound(key)
	}
	return in, nil
}

func (s *Sim) instanceGetLocked(req *request) (proto.Message, *apiError) {
	in, aerr := s.instanceLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	return in.pb, nil
}

func (s *Sim) instanceListLocked(req *request) (proto.Message, *apiError) {
	// In key order, as the zone's keys differ in the name only.
	var recs []*instanceRec
	for _, in := range s.instances {
		if in.project == req.project && in.zone == req.zone {
			recs = append(recs, in)
		}
	}
	slices.SortFunc(recs, func(a, b *instanceRec) int { return strings.Compare(a.name, b.name) })
	all := make([]*computepb.Instance, len(recs))
	for i, in := range recs {
		all[i] = in.pb
	}
	items, next, aerr := paginate(all, req.query, true)
	if aerr != nil {
		return nil, aerr
	}
	base := "projects/" + req.project + "/zones/" + req.zone + "/instances"
	out := &computepb.InstanceList{Kind: strp("compute#instanceList"), Id: strp(base), SelfLink: strp(link(base)), Items: items}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}

// instanceDeleteLocked deletes a VM on behalf of the caller. A VM already
// being deleted answers 400 resourceNotReady. Deleting a MIG member directly
// shrinks the MIG's target size (a real MIG would recreate it; flexslurm uses
// deleteInstances).
func (s *Sim) instanceDeleteLocked(req *request) (proto.Message, *apiError) {
	in, aerr := s.instanceLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	if !in.deleteAt.IsZero() {
		return nil, errNotReady(instanceKey(req.project, req.zone, req.name))
	}
	in.callerIP, in.userAgent = callerIP(req), req.http.UserAgent()
	return s.beginDeleteLocked(in, req.now, causeAPI, s.callerPrincipal(req.project), true), nil
}

func callerIP(req *request) string {
	host, _, err := net.SplitHostPort(req.http.RemoteAddr)
	if err != nil {
		return req.http.RemoteAddr
	}
	return host
}

// instanceReportHostAsFaultyLocked serves reportHostAsFaulty (https://cloud.google.com/compute/docs/reference/rest/v1/instances/reportHostAsFaulty).
// Compute accepts it only for a running VM that "uses an A4X Max, A4X, A4,
// or A3 Ultra machine type" and "uses the reservation-bound provisioning
// model" (https://cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host,
// "Limitations"); any other VM is refused with
// INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED
// (https://cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api).
// With disruptionSchedule IMMEDIATE the VM goes REPAIRING and its operation
// stays RUNNING for Options.RepairDelay (the docs give 10–12 minutes); then
// the operation is DONE and the VM is on a new physical host with the same
// ID: RUNNING again, or TERMINATED (stopped) when scheduling.automaticRestart
// is false, as the docs say of such VMs (Cluster Toolkit's repair script
// starts them again). FUTURE is validated and recorded but changes nothing
// (it acts at the next maintenance event, which the simulator does not
// model).
func (s *Sim) instanceReportHostAsFaultyLocked(req *request) (proto.Message, *apiError) {
	in, aerr := s.instanceLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	body := &computepb.InstancesReportHostAsFaultyRequest{}
	if aerr := decodeBody(req, body); aerr != nil {
		return nil, aerr
	}
	immediate := computepb.InstancesReportHostAsFaultyRequest_IMMEDIATE.String()
	future := computepb.InstancesReportHostAsFaultyRequest_FUTURE.String()
	switch ds := body.GetDisruptionSchedule(); {
	case ds == "":
		return nil, errRequired("disruptionSchedule")
	case !oneOf(ds, immediate, future):
		return nil, errInvalidField("disruptionSchedule", ds, "Must be IMMEDIATE or FUTURE.")
	}
	if len(body.GetFaultReasons()) == 0 {
		return nil, errRequired("faultReasons")
	}
	for _, fr := range body.GetFaultReasons() {
		b := fr.GetBehavior()
		if !oneOf(b,
			computepb.InstancesReportHostAsFaultyRequestFaultReason_CHIP_ERROR.String(),
			computepb.InstancesReportHostAsFaultyRequestFaultReason_PERFORMANCE.String(),
			computepb.InstancesReportHostAsFaultyRequestFaultReason_SILENT_DATA_CORRUPTION.String(),
			computepb.InstancesReportHostAsFaultyRequestFaultReason_UNRECOVERABLE_GPU_ERROR.String()) {
			return nil, errInvalidField("faultReasons.behavior", b,
				"Must be CHIP_ERROR, PERFORMANCE, SILENT_DATA_CORRUPTION or UNRECOVERABLE_GPU_ERROR.")
		}
	}
	if aerr := hostRepairRefusal(in); aerr != nil {
		return nil, aerr
	}
	if in.pb.GetStatus() != statusRunning || !in.deleteAt.IsZero() {
		return nil, errNotReady(instanceKey(req.project, req.zone, req.name))
	}
	op := s.newOpLocked(req.project, req.zone, opTypeOf(req.method), in.pb.GetSelfLink(), in.pb.GetId(), s.callerPrincipal(req.project), req.now)
	if body.GetDisruptionSchedule() == immediate {
		in.pb.Status = strp(statusRepairing)
		in.repairAt = req.now.Add(s.opts.RepairDelay)
		if s.opts.RepairDelay > 0 {
			// The operation runs until the repair ends (finishRepairLocked).
			op.Status = computepb.Operation_RUNNING.Enum()
			op.Progress = i32p(0)
			op.EndTime = nil
			in.repairOp = opKey(req.project, req.zone, op.GetName())
		}
		s.hookLocked(s.opts.OnInstanceRepairing, in)
	}
	return op, nil
}

// HostRepairFamilies are the machine families (machine type prefixes) whose
// hosts Compute repairs on request: A4X Max, A4X, A4, A3 Ultra, A3 Mega and
// A3 High with 8 GPUs ("only supports A4X Max, A4X, A4, A3 Ultra, A3 Mega,
// and A3 High (8 GPUs) machine types",
// https://docs.cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api).
var HostRepairFamilies = []string{"a4x-maxgpu-", "a4x-highgpu-", "a4-highgpu-", "a3-ultragpu-", "a3-megagpu-", "a3-highgpu-8g"}

// ErrHostRepairUnsupported is the error code Compute gives a
// reportHostAsFaulty on a VM that is not reservation-bound, or not of an
// eligible machine family, as Google's troubleshooting page names it
// (https://cloud.google.com/ai-hypercomputer/docs/troubleshooting/troubleshoot-faulty-host-api).
// The page names the code, not the HTTP status: the simulator answers 400,
// as Compute does for the other requests it refuses for what the VM is.
const ErrHostRepairUnsupported = "INSTANCES_WITHOUT_RESERVATION_NOT_SUPPORTED"

// hostRepairRefusal refuses a host repair of a VM that is not
// reservation-bound (scheduling.provisioningModel RESERVATION_BOUND) or not
// of a HostRepairFamilies machine type.
func hostRepairRefusal(in *instanceRec) *apiError {
	pm := in.pb.GetScheduling().GetProvisioningModel()
	mt := lastSegment(in.pb.GetMachineType())
	eligible := false
	for _, f := range HostRepairFamilies {
		if strings.HasPrefix(mt, f) {
			eligible = true
		}
	}
	if pm == computepb.Scheduling_RESERVATION_BOUND.String() && eligible {
		return nil
	}
	if pm == "" {
		pm = "STANDARD"
	}
	return &apiError{code: 400, reason: ErrHostRepairUnsupported, message: fmt.Sprintf(
		"Reporting a faulty host is supported only for reservation-bound instances of A4X Max, A4X, A4, A3 Ultra, A3 Mega and A3 High (8 GPUs) machine types; instance '%s' has provisioning model %s and machine type %s.",
		in.pb.GetName(), pm, mt)}
}

// instanceStartLocked serves instances.start: a stopped (TERMINATED) VM
// starts again, RUNNING with a new lastStartTimestamp
// (https://cloud.google.com/compute/docs/reference/rest/v1/instances/start).
// A VM in any other state is refused as not ready: the simulator does not
// accept a start that Compute might reject.
func (s *Sim) instanceStartLocked(req *request) (proto.Message, *apiError) {
	in, aerr := s.instanceLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	if in.pb.GetStatus() != statusTerminated || !in.deleteAt.IsZero() {
		return nil, errNotReady(instanceKey(req.project, req.zone, req.name))
	}
	in.pb.Status = strp(statusRunning)
	in.pb.LastStartTimestamp = strp(formatTime(req.now))
	s.hookLocked(s.opts.OnInstanceRunning, in)
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), in.pb.GetSelfLink(), in.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}
