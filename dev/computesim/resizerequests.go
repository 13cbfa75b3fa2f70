package computesim

import (
	"strconv"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// maxResizeRequestVMs is the number of VMs one resize request may ask for
// (1000; docs/compute-contract.md gives its source).
const maxResizeRequestVMs = 1000

func rrKey(m *migRec, name string) string {
	return migKey(m.project, m.zone, m.name) + "/resizeRequests/" + name
}

// rrInsertLocked creates a resize request in CREATING. The MIG's target size
// grows by its VM count at once. The documented rules it applies
// (checkResizeRequestShape, checkResizeRequestMIG) are in rules.go.
func (s *Sim) rrInsertLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	rr := &computepb.InstanceGroupManagerResizeRequest{}
	if aerr := decodeBody(req, rr); aerr != nil {
		return nil, aerr
	}
	if aerr := checkName("resource.name", rr.GetName()); aerr != nil {
		return nil, aerr
	}
	key := rrKey(m, rr.GetName())
	if m.rrs[rr.GetName()] != nil {
		return nil, errAlreadyExists(key)
	}
	count, names, aerr := checkResizeRequestShape(rr)
	if aerr != nil {
		return nil, aerr
	}
	if s.opts.Readings.RefuseNamedRequestsOnV1 || s.opts.Readings.RefuseNamedRequestsOnBeta {
		if aerr := checkNamedRequestAPI(req, names, s.opts.Readings); aerr != nil {
			return nil, aerr
		}
	}
	if aerr := checkResizeRequestMIG(m); aerr != nil {
		return nil, aerr
	}
	if aerr := checkRegionalResizeRequestMIG(m); aerr != nil {
		return nil, aerr
	}
	id := s.newIDLocked()
	migLink := m.pb.GetSelfLink()
	rr.Kind = strp("compute#instanceGroupManagerResizeRequest")
	rr.Id = u64p(id)
	rr.CreationTimestamp = strp(formatTime(req.now))
	rr.Zone, rr.Region = strp(zoneLink(req.project, req.zone)), nil
	if isRegionName(req.zone) {
		rr.Zone, rr.Region = nil, strp(regionLink(req.project, req.zone))
	}
	rr.SelfLink = strp(migLink + "/resizeRequests/" + rr.GetName())
	rr.SelfLinkWithId = strp(migLink + "/resizeRequests/" + strconv.FormatUint(id, 10))
	rr.State = strp(stateCreating)
	rr.Status = &computepb.InstanceGroupManagerResizeRequestStatus{}
	m.rrs[rr.GetName()] = &rrRec{
		seq:         s.nextSeqLocked(),
		project:     req.project,
		zone:        req.zone,
		mig:         m.name,
		pb:          rr,
		count:       count,
		names:       names,
		runDuration: durationOf(rr.RequestedRunDuration),
		created:     req.now,
		acceptAt:    req.now.Add(s.opts.AcceptDelay),
		policy:      lastSegment(m.policyKey),
	}
	m.pb.TargetSize = i32p(m.pb.GetTargetSize() + int32(count))
	// The insert operation's target is the MIG, not the new request: the
	// gcloud CLI appends "/resizeRequests/NAME" to the operation's
	// targetLink to fetch what it created (googlecloudsdk
	// api_lib/compute/waiters.py, OperationData.resize_request_name).
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), migLink, m.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}

func (s *Sim) rrLocked(req *request) (*migRec, *rrRec, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, nil, aerr
	}
	rr := m.rrs[req.rr]
	if rr == nil {
		return nil, nil, errNotFound(rrKey(m, req.rr))
	}
	return m, rr, nil
}

func (s *Sim) rrGetLocked(req *request) (proto.Message, *apiError) {
	_, rr, aerr := s.rrLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	return rr.pb, nil
}

func (s *Sim) rrListLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	var all []*computepb.InstanceGroupManagerResizeRequest
	for _, rr := range sortedRRs(m) {
		all = append(all, rr.pb)
	}
	items, next, aerr := paginate(all, req.query, true)
	if aerr != nil {
		return nil, aerr
	}
	base := migKey(m.project, m.zone, m.name) + "/resizeRequests"
	out := &computepb.InstanceGroupManagerResizeRequestsListResponse{
		Kind: strp("compute#instanceGroupManagerResizeRequestList"), Id: strp(base), SelfLink: strp(link(base)), Items: items,
	}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}

// rrCancelLocked cancels an ACCEPTED request (checkResizeRequestCancel);
// any other state is a 400. The MIG's target size shrinks by the request's
// count.
func (s *Sim) rrCancelLocked(req *request) (proto.Message, *apiError) {
	m, rr, aerr := s.rrLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkResizeRequestCancel(m, rr); aerr != nil {
		return nil, aerr
	}
	rr.pb.State = strp(stateCancelled)
	if rr.pb.Status != nil {
		rr.pb.Status.LastAttempt = nil // cleared when the request turns final
	}
	m.pb.TargetSize = i32p(m.pb.GetTargetSize() - int32(rr.count))
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), rr.pb.GetSelfLink(), rr.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}

// rrDeleteLocked deletes an inactive (SUCCEEDED, FAILED or CANCELLED)
// request (checkResizeRequestDelete); its VMs stay.
func (s *Sim) rrDeleteLocked(req *request) (proto.Message, *apiError) {
	m, rr, aerr := s.rrLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkResizeRequestDelete(m, rr); aerr != nil {
		return nil, aerr
	}
	delete(m.rrs, req.rr)
	rr.deleted = req.now
	s.deletedRRs = append(s.deletedRRs, rr)
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), rr.pb.GetSelfLink(), rr.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}
