package computesim

import (
	"slices"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// instanceGroupListLocked serves instanceGroups.list: every MIG has an
// instance group of the same name in its zone, whose size counts its member
// VMs ("Instance groups created by a managed instance group … have the same
// name", https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroups).
// gcloud's `instance-groups managed list` reads them to show each MIG's
// size. The simulator has no unmanaged instance groups.
func (s *Sim) instanceGroupListLocked(req *request) (proto.Message, *apiError) {
	var recs []*migRec
	for _, m := range s.migs {
		if m.project == req.project && m.zone == req.zone {
			recs = append(recs, m)
		}
	}
	slices.SortFunc(recs, func(a, b *migRec) int { return strings.Compare(a.name, b.name) })
	all := make([]*computepb.InstanceGroup, len(recs))
	for i, m := range recs {
		size := int32(len(s.migMembersLocked(m)))
		self := strings.Replace(m.pb.GetSelfLink(), "/instanceGroupManagers/", "/instanceGroups/", 1)
		all[i] = &computepb.InstanceGroup{
			Kind:              strp("compute#instanceGroup"),
			Id:                m.pb.Id,
			CreationTimestamp: m.pb.CreationTimestamp,
			Name:              strp(m.name),
			Description:       strp("This instance group is controlled by Instance Group Manager '" + m.name + "'. To modify instances in this group, use the Instance Group Manager API: https://cloud.google.com/compute/docs/reference/latest/instanceGroupManagers"),
			Zone:              m.pb.Zone,
			Size:              &size,
			SelfLink:          strp(self),
			Fingerprint:       strp("42WmSpB8rSM="),
		}
	}
	items, next, aerr := paginate(all, req.query, true)
	if aerr != nil {
		return nil, aerr
	}
	base := "projects/" + req.project + "/zones/" + req.zone + "/instanceGroups"
	out := &computepb.InstanceGroupList{Kind: strp("compute#instanceGroupList"), Id: strp(base), SelfLink: strp(link(base)), Items: items}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}

// autoscalerListLocked serves autoscalers.list: the simulator holds no
// autoscaler (flexslurm never creates one: a MIG of resize requests must
// have none, https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig),
// so the list is empty. gcloud's `instance-groups managed list` reads it to
// say whether each MIG is autoscaled.
func (s *Sim) autoscalerListLocked(req *request) (proto.Message, *apiError) {
	if _, _, aerr := paginate([]*computepb.Autoscaler(nil), req.query, true); aerr != nil {
		return nil, aerr
	}
	base := "projects/" + req.project + "/zones/" + req.zone + "/autoscalers"
	return &computepb.AutoscalerList{Kind: strp("compute#autoscalerList"), Id: strp(base), SelfLink: strp(link(base))}, nil
}
