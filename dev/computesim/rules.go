package computesim

// Rules the Compute v1 discovery document's schemas cannot express but its
// text or Google's documentation states. Each is enforced here, in one place,
// and cites its public source. The schema-level contract (fields, types,
// enums, patterns, required fields, query parameters) is in contract.go.
//
// Other documented rules enforced next to the state they need:
//   - run durations (scheduling.maxRunDuration, requestedRunDuration):
//     600–604800 s — checkRunDuration in templates.go; "Must be from 600 to
//     604800 inclusive" (GoogleCloudPlatform/magic-modules
//     mmv1/products/compute/ResizeRequest.yaml) and "between 10 minutes and
//     seven days" (https://cloud.google.com/ai-hypercomputer/docs/create/create-vm);
//   - requestId: a UUID other than the zero UUID — checkRequestID in
//     errors.go; the requestId parameter's description in the discovery
//     document.

import (
	"fmt"

	"cloud.google.com/go/compute/apiv1/computepb"
)

// checkFilterRules applies the list `filter` rules of the discovery
// document's filter parameter (every list method, e.g. instances.list):
//
//   - "To filter on multiple expressions, provide each separate expression
//     within parentheses", e.g. `(scheduling.automaticRestart = true)
//     (cpuPlatform = "Intel Skylake")`, so several bare expressions,
//     juxtaposed or joined by AND or OR, are rejected;
//   - "Most Compute resources support two types of filter expressions:
//     expressions that support regular expressions and expressions that
//     follow API improvement proposal AIP-160. These two types of filter
//     expressions cannot be mixed in one request", so eq/ne next to =, !=,
//     <, >, <=, >= or : is rejected.
func checkFilterRules(f filterExpr) error {
	var regex, aip bool
	var walk func(e filterExpr) error
	several := func(terms []filterExpr, join string) error {
		for i, t := range terms {
			inner := t
			if n, ok := inner.(notExpr); ok {
				inner = n.e
			}
			if _, ok := inner.(groupExpr); !ok && len(terms) > 1 {
				return fmt.Errorf("expression %d of %d joined by %s is not in parentheses; to filter on multiple expressions, provide each separate expression within parentheses", i+1, len(terms), join)
			}
			if err := walk(t); err != nil {
				return err
			}
		}
		return nil
	}
	walk = func(e filterExpr) error {
		switch x := e.(type) {
		case andExpr:
			return several(x, "AND")
		case orExpr:
			return several(x, "OR")
		case notExpr:
			return walk(x.e)
		case groupExpr:
			return walk(x.e)
		case cmpExpr:
			if x.re != nil {
				regex = true
			} else {
				aip = true
			}
		}
		return nil
	}
	if f == nil {
		return nil
	}
	if err := walk(f); err != nil {
		return err
	}
	if regex && aip {
		return fmt.Errorf("regular-expression (eq, ne) and AIP-160 (=, !=, <, >, <=, >=, :) expressions cannot be mixed in one request")
	}
	return nil
}

// checkResizeRequestShape applies the instanceGroupManagerResizeRequests
// rules on the resource: resizeBy and instances are exclusive and one is
// needed ("This field cannot be used together with 'instances'" /
// "… with 'resize_by'", InstanceGroupManagerResizeRequest in the discovery
// document), resizeBy is positive, instance names are RFC 1035 and unique
// (PerInstanceConfig.name), and one request creates at most
// maxResizeRequestVMs VMs. It returns the VM count and the names.
func checkResizeRequestShape(rr *computepb.InstanceGroupManagerResizeRequest) (int, []string, *apiError) {
	hasBy, hasInstances := rr.ResizeBy != nil && rr.GetResizeBy() != 0, len(rr.GetInstances()) > 0
	switch {
	case hasBy && hasInstances:
		return 0, nil, errInvalid("Invalid value for field 'resource': fields 'resizeBy' and 'instances' are mutually exclusive.")
	case !hasBy && !hasInstances:
		return 0, nil, errInvalid("Invalid value for field 'resource': exactly one of 'resizeBy' (greater than 0) or 'instances' must be specified.")
	case hasBy && rr.GetResizeBy() < 0:
		return 0, nil, errInvalidField("resource.resizeBy", fmt.Sprint(rr.GetResizeBy()), "Must be greater than 0.")
	}
	count := int(rr.GetResizeBy())
	var names []string
	if hasInstances {
		seen := map[string]bool{}
		for i, pic := range rr.GetInstances() {
			f := fmt.Sprintf("resource.instances[%d].name", i)
			if aerr := checkName(f, pic.GetName()); aerr != nil {
				return 0, nil, aerr
			}
			if seen[pic.GetName()] {
				return 0, nil, errInvalidField(f, pic.GetName(), "Duplicate instance name.")
			}
			seen[pic.GetName()] = true
			names = append(names, pic.GetName())
		}
		count = len(names)
	}
	if count > maxResizeRequestVMs {
		return 0, nil, errInvalid("A resize request may create at most %d instances; %d requested.", maxResizeRequestVMs, count)
	}
	if aerr := checkRunDuration("resource.requestedRunDuration", rr.RequestedRunDuration); aerr != nil {
		return 0, nil, aerr
	}
	return count, names, nil
}

// checkResizeRequestMIG: "To create a resize request in a MIG, you must not
// configure autoscaling and must turn off repairs"
// (https://cloud.google.com/compute/docs/instance-groups/create-mig-with-gpu-vms),
// i.e. instanceLifecyclePolicy.defaultActionOnFailure DO_NOTHING.
func checkResizeRequestMIG(m *migRec) *apiError {
	if a := m.pb.GetInstanceLifecyclePolicy().GetDefaultActionOnFailure(); a != doNothing {
		return errInvalid("Resize requests require managed instance group '%s' to have instanceLifecyclePolicy.defaultActionOnFailure set to DO_NOTHING (repairs off); it is %s.", m.name, a)
	}
	return nil
}

// checkResizeRequestCancel: "Cancel is only possible for requests that are
// accepted in the queue" (instanceGroupManagerResizeRequests.cancel in the
// discovery document), i.e. state ACCEPTED.
func checkResizeRequestCancel(m *migRec, rr *rrRec) *apiError {
	if st := rr.pb.GetState(); st != stateAccepted {
		return errInvalid("The resize request '%s' is in state %s; only ACCEPTED resize requests can be cancelled.", rrKey(m, rr.pb.GetName()), st)
	}
	return nil
}

// checkResizeRequestDelete: "Deletes the specified, inactive resize request.
// Requests that are still active cannot be deleted."
// (instanceGroupManagerResizeRequests.delete in the discovery document):
// CREATING and ACCEPTED requests must be cancelled first.
func checkResizeRequestDelete(m *migRec, rr *rrRec) *apiError {
	if st := rr.pb.GetState(); st == stateCreating || st == stateAccepted {
		return errInvalid("The resize request '%s' is in state %s; only inactive (SUCCEEDED, FAILED or CANCELLED) resize requests can be deleted. Cancel it first.", rrKey(m, rr.pb.GetName()), st)
	}
	return nil
}

// What a MIG with active (CREATING or ACCEPTED) resize requests refuses.
// The evidence and flexslurm's decision are in docs/design/compute.md, "One MIG per
// resize request"; in short:
//
//   - instanceGroupManagers.delete while the MIG creates VMs for a request:
//     "Compute Engine waits until the MIG has finished creating the
//     requested number of VMs and the state of the resize request
//     transitions to SUCCEEDED before deleting the MIG"
//     (https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig).
//     The simulator creates a request's VMs in one instant when capacity
//     comes, so there is no creating window to wait for; a queued request
//     is removed with its MIG, as the same page says ("this deletion also
//     removes any resize requests and VMs in the MIG"). flexslurm deletes a
//     pool's MIG only once no request is active.
//   - instanceGroupManagers.resize: on CREATING "the MIG's target size
//     increases by the number of VMs specified in the request" (same page),
//     and summaries of that page say the target size cannot be changed
//     while a request is ACCEPTED. No Google page read says so in those
//     words, so the simulator takes the stricter reading and refuses
//     (checkResizeWithQueuedRequests); flexslurm never calls resize.
//   - instanceGroupManagers.deleteInstances of VMs that run, while another
//     request is ACCEPTED: no Google source read states a refusal, and
//     Cluster Toolkit's flex-start code (GoogleCloudPlatform/cluster-toolkit,
//     slurm_files/scripts/mig_flex.py) deletes provisioned VMs with it. Its
//     comment that deleting instances "will not work if MIG didn't obtain
//     capacity yet" concerns the request's own VMs, which flexslurm never
//     deletes (it cancels the request instead). The simulator accepts it
//     by default and refuses it under Readings.RefuseTargetSizeWhileAccepted
//     (checkTargetSizeWithQueuedRequests);
//     scenarios/release-refused-while-another-request-queued.yaml injects
//     the refusal to show that flexslurm fails safe if Compute refuses.
//   - instanceGroupManagers.setInstanceTemplate: no refusal documented, so
//     the simulator accepts it with requests queued. It creates every VM
//     from the MIG's template at the time it creates it, so a request
//     queued before a template change gets the new one. Which template
//     Compute uses for such a request is not documented either; flexslurm
//     does not depend on it (a VM of an older template ends by its expiry).

// checkResizeWithQueuedRequests refuses resize on a MIG with an active
// resize request (the stricter reading above).
func checkResizeWithQueuedRequests(m *migRec) *apiError {
	if activeRequests(m) > 0 {
		return errInvalid("The target size of managed instance group '%s' cannot be changed while it has active resize requests.", m.name)
	}
	return nil
}

// checkTargetSizeWithQueuedRequests refuses deleteInstances on a MIG with an
// active (CREATING or ACCEPTED) resize request, under
// Readings.RefuseTargetSizeWhileAccepted (readings.go gives the sources that
// leave this open). Compute's wording for the refusal, if it refuses, is not
// published: the message is the simulator's own, in Compute's error shape
// (HTTP 400, errors[].reason "invalid").
func checkTargetSizeWithQueuedRequests(m *migRec) *apiError {
	if n := activeRequests(m); n > 0 {
		return errInvalid("The target size of managed instance group '%s' cannot be changed (deleteInstances) while it has %d active resize request(s); wait for them to finish or cancel them.", m.name, n)
	}
	return nil
}

// checkNamedRequestAPI refuses a resize request that names its VMs
// (instances[]) sent through /compute/v1/, under
// Readings.RefuseNamedRequestsOnV1, or through /compute/beta/, under
// Readings.RefuseNamedRequestsOnBeta (readings.go gives the sources). The
// wording of such a refusal is not published; the message is the
// simulator's own, in Compute's error shape (HTTP 400, errors[].reason
// "invalid"), and names the field.
func checkNamedRequestAPI(req *request, names []string, r Readings) *apiError {
	if len(names) == 0 {
		return nil
	}
	if req.api == "v1" && r.RefuseNamedRequestsOnV1 {
		return errInvalid("Invalid value for field 'resource.instances': naming the instances of a resize request is not available in the v1 API; use the beta API or resizeBy.")
	}
	if req.api == "beta" && r.RefuseNamedRequestsOnBeta {
		return errInvalid("Invalid value for field 'resource.instances': naming the instances of a resize request is not available for this project; use resizeBy.")
	}
	return nil
}
