package computesim

import (
	"maps"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// instanceInsertLocked serves instances.insert: a VM outside any MIG, from
// the request body and, with ?sourceInstanceTemplate=, a template whose
// properties the body's fields override. It is checked as Compute checks
// it for the fields flexslurm cares about: a machine type given as
// zones/ZONE/machineTypes/TYPE (or a URL), exactly one boot disk whose
// initializeParams.sourceImage exists (images.go), GPUs (gpus.go). The VM
// is RUNNING at once; a standalone VM's Flex-Start queueing and run
// duration are not simulated (flexslurm creates its VMs through MIGs).
func (s *Sim) instanceInsertLocked(req *request) (proto.Message, *apiError) {
	body := &computepb.Instance{}
	if aerr := decodeBody(req, body); aerr != nil {
		return nil, aerr
	}
	if aerr := checkName("resource.name", body.GetName()); aerr != nil {
		return nil, aerr
	}
	if src := req.query.Get("sourceInstanceTemplate"); src != "" {
		tkey, aerr := s.resolveTemplate(req.project, "sourceInstanceTemplate", src)
		if aerr != nil {
			return nil, aerr
		}
		merged := fromTemplate(req.zone, s.templates[tkey].pb.GetProperties())
		proto.Merge(merged, body)
		body = merged
	}
	mt := body.GetMachineType()
	if mt == "" {
		return nil, errRequired("resource.machineType")
	}
	if i := strings.Index(mt, "/machineTypes/"); i < 0 || !strings.HasSuffix(mt[:i], "zones/"+req.zone) {
		return nil, errInvalidField("resource.machineType", mt, "Instances take a machine type as zones/ZONE/machineTypes/TYPE.")
	}
	mtName := lastSegment(mt)
	boots := 0
	for _, d := range body.GetDisks() {
		if d.GetBoot() {
			boots++
		}
	}
	if boots != 1 {
		return nil, errInvalid("Invalid value for field 'resource.disks': exactly one boot disk is required.")
	}
	if aerr := s.checkBootDisksLocked("resource", req.project, body.GetDisks()); aerr != nil {
		return nil, aerr
	}
	var accels []accel
	for _, a := range body.GetGuestAccelerators() {
		accels = append(accels, accel{lastSegment(a.GetAcceleratorType()), int(a.GetAcceleratorCount())})
	}
	if aerr := checkGPUs("resource", mtName, accels, body.GetScheduling().GetOnHostMaintenance()); aerr != nil {
		return nil, aerr
	}
	if aerr := checkLabels("resource.labels", body.GetLabels()); aerr != nil {
		return nil, aerr
	}
	key := instanceKey(req.project, req.zone, body.GetName())
	if _, taken := s.instances[key]; taken {
		return nil, errAlreadyExists(key)
	}
	zl := zoneLink(req.project, req.zone)
	pb := proto.CloneOf(body)
	pb.Kind = strp("compute#instance")
	pb.Id = u64p(s.newIDLocked())
	pb.Zone = strp(zl)
	pb.CreationTimestamp = strp(formatTime(req.now))
	pb.LastStartTimestamp = strp(formatTime(req.now))
	pb.MachineType = strp(zl + "/machineTypes/" + mtName)
	pb.Status = strp(statusRunning)
	pb.SelfLink = strp(link(key))
	if pb.Labels == nil {
		pb.Labels = map[string]string{}
	}
	in := &instanceRec{seq: s.nextSeqLocked(), project: req.project, zone: req.zone, name: body.GetName(), pb: pb, created: req.now}
	s.newHostLocked(in)
	s.instances[key] = in
	return s.newOpLocked(req.project, req.zone, "insert", link(key), pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}

// fromTemplate is the Instance a template's properties describe in zone.
func fromTemplate(zone string, p *computepb.InstanceProperties) *computepb.Instance {
	p = proto.CloneOf(p)
	in := &computepb.Instance{
		Description: p.Description, Labels: maps.Clone(p.Labels), Metadata: p.Metadata,
		Disks: p.Disks, NetworkInterfaces: p.NetworkInterfaces, GuestAccelerators: p.GuestAccelerators,
		Scheduling: p.Scheduling, ServiceAccounts: p.ServiceAccounts, ReservationAffinity: p.ReservationAffinity,
		Tags: p.Tags,
	}
	if p.GetMachineType() != "" {
		in.MachineType = strp("zones/" + zone + "/machineTypes/" + p.GetMachineType())
	}
	for _, a := range in.GuestAccelerators {
		a.AcceleratorType = strp("zones/" + zone + "/acceleratorTypes/" + lastSegment(a.GetAcceleratorType()))
	}
	return in
}
