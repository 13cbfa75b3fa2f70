package computesim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Run-duration limits of the Compute API for scheduling.maxRunDuration and a
// resize request's requestedRunDuration: 600–604800 s (10 min to 7 days;
// https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig).
const (
	MinRunDuration = 600 * time.Second
	MaxRunDuration = 604800 * time.Second
)

func checkRunDuration(field string, d *computepb.Duration) *apiError {
	if d == nil {
		return nil
	}
	if d.GetNanos() < 0 || d.GetNanos() > 999_999_999 {
		return errInvalidField(field+".nanos", strconv.Itoa(int(d.GetNanos())), "Must be between 0 and 999999999.")
	}
	if v := durationOf(d); v < MinRunDuration || v > MaxRunDuration {
		return errInvalidField(field+".seconds", strconv.FormatInt(d.GetSeconds(), 10),
			"Must be between 600 and 604800 seconds, inclusive.")
	}
	return nil
}

func oneOf(v string, allowed ...string) bool { return slices.Contains(allowed, v) }

// checkProperties validates instance template properties the way the API
// does for the fields flexslurm uses.
func checkProperties(p *computepb.InstanceProperties) *apiError {
	if p == nil {
		return errRequired("resource.properties")
	}
	mt := p.GetMachineType()
	switch {
	case mt == "":
		return errRequired("resource.properties.machineType")
	case strings.Contains(mt, "/"):
		return errInvalidField("resource.properties.machineType", mt,
			"Instance templates take a machine type name, not a URL.")
	}
	if aerr := checkLabels("resource.properties.labels", p.GetLabels()); aerr != nil {
		return aerr
	}
	if sc := p.GetScheduling(); sc != nil {
		const f = "resource.properties.scheduling"
		pm, ita, ohm := sc.GetProvisioningModel(), sc.GetInstanceTerminationAction(), sc.GetOnHostMaintenance()
		if pm != "" && !oneOf(pm, "STANDARD", "SPOT", flexStart, "RESERVATION_BOUND") {
			return errInvalidField(f+".provisioningModel", pm, "Unknown provisioning model.")
		}
		if ita != "" && !oneOf(ita, "DELETE", "STOP") {
			return errInvalidField(f+".instanceTerminationAction", ita, "Must be DELETE or STOP.")
		}
		if ohm != "" && !oneOf(ohm, "MIGRATE", "TERMINATE") {
			return errInvalidField(f+".onHostMaintenance", ohm, "Must be MIGRATE or TERMINATE.")
		}
		if aerr := checkRunDuration(f+".maxRunDuration", sc.MaxRunDuration); aerr != nil {
			return aerr
		}
		if sc.MaxRunDuration != nil && ita == "" {
			return errInvalidField(f+".instanceTerminationAction", ita,
				"An instance termination action is required when maxRunDuration is set.")
		}
		if pm == flexStart {
			if !oneOf(ita, "DELETE", "STOP") {
				return errInvalidField(f+".instanceTerminationAction", ita,
					"FLEX_START instances require instanceTerminationAction DELETE or STOP.")
			}
			if ohm != "TERMINATE" {
				return errInvalidField(f+".onHostMaintenance", ohm,
					"FLEX_START instances require onHostMaintenance TERMINATE.")
			}
			if sc.GetPreemptible() {
				return errInvalidField(f+".preemptible", "true", "FLEX_START instances cannot be preemptible.")
			}
		}
	}
	for i, a := range p.GetGuestAccelerators() {
		f := fmt.Sprintf("resource.properties.guestAccelerators[%d]", i)
		if a.GetAcceleratorType() == "" {
			return errRequired(f + ".acceleratorType")
		}
		if strings.Contains(a.GetAcceleratorType(), "/") {
			return errInvalidField(f+".acceleratorType", a.GetAcceleratorType(),
				"Instance templates take an accelerator type name, not a URL.")
		}
		if a.GetAcceleratorCount() <= 0 {
			return errInvalidField(f+".acceleratorCount", strconv.Itoa(int(a.GetAcceleratorCount())), "Must be greater than 0.")
		}
	}
	var accels []accel
	for _, a := range p.GetGuestAccelerators() {
		accels = append(accels, accel{a.GetAcceleratorType(), int(a.GetAcceleratorCount())})
	}
	if aerr := checkGPUs("resource.properties", mt, accels, p.GetScheduling().GetOnHostMaintenance()); aerr != nil {
		return aerr
	}
	seen := map[string]bool{}
	for _, it := range p.GetMetadata().GetItems() {
		switch {
		case it.GetKey() == "":
			return errRequired("resource.properties.metadata.items.key")
		case seen[it.GetKey()]:
			return errInvalidField("resource.properties.metadata.items.key", it.GetKey(), "Duplicate metadata key.")
		}
		seen[it.GetKey()] = true
	}
	boots := 0
	for _, d := range p.GetDisks() {
		if d.GetBoot() {
			boots++
		}
	}
	if boots == 0 {
		return errRequired("resource.properties.disks")
	}
	if boots > 1 {
		return errInvalid("Invalid value for field 'resource.properties.disks': at most one boot disk is allowed.")
	}
	return nil
}

func (s *Sim) templateInsertLocked(req *request) (proto.Message, *apiError) {
	t := &computepb.InstanceTemplate{}
	if aerr := decodeBody(req, t); aerr != nil {
		return nil, aerr
	}
	if aerr := checkName("resource.name", t.GetName()); aerr != nil {
		return nil, aerr
	}
	key := templateKey(req.project, t.GetName())
	if s.templates[key] != nil {
		return nil, errAlreadyExists(key)
	}
	if aerr := checkProperties(t.Properties); aerr != nil {
		return nil, aerr
	}
	if aerr := s.checkBootDisksLocked("resource.properties", req.project, t.Properties.GetDisks()); aerr != nil {
		return nil, aerr
	}
	if e := s.quotaRefusalLocked(req.project, "", QuotaInstanceTemplates); e != nil {
		return s.refusedOpLocked(req, key, e), nil
	}
	t.Kind = strp("compute#instanceTemplate")
	t.Id = u64p(s.newIDLocked())
	t.CreationTimestamp = strp(formatTime(req.now))
	t.SelfLink = strp(link(key))
	t.Region = nil
	s.templates[key] = &templateRec{seq: s.nextSeqLocked(), project: req.project, pb: t}
	return s.newOpLocked(req.project, "", "insert", link(key), t.GetId(), s.callerPrincipal(req.project), req.now), nil
}

func (s *Sim) templateGetLocked(req *request) (proto.Message, *apiError) {
	key := templateKey(req.project, req.name)
	t := s.templates[key]
	if t == nil {
		return nil, errNotFound(key)
	}
	return t.pb, nil
}

func (s *Sim) templateListLocked(req *request) (proto.Message, *apiError) {
	var all []*computepb.InstanceTemplate
	for _, k := range slices.Sorted(maps.Keys(s.templates)) {
		if t := s.templates[k]; t.project == req.project {
			all = append(all, t.pb)
		}
	}
	items, next, aerr := paginate(all, req.query, true)
	if aerr != nil {
		return nil, aerr
	}
	base := "projects/" + req.project + "/global/instanceTemplates"
	out := &computepb.InstanceTemplateList{Kind: strp("compute#instanceTemplateList"), Id: strp(base), SelfLink: strp(link(base)), Items: items}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}

func (s *Sim) templateDeleteLocked(req *request) (proto.Message, *apiError) {
	key := templateKey(req.project, req.name)
	t := s.templates[key]
	if t == nil {
		return nil, errNotFound(key)
	}
	for _, k := range slices.Sorted(maps.Keys(s.migs)) {
		if s.migs[k].templateKey == key {
			return nil, errInUse(key, k)
		}
	}
	delete(s.templates, key)
	return s.newOpLocked(req.project, "", "delete", link(key), t.pb.GetId(), s.callerPrincipal(req.project), req.now), nil
}

// resolveTemplate maps an instanceTemplate reference (full URL,
// projects/P/global/instanceTemplates/T or global/instanceTemplates/T) to its
// key.
func (s *Sim) resolveTemplate(project, field, ref string) (string, *apiError) {
	rel := ref
	if i := strings.Index(rel, "/compute/v1/"); strings.HasPrefix(rel, "http") && i >= 0 {
		rel = rel[i+len("/compute/v1/"):]
	}
	seg := strings.Split(rel, "/")
	switch {
	case len(seg) == 3 && seg[0] == "global" && seg[1] == "instanceTemplates":
		rel = templateKey(project, seg[2])
	case len(seg) == 5 && seg[0] == "projects" && seg[2] == "global" && seg[3] == "instanceTemplates":
	default:
		return "", errInvalidField(field, ref, "The URL is malformed.")
	}
	if s.templates[rel] == nil {
		return "", errNotFound(rel)
	}
	return rel, nil
}
