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
	s.mu.Lock()
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
