package computesim

import (
	"fmt"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// AddInstance creates a RUNNING VM outside any MIG, as a user or another
// tool would (gcloud compute instances create): for tests that flexslurm
// never touches what is not labelled as its own. It fails if the name is
// taken. project "" means Options.Project.
func (s *Sim) AddInstance(project, zone, name string, labels map[string]string) (Instance, error) {
	if project == "" {
		project = s.opts.Project
	}
	if apiErr := checkName("name", name); apiErr != nil {
		return Instance{}, apiErr
	}
	s.lockForWrite()
	now := s.nowLocked()
	s.advanceLocked(now)
	key := instanceKey(project, zone, name)
	if _, taken := s.instances[key]; taken {
		s.mu.Unlock()
		return Instance{}, fmt.Errorf("instance %s already exists", name)
	}
	zl := zoneLink(project, zone)
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	pb := &computepb.Instance{
		Kind: strp("compute#instance"), Id: u64p(s.newIDLocked()), Name: strp(name), Zone: strp(zl),
		CreationTimestamp: strp(formatTime(now)), LastStartTimestamp: strp(formatTime(now)),
		MachineType: strp(zl + "/machineTypes/n2-standard-8"), Status: strp(statusRunning),
		Labels: l, SelfLink: strp(link(key)),
	}
	in := &instanceRec{seq: s.nextSeqLocked(), project: project, zone: zone, name: name, pb: pb, created: now}
	s.newHostLocked(in)
	s.instances[key] = in
	out := s.snapshotLocked(in)
	eff := s.takeEffectsLocked()
	s.mu.Unlock()
	runEffects(eff)
	return out, nil
}

// SetReservationBound makes a VM reservation-bound
// (scheduling.provisioningModel RESERVATION_BOUND, with automaticRestart as
// given), as if it had been created from a reservation-bound template: for
// tests of host repair, which Compute accepts only for such VMs of the A4X
// Max, A4X, A4 and A3 Ultra families, while flexslurm's own templates are
// Flex-Start. project "" means Options.Project.
func (s *Sim) SetReservationBound(project, zone, name string, automaticRestart bool) error {
	if project == "" {
		project = s.opts.Project
	}
	s.lockForWrite()
	defer s.mu.Unlock()
	in := s.instances[instanceKey(project, zone, name)]
	if in == nil {
		return fmt.Errorf("instance %s not found", name)
	}
	if in.pb.Scheduling == nil {
		in.pb.Scheduling = &computepb.Scheduling{}
	}
	in.pb.Scheduling.ProvisioningModel = strp(computepb.Scheduling_RESERVATION_BOUND.String())
	in.pb.Scheduling.AutomaticRestart = &automaticRestart
	return nil
}
