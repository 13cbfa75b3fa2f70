package computesim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Wire values of the enums the simulator uses (computepb enum names).
var (
	stateCreating  = computepb.InstanceGroupManagerResizeRequest_CREATING.String()
	stateAccepted  = computepb.InstanceGroupManagerResizeRequest_ACCEPTED.String()
	stateSucceeded = computepb.InstanceGroupManagerResizeRequest_SUCCEEDED.String()
	stateFailed    = computepb.InstanceGroupManagerResizeRequest_FAILED.String()
	stateCancelled = computepb.InstanceGroupManagerResizeRequest_CANCELLED.String()

	statusRunning    = computepb.Instance_RUNNING.String()
	statusTerminated = computepb.Instance_TERMINATED.String()
	statusStopping   = computepb.Instance_STOPPING.String()
	statusRepairing  = computepb.Instance_REPAIRING.String()

	actionNone     = computepb.ManagedInstance_NONE.String()
	actionDeleting = computepb.ManagedInstance_DELETING.String()

	flexStart = computepb.Scheduling_FLEX_START.String()
	doNothing = computepb.InstanceGroupManagerInstanceLifecyclePolicy_DO_NOTHING.String()
	repair    = computepb.InstanceGroupManagerInstanceLifecyclePolicy_REPAIR.String()
)

// acceptLocked moves a CREATING resize request to ACCEPTED and schedules its
// capacity.
func (s *Sim) acceptLocked(m *migRec, rr *rrRec, at time.Time) {
	rr.pb.State = strp(stateAccepted)
	var delay time.Duration
	if s.opts.CapacityDelay != nil {
		delay = s.opts.CapacityDelay(rr.zone, s.migMachineTypeLocked(m))
	}
	if delay < 0 {
		delay = 0
	}
	rr.capacityAt = at.Add(delay)
}

func (s *Sim) migMachineTypeLocked(m *migRec) string {
	if t := s.templates[m.templateKey]; t != nil {
		return t.pb.GetProperties().GetMachineType()
	}
	return ""
}

// provisionLocked creates the VMs of an ACCEPTED resize request whose capacity
// has arrived and whose names are free; the request SUCCEEDS. The MIG's
// target size already counts these VMs (it grew when the request was created).
func (s *Sim) provisionLocked(m *migRec, rr *rrRec, at time.Time) {
	names := rr.names
	if names == nil {
		for range rr.count {
			names = append(names, s.generateInstanceNameLocked(m))
		}
	}
	run := rr.runDuration
	if run == 0 {
		run = s.templateRunDurationLocked(m)
	}
	var provisioned []string
	for _, n := range names {
		in := s.createInstanceLocked(m, n, rr.pb.GetName(), run, at)
		provisioned = append(provisioned, in.name)
	}
	// A new slice: the one ResizeRequests handed out stays as it was.
	rr.provisionedInstance = append(slices.Clip(rr.provisionedInstance), provisioned...)
	rr.pb.State = strp(stateSucceeded)
	if rr.pb.Status != nil {
		rr.pb.Status.LastAttempt = nil // cleared when the request turns final
	}
}

func (s *Sim) templateRunDurationLocked(m *migRec) time.Duration {
	if t := s.templates[m.templateKey]; t != nil {
		return durationOf(t.pb.GetProperties().GetScheduling().GetMaxRunDuration())
	}
	return 0
}

// generateInstanceNameLocked returns baseInstanceName-xxxx with a random
// four-character suffix, like a MIG does, unused in the zone.
func (s *Sim) generateInstanceNameLocked(m *migRec) string {
	base := m.pb.GetBaseInstanceName()
	return s.uniqueLocked(func() string {
		for {
			n := base + "-" + s.randStringLocked(lowerAlnum, 4)
			if _, taken := s.instances[instanceKey(m.project, m.placeZone(), n)]; !taken {
				return n
			}
		}
	})
}

// createInstanceLocked creates a RUNNING VM in MIG m from its template.
// run > 0 limits its life: terminationTimestamp = at + run.
func (s *Sim) createInstanceLocked(m *migRec, name, rrName string, run time.Duration, at time.Time) *instanceRec {
	var props *computepb.InstanceProperties
	if t := s.templates[m.templateKey]; t != nil {
		props = proto.CloneOf(t.pb.GetProperties())
	} else {
		props = &computepb.InstanceProperties{}
	}
	zone := m.placeZone()
	key := instanceKey(m.project, zone, name)
	zl := zoneLink(m.project, zone)
	pb := &computepb.Instance{
		Kind:                strp("compute#instance"),
		Id:                  u64p(s.newIDLocked()),
		Name:                strp(name),
		Description:         props.Description,
		Zone:                strp(zl),
		CreationTimestamp:   strp(formatTime(at)),
		LastStartTimestamp:  strp(formatTime(at)),
		MachineType:         strp(zl + "/machineTypes/" + props.GetMachineType()),
		Status:              strp(statusRunning),
		Labels:              props.Labels,
		Scheduling:          props.Scheduling,
		ServiceAccounts:     props.ServiceAccounts,
		Tags:                props.Tags,
		ReservationAffinity: props.ReservationAffinity,
		SelfLink:            strp(link(key)),
		CpuPlatform:         strp("Intel Sapphire Rapids"),
		StartRestricted:     boolp(false),
		DeletionProtection:  boolp(false),
		Fingerprint:         strp(s.hexLocked(16)),
		LabelFingerprint:    strp(s.hexLocked(16)),
	}
	if pb.Labels == nil {
		pb.Labels = map[string]string{}
	}
	// Metadata: the template's items plus created-by, as on MIG VMs.
	md := &computepb.Metadata{Kind: strp("compute#metadata"), Fingerprint: strp(s.hexLocked(16))}
	for _, it := range props.GetMetadata().GetItems() {
		if it.GetKey() != "created-by" {
			md.Items = append(md.Items, it)
		}
	}
	md.Items = append(md.Items, &computepb.Items{
		Key:   strp("created-by"),
		Value: strp("projects/" + s.opts.ProjectNumber + "/" + scopeOf(m.zone) + "/instanceGroupManagers/" + m.name),
	})
	pb.Metadata = md
	for i, d := range props.GetDisks() {
		ad := &computepb.AttachedDisk{
			Kind:       strp("compute#attachedDisk"),
			Index:      i32p(int32(i)),
			Boot:       d.Boot,
			AutoDelete: d.AutoDelete,
			Mode:       strp("READ_WRITE"),
			Type:       strp("PERSISTENT"),
			Interface:  strp("SCSI"),
			DeviceName: strp(fmt.Sprintf("persistent-disk-%d", i)),
			Source:     strp(zl + "/disks/" + name + diskSuffix(i)),
			DiskSizeGb: d.GetInitializeParams().DiskSizeGb,
		}
		if d.DeviceName != nil {
			ad.DeviceName = d.DeviceName
		}
		pb.Disks = append(pb.Disks, ad)
	}
	for i, nic := range props.GetNetworkInterfaces() {
		s.ipSeq++
		n := &computepb.NetworkInterface{
			Kind:        strp("compute#networkInterface"),
			Name:        strp(fmt.Sprintf("nic%d", i)),
			Network:     nic.Network,
			Subnetwork:  nic.Subnetwork,
			StackType:   strp("IPV4_ONLY"),
			NetworkIP:   strp(fmt.Sprintf("10.%d.%d.%d", 128+(s.ipSeq>>16)&0x7f, (s.ipSeq>>8)&0xff, s.ipSeq&0xff)),
			Fingerprint: strp(s.hexLocked(16)),
		}
		for _, ac := range nic.GetAccessConfigs() {
			c := proto.CloneOf(ac)
			c.Kind = strp("compute#accessConfig")
			c.NatIP = strp(fmt.Sprintf("34.%d.%d.%d", 1+(s.ipSeq>>16)&0x7f, (s.ipSeq>>8)&0xff, s.ipSeq&0xff))
			n.AccessConfigs = append(n.AccessConfigs, c)
		}
		pb.NetworkInterfaces = append(pb.NetworkInterfaces, n)
	}
	for _, a := range props.GetGuestAccelerators() {
		pb.GuestAccelerators = append(pb.GuestAccelerators, &computepb.AcceleratorConfig{
			AcceleratorType:  strp(zl + "/acceleratorTypes/" + lastSegment(a.GetAcceleratorType())),
			AcceleratorCount: a.AcceleratorCount,
		})
	}
	in := &instanceRec{
		seq:     s.nextSeqLocked(),
		project: m.project,
		zone:    zone,
		name:    name,
		pb:      pb,
		mig:     m.name,
		migLoc:  m.zone,
		rr:      rrName,
		created: at,
	}
	if t := s.templates[m.templateKey]; t != nil {
		in.template = t.pb.GetName()
	}
	if run > 0 {
		in.termination = at.Add(run)
		if pb.Scheduling == nil {
			pb.Scheduling = &computepb.Scheduling{}
		}
		pb.Scheduling.MaxRunDuration = &computepb.Duration{Seconds: i64p(int64(run / time.Second)), Nanos: nanosOf(run)}
	}
	s.newHostLocked(in)
	s.setTerminationLocked(in)
	s.instances[key] = in
	s.hookLocked(s.opts.OnInstanceRunning, in)
	return in
}

func diskSuffix(i int) string {
	if i == 0 {
		return ""
	}
	return fmt.Sprintf("-%d", i)
}

func nanosOf(d time.Duration) *int32 {
	if n := int32(d % time.Second); n != 0 {
		return &n
	}
	return nil
}

// newHostLocked places the VM on a new physical host.
func (s *Sim) newHostLocked(in *instanceRec) {
	in.host++
	if in.pb.ResourceStatus == nil {
		in.pb.ResourceStatus = &computepb.ResourceStatus{}
	}
	in.pb.ResourceStatus.PhysicalHost = strp("/" + s.hexLocked(32) + "/" + s.hexLocked(32) + "/" + s.hexLocked(32))
}

// setTerminationLocked mirrors in.termination into
// resourceStatus.scheduling.terminationTimestamp.
func (s *Sim) setTerminationLocked(in *instanceRec) {
	if in.pb.ResourceStatus == nil {
		in.pb.ResourceStatus = &computepb.ResourceStatus{}
	}
	if in.termination.IsZero() {
		in.pb.ResourceStatus.Scheduling = nil
		return
	}
	in.pb.ResourceStatus.Scheduling = &computepb.ResourceStatusScheduling{
		TerminationTimestamp: strp(formatTime(in.termination)),
	}
}

// migMembersLocked returns the VMs of MIG m ordered by name.
func (s *Sim) migMembersLocked(m *migRec) []*instanceRec {
	var out []*instanceRec
	for _, in := range s.instances {
		if in.project == m.project && in.migLoc == m.zone && in.mig == m.name {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b *instanceRec) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return cmpSeq(a.seq, b.seq)
	})
	return out
}

// expireLocked ends a VM's run: Compute deletes resize-request VMs at the end
// of their run duration (https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig).
// The MIG's target size shrinks, unless Readings.KeepTargetSizeAtRunEnd
// (then the MIG still counts the VM; the simulator does not recreate it).
func (s *Sim) expireLocked(in *instanceRec, at time.Time) {
	in.termination = at
	s.setTerminationLocked(in)
	in.repairAt = time.Time{}
	shrink := !s.opts.Readings.KeepTargetSizeAtRunEnd
	if s.opts.ExpiryLogStyle == ExpiryLogMIGDelete {
		s.beginDeleteLocked(in, at, causeExpiry, s.cloudServicesPrincipal(), shrink)
		return
	}
	s.beginDeleteLocked(in, at, causeExpiry, "system@google.com", shrink)
}

// beginDeleteLocked starts deleting a VM: it shows STOPPING (currentAction
// DELETING) until at+DeleteDelay. shrink lowers its MIG's target size. It
// returns the delete operation (nil for the end-of-run system event).
func (s *Sim) beginDeleteLocked(in *instanceRec, at time.Time, cause deleteCause, principal string, shrink bool) *computepb.Operation {
	in.pb.Status = strp(statusStopping)
	in.repairAt = time.Time{}
	s.endRepairOpLocked(in, at)
	in.deleteAt = at.Add(s.opts.DeleteDelay)
	in.deleteCause = cause
	in.deletePrincipal = principal
	s.hookLocked(s.opts.OnInstanceStopping, in)
	if shrink && in.mig != "" {
		if m := s.migs[migKey(in.project, in.zone, in.mig)]; m != nil && m.pb.GetTargetSize() > 0 {
			m.pb.TargetSize = i32p(m.pb.GetTargetSize() - 1)
		}
	}
	if cause == causeExpiry && s.opts.ExpiryLogStyle != ExpiryLogMIGDelete {
		// The deferredDelete system event is a single entry written when the
		// deletion is done (finishDeleteLocked).
		in.deleteOpID = s.uniqueLocked(func() string {
			return fmt.Sprintf("systemevent-%d-%s-%s-%s", at.UnixMilli(), s.hexLocked(13), s.hexLocked(8), s.hexLocked(8))
		})
		return nil
	}
	op := s.newOpLocked(in.project, in.zone, "delete", link(instanceKey(in.project, in.zone, in.name)), in.pb.GetId(), principal, at)
	in.deleteOpID = op.GetName()
	s.auditDeleteLocked(in, at, true, op)
	return op
}

// finishDeleteLocked removes a VM whose deletion is complete.
func (s *Sim) finishDeleteLocked(in *instanceRec, at time.Time) {
	delete(s.instances, instanceKey(in.project, in.zone, in.name))
	if in.deleteCause == causeExpiry && s.opts.ExpiryLogStyle != ExpiryLogMIGDelete {
		s.auditDeferredDeleteLocked(in, at)
	} else {
		s.auditDeleteLocked(in, at, false, nil)
	}
	s.hookLocked(s.opts.OnInstanceDeleted, in)
}

// finishRepairLocked ends a host repair: the VM is on a new host, RUNNING
// again, or TERMINATED (stopped) when scheduling.automaticRestart is false
// (https://cloud.google.com/ai-hypercomputer/docs/manage/report-faulty-host);
// the repair's operation is DONE.
func (s *Sim) finishRepairLocked(in *instanceRec, at time.Time) {
	in.repairAt = time.Time{}
	s.endRepairOpLocked(in, at)
	s.newHostLocked(in)
	if ar := in.pb.GetScheduling().AutomaticRestart; ar != nil && !*ar {
		in.pb.Status = strp(statusTerminated)
		in.pb.LastStopTimestamp = strp(formatTime(at))
		return
	}
	in.pb.Status = strp(statusRunning)
	in.pb.LastStartTimestamp = strp(formatTime(at))
	s.hookLocked(s.opts.OnInstanceRunning, in)
}

// endRepairOpLocked marks the VM's running host-repair operation DONE. A
// repair cut short by the VM's deletion or the end of its run also ends
// its operation; Google's docs do not say with which outcome, and the
// simulator reports none.
func (s *Sim) endRepairOpLocked(in *instanceRec, at time.Time) {
	if in.repairOp == "" {
		return
	}
	if op := s.ops[in.repairOp]; op != nil {
		op.Status = computepb.Operation_DONE.Enum()
		op.Progress = i32p(100)
		op.EndTime = strp(formatTime(at))
	}
	in.repairOp = ""
}

// activeRequests counts CREATING and ACCEPTED resize requests of m.
func activeRequests(m *migRec) int {
	n := 0
	for _, rr := range m.rrs {
		if st := rr.pb.GetState(); st == stateCreating || st == stateAccepted {
			n++
		}
	}
	return n
}

// sortedRRs returns m's resize requests ordered by name.
func sortedRRs(m *migRec) []*rrRec {
	keys := slices.Sorted(maps.Keys(m.rrs))
	out := make([]*rrRec, 0, len(keys))
	for _, k := range keys {
		out = append(out, m.rrs[k])
	}
	return out
}
