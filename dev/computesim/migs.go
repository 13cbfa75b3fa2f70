package computesim

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// baseInstanceName is the API's pattern for a MIG's base instance name
// without the "#" placeholder form: 1–58 characters.
var baseInstanceName = regexp.MustCompile(`^[a-z][-a-z0-9]{0,57}$`)

// maxDeducedBaseInstanceName is how much of a MIG's name becomes its base
// instance name when the insert gives none.
const maxDeducedBaseInstanceName = 54

// deducedBaseInstanceName is the base instance name of a MIG inserted
// without one: a prefix of its name. Compute accepts such a MIG: the gcloud
// CLI sends baseInstanceName only when --base-instance-name is given, whose
// help says "If not provided base instance name will be the prefix of
// instance group name" (googlecloudsdk surface/compute/instance_groups/
// managed/create.py, which also defines
// _MAX_LEN_FOR_DEDUCED_BASE_INSTANCE_NAME = 54).
func deducedBaseInstanceName(migName string) string {
	if len(migName) > maxDeducedBaseInstanceName {
		return migName[:maxDeducedBaseInstanceName]
	}
	return migName
}

func (s *Sim) migInsertLocked(req *request) (proto.Message, *apiError) {
	m := &computepb.InstanceGroupManager{}
	if aerr := decodeBody(req, m); aerr != nil {
		return nil, aerr
	}
	if aerr := checkName("resource.name", m.GetName()); aerr != nil {
		return nil, aerr
	}
	key := migKey(req.project, req.zone, m.GetName())
	if s.migs[key] != nil {
		return nil, errAlreadyExists(key)
	}
	if m.GetBaseInstanceName() == "" {
		m.BaseInstanceName = strp(deducedBaseInstanceName(m.GetName()))
	}
	switch base := m.GetBaseInstanceName(); {
	case !baseInstanceName.MatchString(base):
		return nil, errInvalidField("resource.baseInstanceName", base, "Must be a match of regex '[a-z][-a-z0-9]{0,57}'")
	}
	ref, field := m.GetInstanceTemplate(), "resource.instanceTemplate"
	if ref == "" && len(m.GetVersions()) > 0 {
		ref, field = m.GetVersions()[0].GetInstanceTemplate(), "resource.versions[0].instanceTemplate"
	}
	if ref == "" {
		return nil, errRequired("resource.instanceTemplate")
	}
	tkey, aerr := s.resolveTemplate(req.project, field, ref)
	if aerr != nil {
		return nil, aerr
	}
	zones, aerr := checkDistributionPolicy(req.project, req.zone, m)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := s.checkMIGWorkloadPolicyLocked(req, m, tkey); aerr != nil {
		return nil, aerr
	}
	if m.GetTargetSize() < 0 {
		return nil, errInvalidField("resource.targetSize", strconv.Itoa(int(m.GetTargetSize())), "Must be greater than or equal to 0.")
	}
	if m.InstanceLifecyclePolicy == nil {
		m.InstanceLifecyclePolicy = &computepb.InstanceGroupManagerInstanceLifecyclePolicy{}
	}
	// The value, if any, is REPAIR or DO_NOTHING (the contract's enum).
	if m.InstanceLifecyclePolicy.GetDefaultActionOnFailure() == "" {
		// The API's default: failed VMs are repaired (recreated).
		m.InstanceLifecyclePolicy.DefaultActionOnFailure = strp(repair)
	}
	if m.ListManagedInstancesResults == nil {
		m.ListManagedInstancesResults = strp("PAGELESS")
	}
	if e := s.quotaRefusalLocked(req.project, regionOf(req.zone), QuotaInstanceGroupManagers); e != nil {
		return s.refusedOpLocked(req, key, e), nil
	}
	self := link(key)
	m.Kind = strp("compute#instanceGroupManager")
	m.Id = u64p(s.newIDLocked())
	m.CreationTimestamp = strp(formatTime(req.now))
	m.Zone, m.Region = strp(zoneLink(req.project, req.zone)), nil
	if isRegionName(req.zone) {
		m.Zone, m.Region = nil, strp(regionLink(req.project, req.zone))
	}
	m.SelfLink = strp(self)
	m.InstanceGroup = strp(link("projects/" + req.project + "/" + scopeOf(req.zone) + "/instanceGroups/" + m.GetName()))
	m.Fingerprint = strp(s.hexLocked(16))
	m.InstanceTemplate = strp(link(tkey))
	m.Versions = []*computepb.InstanceGroupManagerVersion{{InstanceTemplate: strp(link(tkey))}}
	size := m.GetTargetSize()
	m.TargetSize = i32p(size)
	rec := &migRec{seq: s.nextSeqLocked(), project: req.project, zone: req.zone, name: m.GetName(), pb: m, templateKey: tkey, rrs: map[string]*rrRec{}, zones: zones}
	if len(zones) > 0 {
		rec.place = zones[0]
	}
	if ref := m.GetResourcePolicies().GetWorkloadPolicy(); ref != "" {
		_, region, name, _ := parsePolicyRef(req.project, ref)
		rec.policyKey = policyKey(req.project, region, name)
	}
	s.migs[key] = rec
	run := s.templateRunDurationLocked(rec)
	for range size {
		s.createInstanceLocked(rec, s.generateInstanceNameLocked(rec), "", run, req.now)
	}
	return s.newOpLocked(req.project, req.zone, "insert", self, m.GetId(), s.callerPrincipal(req.project), req.now), nil
}

// migViewLocked is the MIG resource with its output-only status fields
// computed from the current VMs.
func (s *Sim) migViewLocked(m *migRec) *computepb.InstanceGroupManager {
	v := proto.CloneOf(m.pb)
	var none, deleting, other int32
	for _, in := range s.instances { // the members (migMembersLocked), in any order
		if in.project != m.project || in.migLoc != m.zone || in.mig != m.name {
			continue
		}
		switch {
		case !in.deleteAt.IsZero():
			deleting++
		case in.pb.GetStatus() == statusRunning:
			none++
		default:
			other++
		}
	}
	z := int32(0)
	v.CurrentActions = &computepb.InstanceGroupManagerActionsSummary{
		None: i32p(none + other), Deleting: i32p(deleting),
		Abandoning: &z, Creating: &z, CreatingWithoutRetries: &z, Recreating: &z, Refreshing: &z,
		Restarting: &z, Resuming: &z, Starting: &z, Stopping: &z, Suspending: &z, Verifying: &z,
	}
	v.Status = &computepb.InstanceGroupManagerStatus{IsStable: boolp(deleting == 0 && other == 0)}
	return v
}

func (s *Sim) migLocked(req *request) (*migRec, *apiError) {
	key := migKey(req.project, req.zone, req.name)
	m := s.migs[key]
	if m == nil {
		return nil, errNotFound(key)
	}
	return m, nil
}

func (s *Sim) migGetLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	return s.migViewLocked(m), nil
}

func (s *Sim) migListLocked(req *request) (proto.Message, *apiError) {
	// In key order, as the zone's keys differ in the name only.
	var recs []*migRec
	for _, m := range s.migs {
		if m.project == req.project && m.zone == req.zone {
			recs = append(recs, m)
		}
	}
	slices.SortFunc(recs, func(a, b *migRec) int { return strings.Compare(a.name, b.name) })
	// A filter that names neither of the fields a view computes
	// (currentActions, status) keeps the same MIGs whether it looks at
	// their views or at the stored resources, which differ only there:
	// then only the MIGs it keeps are given views.
	lf := listFilterOfQuery(req.query)
	viewsFirst := lf.err == nil && (lf.only == nil || lf.only["currentActions"] || lf.only["status"])
	all := make([]*computepb.InstanceGroupManager, len(recs))
	byPB := make(map[*computepb.InstanceGroupManager]*migRec, len(recs))
	for i, m := range recs {
		if viewsFirst {
			all[i] = s.migViewLocked(m)
		} else {
			all[i] = m.pb
			byPB[m.pb] = m
		}
	}
	items, next, aerr := paginate(all, req.query, true)
	if aerr != nil {
		return nil, aerr
	}
	if !viewsFirst {
		for i, pb := range items {
			items[i] = s.migViewLocked(byPB[pb])
		}
	}
	base := "projects/" + req.project + "/" + scopeOf(req.zone) + "/instanceGroupManagers"
	out := &computepb.InstanceGroupManagerList{Kind: strp("compute#instanceGroupManagerList"), Id: strp(base), SelfLink: strp(link(base)), Items: items}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}

// migDeleteLocked deletes a MIG, its resize requests and its VMs (the VMs go
// through STOPPING like any MIG-driven deletion).
func (s *Sim) migDeleteLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	for _, in := range s.migMembersLocked(m) {
		if in.deleteAt.IsZero() {
			s.beginDeleteLocked(in, req.now, causeMIG, s.cloudServicesPrincipal(), false)
		}
	}
	// Its resize requests go with it ("this deletion also removes any
	// resize requests and VMs in the MIG", about-resize-requests-mig); the
	// history keeps them in the state they were in.
	for _, rr := range m.rrs {
		s.deletedRRs = append(s.deletedRRs, rr)
	}
	delete(s.migs, migKey(m.project, m.zone, m.name))
	return s.newOpLocked(req.project, req.zone, "delete", m.pb.GetSelfLink(), m.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}

// migListManagedLocked serves listManagedInstances. As in the API, paging
// parameters are honoured only when the MIG's listManagedInstancesResults is
// PAGINATED; by default (PAGELESS) every instance is returned.
func (s *Sim) migListManagedLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	var all []*computepb.ManagedInstance
	for _, in := range s.migMembersLocked(m) {
		mi := &computepb.ManagedInstance{
			Instance:       in.pb.SelfLink,
			Id:             in.pb.Id,
			Name:           in.pb.Name,
			InstanceStatus: in.pb.Status,
			CurrentAction:  strp(actionNone),
			Version:        &computepb.ManagedInstanceVersion{InstanceTemplate: m.pb.InstanceTemplate},
		}
		if !in.deleteAt.IsZero() {
			mi.CurrentAction = strp(actionDeleting)
		}
		if !in.termination.IsZero() {
			mi.Scheduling = &computepb.ManagedInstanceScheduling{TerminationTimestamp: strp(formatTime(in.termination))}
		}
		all = append(all, mi)
	}
	items, next, aerr := paginate(all, req.query, m.pb.GetListManagedInstancesResults() == "PAGINATED")
	if aerr != nil {
		return nil, aerr
	}
	out := &computepb.InstanceGroupManagersListManagedInstancesResponse{ManagedInstances: items}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}

// parseInstanceRef reads an instance URL: full, projects/P/zones/Z/instances/N
// or zones/Z/instances/N. project is "" for the last form.
func parseInstanceRef(ref string) (project, zone, name string, ok bool) {
	rel := ref
	if i := strings.Index(rel, "/compute/v1/"); strings.HasPrefix(rel, "http") && i >= 0 {
		rel = rel[i+len("/compute/v1/"):]
	}
	seg := strings.Split(rel, "/")
	switch {
	case len(seg) == 6 && seg[0] == "projects" && seg[2] == "zones" && seg[4] == "instances":
		project, zone, name = seg[1], seg[3], seg[5]
	case len(seg) == 4 && seg[0] == "zones" && seg[2] == "instances":
		zone, name = seg[1], seg[3]
	default:
		return "", "", "", false
	}
	return project, zone, name, rfc1035.MatchString(name) && zoneName.MatchString(zone)
}

// migDeleteInstancesLocked serves deleteInstances. As documented for the API,
// a malformed URL or an instance in another zone always fails the call;
// instances that are not members or are already being deleted fail it
// unless skipInstancesOnValidationError is true, in which case they are
// skipped. Deleted VMs shrink the target size.
func (s *Sim) migDeleteInstancesLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	body := &computepb.InstanceGroupManagersDeleteInstancesRequest{}
	if aerr := decodeBody(req, body); aerr != nil {
		return nil, aerr
	}
	if len(body.GetInstances()) == 0 {
		return nil, errRequired("instances")
	}
	skip := body.GetSkipInstancesOnValidationError()
	var targets []*instanceRec
	seen := map[*instanceRec]bool{}
	for _, ref := range body.GetInstances() {
		p, z, n, ok := parseInstanceRef(ref)
		if !ok {
			return nil, errInvalidField("instances", ref, "The URL is malformed.")
		}
		if p == "" {
			p = req.project
		}
		if p != req.project || !slices.Contains(placementZones(m), z) {
			return nil, errInvalidField("instances", ref, fmt.Sprintf("The instance is not in a zone of the managed instance group (%s).", strings.Join(placementZones(m), ", ")))
		}
		in := s.instances[instanceKey(p, z, n)]
		if in == nil || in.mig != m.name || !in.deleteAt.IsZero() {
			if skip {
				continue
			}
			return nil, errInvalidField("instances", ref, fmt.Sprintf(
				"The instance is not a member of the managed instance group '%s' or is already being deleted.", m.name))
		}
		if !seen[in] {
			seen[in] = true
			targets = append(targets, in)
		}
	}
	if s.opts.Readings.RefuseTargetSizeWhileAccepted {
		if aerr := checkTargetSizeWithQueuedRequests(m); aerr != nil {
			return nil, aerr
		}
	}
	for _, in := range targets {
		s.beginDeleteLocked(in, req.now, causeMIG, s.cloudServicesPrincipal(), true)
	}
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), m.pb.GetSelfLink(), m.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}

// migResizeLocked serves resize?size=N: VMs are created RUNNING at once from
// the template, or the newest are deleted. While a resize request is active
// the target size cannot be changed (checkResizeWithQueuedRequests).
func (s *Sim) migResizeLocked(req *request) (proto.Message, *apiError) {
	m, aerr := s.migLocked(req)
	if aerr != nil {
		return nil, aerr
	}
	raw := req.query.Get("size")
	if raw == "" {
		return nil, errRequired("size")
	}
	size, err := strconv.Atoi(raw)
	if err != nil || size < 0 {
		return nil, errInvalidField("size", raw, "Must be an integer greater than or equal to 0.")
	}
	if aerr := checkResizeWithQueuedRequests(m); aerr != nil {
		return nil, aerr
	}
	var live []*instanceRec
	for _, in := range s.migMembersLocked(m) {
		if in.deleteAt.IsZero() {
			live = append(live, in)
		}
	}
	switch delta := size - len(live); {
	case delta > 0:
		run := s.templateRunDurationLocked(m)
		for range delta {
			s.createInstanceLocked(m, s.generateInstanceNameLocked(m), "", run, req.now)
		}
	case delta < 0:
		slices.SortFunc(live, func(a, b *instanceRec) int { return cmpSeq(b.seq, a.seq) })
		for _, in := range live[:-delta] {
			s.beginDeleteLocked(in, req.now, causeMIG, s.cloudServicesPrincipal(), false)
		}
	}
	m.pb.TargetSize = i32p(int32(size))
	return s.newOpLocked(req.project, req.zone, opTypeOf(req.method), m.pb.GetSelfLink(), m.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}
