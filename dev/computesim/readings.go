package computesim

import (
	"fmt"
	"reflect"
	"strings"
)

// Readings chooses how the simulator behaves on each point of Compute Engine
// behaviour that Google's public documents leave open. Each field is one
// switch; docs/compute-contract.md ("Open points") lists both behaviours, the
// source that leaves the point open and what flexslurm does to survive both.
//
// LenientReadings is what the simulator has always done; StrictReadings puts
// every switch on the side that is hardest for flexslurm.
type Readings struct {
	// RefuseTargetSizeWhileAccepted refuses instanceGroupManagers
	// deleteInstances (and resize, abandonInstances and createInstances,
	// which the simulator refuses or does not serve in either position) on
	// a MIG holding an active (CREATING or ACCEPTED) resize request, with a
	// 400. Open: https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig
	// says the target size grows when a request is created and that deleting
	// the MIG waits for its request to succeed, but not whether the target
	// size may change while a request waits; Cluster Toolkit's flex-start code
	// (GoogleCloudPlatform/cluster-toolkit, community/modules/scheduler/
	// schedmd-slurm-gcp-v6-controller/modules/slurm_files/scripts/mig_flex.py)
	// avoids the question with one MIG per job and notes that deleting
	// instances "will not work if MIG didn't obtain capacity yet".
	RefuseTargetSizeWhileAccepted bool
	// RefuseNamedRequestsOnV1 refuses, with a 400, a resize request that
	// names its VMs (instances[]) when it is sent through /compute/v1/;
	// /compute/beta/ accepts it. Open: the v1 discovery document has the
	// field, but https://cloud.google.com/compute/docs/instance-groups/create-resize-requests-mig
	// marks naming the VMs of a request as Preview, and Cluster Toolkit's
	// mig_flex.py sends named requests through the beta API.
	RefuseNamedRequestsOnV1 bool
	// RefuseNamedRequestsOnBeta refuses such a request through
	// /compute/beta/ as well (with RefuseNamedRequestsOnV1: no version
	// names VMs, and only resizeBy requests are accepted). Open: the same
	// Preview mark; a Preview feature may be withdrawn or limited to some
	// projects (https://cloud.google.com/products#product-launch-stages).
	// Not part of StrictReadings: it is settled by configuration
	// (FLEXSLURM_RESIZE_REQUEST_API=count), and the scenario runner
	// configures flexslurm so when both refuse.
	RefuseNamedRequestsOnBeta bool
	// RunEndAudit is how the deletion of a resize-request VM at the end of
	// its run duration is logged: RunEndDeferredDelete (one System Event
	// entry compute.instances.deferredDelete, principal system@google.com)
	// or RunEndMIGDelete (Admin Activity v1.compute.instances.delete
	// entries by PROJECT_NUMBER@cloudservices.gserviceaccount.com, as for
	// any VM its MIG deletes). Open: about-resize-requests-mig says
	// "Compute Engine deletes the Flex-start VMs at the end of their run
	// duration"; https://cloud.google.com/compute/docs/logging/audit-logging
	// names neither entry. Empty (lenient) means Options.ExpiryLogStyle,
	// whose default is RunEndDeferredDelete.
	RunEndAudit string
	// IgnoreLabelFilter makes list calls ignore every comparison on labels
	// in their filter: such a comparison matches every resource, so a list
	// filtered on this cluster's labels returns every VM (or MIG, or
	// template) of the scope. Open: the discovery document's filter
	// parameter describes filtering on fields in general, and gcloud never
	// sends label filters to the server ("server side labels matching is
	// currently problematic", googlecloudsdk/api_lib/compute/filter_rewrite.py).
	IgnoreLabelFilter bool
	// KeepTargetSizeAtRunEnd leaves a MIG's targetSize unchanged when one
	// of its VMs is deleted at the end of its run duration (lenient: the
	// target size drops by one, as for deleteInstances). Open:
	// about-resize-requests-mig says the VMs are deleted at the end of their
	// run duration, not what happens to the MIG's target size.
	KeepTargetSizeAtRunEnd bool
	// RefuseWorkloadPolicyOnFlexStart refuses, with a 400, the insert of a
	// MIG that references a workload policy
	// (resourcePolicies.workloadPolicy) while its instance template's
	// provisioning model is FLEX_START, whatever the machine type (lenient:
	// A4 and A3 Ultra are accepted). Open: the A4/A3 Ultra MIG guide
	// (https://cloud.google.com/ai-hypercomputer/docs/create/create-mig-with-a4-or-a3ultra)
	// says that with a Flex-Start template "You can't apply a workload
	// policy to the MIG", while
	// https://cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy
	// says "For Flex-start: A4 and A3 Ultra" and Cluster Toolkit sends it.
	// The refusal's wording is not published; flexslurm depends only on
	// the HTTP status and on its request having carried the policy.
	RefuseWorkloadPolicyOnFlexStart bool
}

// RunEndAudit values. They equal the ExpiryLogStyle constants.
const (
	RunEndDeferredDelete = ExpiryLogDeferredDelete
	RunEndMIGDelete      = ExpiryLogMIGDelete
)

// LenientReadings is the simulator's behaviour before readings existed, which
// every existing test expects: only resize is refused while a request is
// active, named requests are accepted on v1, run ends are logged as
// Options.ExpiryLogStyle says (deferredDelete by default), label filters
// apply and a run end lowers the target size. It is the zero Readings.
func LenientReadings() Readings {
	return Readings{}
}

// StrictReadings puts every switch on the side hardest for flexslurm.
func StrictReadings() Readings {
	return Readings{
		RefuseTargetSizeWhileAccepted:   true,
		RefuseNamedRequestsOnV1:         true,
		RunEndAudit:                     RunEndMIGDelete,
		IgnoreLabelFilter:               true,
		KeepTargetSizeAtRunEnd:          true,
		RefuseWorkloadPolicyOnFlexStart: true,
	}
}

// String renders r in the form ParseReadings reads: "lenient", "strict", or
// "lenient," followed by the switches that differ from lenient.
func (r Readings) String() string {
	switch r {
	case LenientReadings():
		return "lenient"
	case StrictReadings():
		return "strict"
	}
	words := []string{"lenient"}
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch x := v.Field(i).Interface().(type) {
		case bool:
			if x {
				words = append(words, f.Name)
			}
		case string:
			if x != "" {
				words = append(words, f.Name+"="+x)
			}
		}
	}
	return strings.Join(words, ",")
}

// ReadingNames are the switch names ParseReadings knows, in field order.
func ReadingNames() []string {
	t := reflect.TypeFor[Readings]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = t.Field(i).Name
	}
	return out
}

// ParseReadings reads a comma list: a base, "lenient" or "strict", then
// switches applied in order: NAME turns a bool switch on, -NAME turns it
// off, NAME=VALUE sets it (true/false for bools, deferredDelete/migDelete for
// RunEndAudit). A list that does not start with a base starts from lenient.
// Names are matched without regard to case. Examples: "strict",
// "strict,-IgnoreLabelFilter", "lenient,RefuseNamedRequestsOnV1,RunEndAudit=migDelete".
// The empty string is lenient.
func ParseReadings(s string) (Readings, error) {
	r := LenientReadings()
	for i, word := range strings.Split(s, ",") {
		word = strings.TrimSpace(word)
		switch {
		case word == "" && strings.TrimSpace(s) == "":
			return r, nil
		case word == "":
			return Readings{}, fmt.Errorf("compute readings %q: empty word at position %d", s, i+1)
		case strings.EqualFold(word, "lenient"):
			r = LenientReadings()
			continue
		case strings.EqualFold(word, "strict"):
			r = StrictReadings()
			continue
		}
		name, value, hasValue := strings.Cut(word, "=")
		off := false
		if !hasValue {
			if n, ok := strings.CutPrefix(name, "-"); ok {
				name, off = n, true
			}
		}
		f, ok := readingField(&r, name)
		if !ok {
			return Readings{}, fmt.Errorf("compute readings %q: unknown word %q (want lenient, strict, or one of %s, optionally -NAME or NAME=VALUE)", s, word, strings.Join(ReadingNames(), ", "))
		}
		switch f.Kind() {
		case reflect.Bool:
			switch {
			case !hasValue:
				f.SetBool(!off)
			case strings.EqualFold(value, "true"):
				f.SetBool(true)
			case strings.EqualFold(value, "false"):
				f.SetBool(false)
			default:
				return Readings{}, fmt.Errorf("compute readings %q: %q: %s takes true or false, not %q", s, word, name, value)
			}
		case reflect.String:
			if !hasValue {
				return Readings{}, fmt.Errorf("compute readings %q: %q: %s needs a value: %s=%s or %s=%s", s, word, name, name, RunEndDeferredDelete, name, RunEndMIGDelete)
			}
			switch {
			case strings.EqualFold(value, RunEndDeferredDelete):
				f.SetString(RunEndDeferredDelete)
			case strings.EqualFold(value, RunEndMIGDelete):
				f.SetString(RunEndMIGDelete)
			default:
				return Readings{}, fmt.Errorf("compute readings %q: %q: %s takes %s or %s, not %q", s, word, name, RunEndDeferredDelete, RunEndMIGDelete, value)
			}
		}
	}
	return r, nil
}

func readingField(r *Readings, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		if strings.EqualFold(v.Type().Field(i).Name, name) {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// Readings returns the readings the simulator runs with (RunEndAudit as
// in effect: Options.ExpiryLogStyle when the readings left it empty).
func (s *Sim) Readings() Readings {
	r := s.opts.Readings
	r.RunEndAudit = s.opts.ExpiryLogStyle
	return r
}

// AcceptNamedRequests runs f with resize requests that name their VMs
// accepted on every API version, whatever Readings.RefuseNamedRequestsOnV1
// and RefuseNamedRequestsOnBeta say, then restores them. It is for a
// test's own set-up of VMs of given names (a user's VMs beside
// flexslurm's), never for what flexslurm calls: nothing else may run
// against the simulator meanwhile.
func (s *Sim) AcceptNamedRequests(f func() error) error {
	s.mu.Lock()
	v1, beta := s.opts.Readings.RefuseNamedRequestsOnV1, s.opts.Readings.RefuseNamedRequestsOnBeta
	s.opts.Readings.RefuseNamedRequestsOnV1, s.opts.Readings.RefuseNamedRequestsOnBeta = false, false
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.opts.Readings.RefuseNamedRequestsOnV1, s.opts.Readings.RefuseNamedRequestsOnBeta = v1, beta
		s.mu.Unlock()
	}()
	return f()
}

// ReadingSwitchNames are the names of the on/off switches (the bool fields
// of Readings), in field order.
func ReadingSwitchNames() []string {
	var out []string
	t := reflect.TypeFor[Readings]()
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() == reflect.Bool {
			out = append(out, t.Field(i).Name)
		}
	}
	return out
}

// IsReadingSwitch reports whether name (matched without regard to case)
// is an on/off switch of Readings.
func IsReadingSwitch(name string) bool {
	_, ok := Readings{}.Switch(name)
	return ok
}

// Switch returns the on/off switch name of r (matched without regard to
// case); ok is false when name is no bool field of Readings.
func (r Readings) Switch(name string) (on, ok bool) {
	f, ok := readingField(&r, name)
	if !ok || f.Kind() != reflect.Bool {
		return false, false
	}
	return f.Bool(), true
}
