package computesim

import (
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// migSetTemplateLocked serves instanceGroupManagers.setInstanceTemplate:
// "Specifies the instance template to use when the MIG creates new VMs.
// Existing VMs are not affected."
// (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/setInstanceTemplate).
// A MIG keeps its template until this call (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/setInstanceTemplate).
func (s *Sim) migSetTemplateLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	body := &computepb.InstanceGroupManagersSetInstanceTemplateRequest{}
	if aerr := decodeBody(req, body); aerr != nil {
		return nil, aerr
	}
	if body.GetInstanceTemplate() == "" {
		return nil, errRequired("instanceTemplate")
	}
	tkey, aerr := s.resolveTemplate(req.project, "instanceTemplate", body.GetInstanceTemplate())
	if aerr != nil {
		return nil, aerr
	}
	m.templateKey = tkey
	m.pb.InstanceTemplate = strp(link(tkey))
	m.pb.Versions = []*computepb.InstanceGroupManagerVersion{{InstanceTemplate: strp(link(tkey))}}
	m.pb.Fingerprint = strp(s.hexLocked(16))
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), m.pb.GetSelfLink(), m.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}
