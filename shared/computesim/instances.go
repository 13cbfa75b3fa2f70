package computesim

import (
	"maps"
	"net"
	"slices"

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
	var all []*computepb.Instance
	for _, k := range slices.Sorted(maps.Keys(s.instances)) {
		if in := s.instances[k]; in.project == req.project && in.zone == req.zone {
			all = append(all, in.pb)
		}
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

// instanceReportHostAsFaultyLocked serves reportHostAsFaulty (gcp.md §1.6).
// With disruptionSchedule IMMEDIATE the VM goes REPAIRING and, after
// Options.RepairDelay, RUNNING again on a new physical host with the same ID
// and termination time. FUTURE is validated and recorded but changes nothing
// (it acts at the next maintenance event, which the simulator does not model).
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
	if in.pb.GetStatus() != statusRunning || !in.deleteAt.IsZero() {
		return nil, errNotReady(instanceKey(req.project, req.zone, req.name))
	}
	if body.GetDisruptionSchedule() == immediate {
		in.pb.Status = strp(statusRepairing)
		in.repairAt = req.now.Add(s.opts.RepairDelay)
		s.hookLocked(s.opts.OnInstanceRepairing, in)
	}
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), in.pb.GetSelfLink(), in.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}
