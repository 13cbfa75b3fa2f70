package plan

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/flexslurm/flexslurm/shared/naming"
)

// Teardown decisions: what `flexslurm teardown` removes for one cluster, in
// which order, and what it must leave and report. Only what is provably the
// cluster's is touched:
//
//   - a VM is the cluster's if it carries both labels managed-by=flexslurm
//     and flexslurm-cluster=C (shared/naming; the templates put them on every
//     VM);
//   - an instance template is the cluster's if its properties.labels (the
//     labels it gives its VMs; templates have no labels of their own in the
//     Compute v1 API) carry those two labels;
//   - a MIG (no labels in v1 either) is the cluster's if every instance
//     template it references is one of the cluster's templates and, when it
//     looks like a request MIG of the cluster (the one-MIG-per-request
//     layout: a name of naming.RequestMIG's shape, or a description that
//     names the cluster), its name is naming.RequestMIG of the request,
//     pool and cluster its description names (naming.IsRequestMIG). The
//     legacy pool MIG (naming.MIG of its templates' pool) needs no
//     description.
//
// Names are never enough on their own: another tool may use the same
// prefixes.

// clusterIDRE is shared/spec's rule for cluster ids.
var clusterIDRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,9}$`)

// CheckTeardownCluster validates a cluster id given to the teardown.
func CheckTeardownCluster(cluster string) error {
	if !clusterIDRE.MatchString(cluster) {
		return fmt.Errorf("cluster %q: want a cluster id of 1–10 characters [a-z][a-z0-9]* (the spec's rule)", cluster)
	}
	return nil
}

// TeardownTemplate is a global instance template.
type TeardownTemplate struct {
	// Name is the template name; Path is
	// "projects/P/global/instanceTemplates/NAME".
	Name, Path string
	// Labels are properties.labels.
	Labels map[string]string
}

// TeardownMIG is a managed instance group.
type TeardownMIG struct {
	// Zone is set for a zonal MIG, Region for a regional one.
	Zone, Region string
	// Name is the MIG name.
	Name string
	// Templates are the relative paths of the templates it references.
	Templates []string
	// Description is the MIG's description (a request MIG's names its
	// request, pool and cluster).
	Description string
}

// Location is the MIG's zone, or a regional MIG's region: what the
// gce.Client calls on a MIG take (docs/design/zones.md).
func (m TeardownMIG) Location() string {
	if m.Region != "" {
		return m.Region
	}
	return m.Zone
}

// Scope is "zones/Z" or "regions/R".
func (m TeardownMIG) Scope() string {
	if m.Region != "" {
		return "regions/" + m.Region
	}
	return "zones/" + m.Zone
}

// TeardownResizeRequest is a resize request of a zonal MIG.
type TeardownResizeRequest struct {
	// Zone, MIG and Name identify the request.
	Zone, MIG, Name string
	// State is CREATING, ACCEPTED, SUCCEEDED, FAILED or CANCELLED.
	State string
}

// TeardownVM is a VM.
type TeardownVM struct {
	// Zone and Name identify the VM; ID tells a VM from a later one of the
	// same name.
	Zone, Name string
	ID         uint64
	// Status is the Compute status (RUNNING, STOPPING, ...).
	Status string
	// Labels are the VM's labels.
	Labels map[string]string
	// MIG is the owning MIG (created-by metadata), "" for none.
	MIG string
}

// TeardownInventory is what Compute holds that bears on one cluster: every
// global template, every MIG, the resize requests of the MIGs
// TeardownOwnedMIGs selects, and the VMs labelled as the cluster's.
type TeardownInventory struct {
	Templates      []TeardownTemplate
	MIGs           []TeardownMIG
	ResizeRequests []TeardownResizeRequest
	VMs            []TeardownVM
	// Policies are the project's resource policies (workload policies of
	// pools with compact placement among them).
	Policies []TeardownPolicy
	// Unreachable lists scopes Compute could not list: what they hold is
	// unknown.
	Unreachable []string
}

// TeardownItem is one resource in a plan or a report.
type TeardownItem struct {
	// Kind is "resize request", "MIG", "VM" or "instance template".
	Kind string
	// Scope is "zones/Z", "regions/R" or "global"; for a resize request,
	// "zones/Z/instanceGroupManagers/MIG".
	Scope string
	// Name is the resource name.
	Name string
	// Note says why it is left, or what happens to it.
	Note string
}

func (i TeardownItem) String() string {
	s := fmt.Sprintf("%s %s/%s", i.Kind, i.Scope, i.Name)
	if i.Note != "" {
		s += ": " + i.Note
	}
	return s
}

// Kinds of TeardownItem.
const (
	KindResizeRequest = "resize request"
	KindMIG           = "MIG"
	KindVM            = "VM"
	KindTemplate      = "instance template"
	KindPolicy        = "workload policy"
)

// TeardownPolicy is a resource policy as listed.
type TeardownPolicy struct {
	Region, Name, Description string
}

// clusterPolicy reports whether a resource policy is a workload policy of
// one of the cluster's pools: its description names the pool and cluster
// and its name is naming.WorkloadPolicy's for them (resource policies
// carry no labels).
func clusterPolicy(cluster string, rp TeardownPolicy) bool {
	c, pool, ok := naming.ParseWorkloadPolicyDescription(rp.Description)
	if !ok || c != cluster {
		return false
	}
	_, ok = naming.IsWorkloadPolicy(cluster, pool, rp.Name, rp.Description)
	return ok
}

// TeardownPlan is what to remove, step by step, and what to leave.
type TeardownPlan struct {
	// ResizeRequests are the cluster's MIGs' requests: ACCEPTED ones are
	// cancelled, CREATING ones waited for until they can be, and every one
	// deleted once inactive (TeardownResizeRequestStep). First, so that no
	// queued request creates VMs while the rest goes.
	ResizeRequests []TeardownResizeRequest
	// MIGs are deleted next; deleting a MIG deletes its VMs (MIGVMs).
	MIGs []TeardownMIG
	// MIGVMs are the cluster's VMs that go with their MIG.
	MIGVMs []TeardownVM
	// VMs are the cluster's VMs in no MIG of the cluster (standalone, or
	// their MIG is gone), deleted one by one after the MIGs.
	VMs []TeardownVM
	// Templates are deleted last, once no MIG of the cluster uses them.
	Templates []TeardownTemplate
	// Policies are the pools' workload policies, deleted with the
	// templates, once no MIG of the cluster references them.
	Policies []TeardownPolicy
	// Left are the cluster's resources the teardown does not remove, each
	// with the reason.
	Left []TeardownItem
}

// Empty reports whether the plan removes nothing and leaves nothing.
func (p TeardownPlan) Empty() bool {
	return len(p.ResizeRequests) == 0 && len(p.MIGs) == 0 && len(p.MIGVMs) == 0 &&
		len(p.VMs) == 0 && len(p.Templates) == 0 && len(p.Policies) == 0 && len(p.Left) == 0
}

// ClusterLabelled reports whether labels carry managed-by=flexslurm and
// flexslurm-cluster=cluster.
func ClusterLabelled(cluster string, labels map[string]string) bool {
	return labels[naming.LabelManagedBy] == naming.ManagedBy && labels[naming.LabelCluster] == cluster
}

// TeardownClusterLabels are the labels that select a cluster's VMs.
func TeardownClusterLabels(cluster string) map[string]string {
	return map[string]string{naming.LabelManagedBy: naming.ManagedBy, naming.LabelCluster: cluster}
}

// clusterTemplates returns the paths of the cluster's templates.
func clusterTemplates(cluster string, tpls []TeardownTemplate) map[string]bool {
	out := map[string]bool{}
	for _, t := range tpls {
		if ClusterLabelled(cluster, t.Labels) {
			out[t.Path] = true
		}
	}
	return out
}

// requestMIGSuffix is the end of every naming.RequestMIG name.
var requestMIGSuffix = regexp.MustCompile(`-r[0-9a-f]{10}$`)

// requestMIGDoubt says why MIG m, all of whose templates are the
// cluster's (pools: their flexslurm-pool labels), is not provably the
// cluster's, or "" when it is: the legacy pool MIG of one of those pools
// is; a MIG that looks like a request MIG of the cluster (a name of
// naming.RequestMIG's shape under the cluster's prefix, or a description
// naming the cluster) is only when naming.IsRequestMIG proves it from its
// name and description; any other MIG is, by its templates, as before the
// request-MIG layout.
func requestMIGDoubt(cluster string, m TeardownMIG, pools map[string]bool) string {
	for p := range pools {
		if m.Name == naming.MIG(cluster, p) {
			return ""
		}
	}
	dc, dp, dr, described := naming.ParseRequestMIGDescription(m.Description)
	shaped := strings.HasPrefix(m.Name, "fs-"+cluster+"-") && requestMIGSuffix.MatchString(m.Name)
	if !shaped && !(described && dc == cluster) {
		return ""
	}
	if _, ok := naming.IsRequestMIG(cluster, dp, m.Name, m.Description); ok && described {
		return ""
	}
	switch {
	case !described:
		return fmt.Sprintf("named like a request MIG of cluster %s, but its description %q names no request: not deleted; delete it yourself if it is the cluster's", cluster, m.Description)
	case dc != cluster:
		return fmt.Sprintf("named like a request MIG of cluster %s, but its description names cluster %s: not deleted; delete it yourself if it is the cluster's", cluster, dc)
	default:
		return fmt.Sprintf("its description names request %s of pool %s, whose MIG is %s, not %s: not deleted; delete it yourself if it is the cluster's",
			dr, dp, naming.RequestMIG(dc, dp, dr), m.Name)
	}
}

// TeardownOwnedMIGs splits the MIGs into the cluster's zonal MIGs, which the
// teardown deletes (with their resize requests and VMs), and items for
// MIGs that touch the cluster's templates but are not provably its own or
// are regional (flexslurm creates only zonal MIGs; the teardown does not
// delete regional ones).
func TeardownOwnedMIGs(cluster string, tpls []TeardownTemplate, migs []TeardownMIG) (owned []TeardownMIG, left []TeardownItem) {
	ours := clusterTemplates(cluster, tpls)
	poolOf := map[string]string{}
	for _, t := range tpls {
		poolOf[t.Path] = t.Labels[naming.LabelPool]
	}
	for _, m := range migs {
		var mine, foreign []string
		pools := map[string]bool{}
		for _, t := range m.Templates {
			if ours[t] {
				mine = append(mine, t)
				if p := poolOf[t]; p != "" {
					pools[p] = true
				}
			} else {
				foreign = append(foreign, t)
			}
		}
		var whyNot string
		if len(mine) > 0 && len(foreign) == 0 && m.Region == "" {
			whyNot = requestMIGDoubt(cluster, m, pools)
		}
		switch {
		case len(mine) == 0:
			// Not the cluster's: not even mentioned, whatever its name
			// or description says.
		case whyNot != "":
			left = append(left, TeardownItem{Kind: KindMIG, Scope: m.Scope(), Name: m.Name,
				Note: "uses only the cluster's templates, but " + whyNot})
		case len(foreign) > 0:
			left = append(left, TeardownItem{Kind: KindMIG, Scope: m.Scope(), Name: m.Name,
				Note: fmt.Sprintf("uses the cluster's template %s but also %s, which is not the cluster's: not deleted; delete it yourself if it is the cluster's",
					strings.Join(mine, ", "), strings.Join(foreign, ", "))})
		case m.Region != "":
			left = append(left, TeardownItem{Kind: KindMIG, Scope: m.Scope(), Name: m.Name,
				Note: "a regional MIG using the cluster's templates; flexslurm creates only zonal MIGs, so it is not deleted: " +
					"gcloud compute instance-groups managed delete " + m.Name + " --region " + m.Region})
		default:
			owned = append(owned, m)
		}
	}
	return owned, left
}

// PlanTeardown decides what to remove for cluster from the inventory, and
// in which order: resize requests, MIGs (with their VMs), the remaining VMs,
// templates.
func PlanTeardown(cluster string, inv TeardownInventory) TeardownPlan {
	var p TeardownPlan
	owned, left := TeardownOwnedMIGs(cluster, inv.Templates, inv.MIGs)
	p.MIGs, p.Left = owned, left
	ownedKey := map[string]bool{}
	for _, m := range owned {
		// A resize request's Zone is its MIG's location (gce).
		ownedKey[m.Location()+"/"+m.Name] = true
	}
	anyMIG := map[string]TeardownMIG{}
	for _, m := range inv.MIGs {
		if m.Zone != "" {
			anyMIG[m.Zone+"/"+m.Name] = m
		}
	}
	for _, rr := range inv.ResizeRequests {
		if ownedKey[rr.Zone+"/"+rr.MIG] {
			p.ResizeRequests = append(p.ResizeRequests, rr)
		}
	}
	for _, vm := range inv.VMs {
		if !ClusterLabelled(cluster, vm.Labels) {
			continue
		}
		key := vm.Zone + "/" + vm.MIG
		switch m, exists := anyMIG[key]; {
		case vm.MIG != "" && ownedKey[key]:
			p.MIGVMs = append(p.MIGVMs, vm)
		case vm.MIG != "" && exists:
			p.Left = append(p.Left, TeardownItem{Kind: KindVM, Scope: "zones/" + vm.Zone, Name: vm.Name,
				Note: fmt.Sprintf("labelled as the cluster's but a member of MIG %s, which is not the cluster's (its templates %s are not); "+
					"deleting the VM alone would make the MIG recreate it: not deleted", m.Name, strings.Join(m.Templates, ", "))})
		default:
			p.VMs = append(p.VMs, vm)
		}
	}
	inUse := map[string]string{}
	for _, it := range p.Left {
		if it.Kind != KindMIG {
			continue
		}
		for _, m := range inv.MIGs {
			if m.Scope() == it.Scope && m.Name == it.Name {
				for _, t := range m.Templates {
					inUse[t] = m.Scope() + "/" + m.Name
				}
			}
		}
	}
	ours := clusterTemplates(cluster, inv.Templates)
	for _, t := range inv.Templates {
		switch {
		case !ours[t.Path]:
		case inUse[t.Path] != "":
			p.Left = append(p.Left, TeardownItem{Kind: KindTemplate, Scope: "global", Name: t.Name,
				Note: "in use by MIG " + inUse[t.Path] + ", which is not deleted"})
		default:
			p.Templates = append(p.Templates, t)
		}
	}
	for _, rp := range inv.Policies {
		if clusterPolicy(cluster, rp) {
			p.Policies = append(p.Policies, rp)
		}
	}
	for _, u := range inv.Unreachable {
		p.Left = append(p.Left, TeardownItem{Kind: "scope", Scope: u, Name: "?",
			Note: "Compute could not list it: what the cluster has there is unknown"})
	}
	return p
}

// TeardownRRStep is the next step for one resize request.
type TeardownRRStep int

// Steps for a resize request (https://cloud.google.com/compute/docs/instance-groups/manage-resize-requests-mig: cancel is only for ACCEPTED
// requests, delete only for inactive ones).
const (
	// RRWait: CREATING (or a state not known here): look again later.
	RRWait TeardownRRStep = iota + 1
	// RRCancel: ACCEPTED: cancel, then delete.
	RRCancel
	// RRDelete: SUCCEEDED, FAILED or CANCELLED: delete (its VMs stay, and
	// go with the MIG).
	RRDelete
	// RRGone: the request no longer exists.
	RRGone
)

// TeardownResizeRequestStep decides the next step for a request in state
// ("" if it is gone).
func TeardownResizeRequestStep(state string) TeardownRRStep {
	switch {
	case state == "":
		return RRGone
	case state == "ACCEPTED":
		return RRCancel
	case finalRequestState(state):
		return RRDelete
	}
	return RRWait
}

// TeardownRemaining compares the inventory read after the teardown with the
// one it started from: every resource of the cluster still present is
// reported, marked as having appeared during the teardown when it was not
// in before (a VM by ID, since names are reused), with the likely cause.
func TeardownRemaining(cluster string, before, after TeardownInventory) []TeardownItem {
	p := PlanTeardown(cluster, after)
	known := map[string]bool{}
	for _, vm := range before.VMs {
		known[fmt.Sprintf("vm/%s/%s/%d", vm.Zone, vm.Name, vm.ID)] = true
	}
	for _, m := range before.MIGs {
		known["mig/"+m.Scope()+"/"+m.Name] = true
	}
	for _, rr := range before.ResizeRequests {
		known["rr/"+rr.Zone+"/"+rr.MIG+"/"+rr.Name] = true
	}
	for _, t := range before.Templates {
		known["tpl/"+t.Path] = true
	}
	for _, rp := range before.Policies {
		known["policy/"+rp.Region+"/"+rp.Name] = true
	}
	const appeared = "appeared during the teardown: are flexslurm's functions (ScaleUp, Reconcile) still deployed, or its Cloud Scheduler job? Remove them first, then run the teardown again"
	note := func(key, still string) string {
		if known[key] {
			return still
		}
		return appeared
	}
	var out []TeardownItem
	for _, rr := range p.ResizeRequests {
		out = append(out, TeardownItem{Kind: KindResizeRequest, Scope: "zones/" + rr.Zone + "/instanceGroupManagers/" + rr.MIG, Name: rr.Name,
			Note: note("rr/"+rr.Zone+"/"+rr.MIG+"/"+rr.Name, "still there ("+rr.State+")")})
	}
	for _, m := range p.MIGs {
		out = append(out, TeardownItem{Kind: KindMIG, Scope: m.Scope(), Name: m.Name, Note: note("mig/"+m.Scope()+"/"+m.Name, "still there")})
	}
	for _, vm := range slices.Concat(p.MIGVMs, p.VMs) {
		still := "still there (" + vm.Status + ")"
		if vm.Status == "STOPPING" {
			still = "still being deleted (STOPPING)"
		}
		out = append(out, TeardownItem{Kind: KindVM, Scope: "zones/" + vm.Zone, Name: vm.Name,
			Note: note(fmt.Sprintf("vm/%s/%s/%d", vm.Zone, vm.Name, vm.ID), still)})
	}
	for _, t := range p.Templates {
		out = append(out, TeardownItem{Kind: KindTemplate, Scope: "global", Name: t.Name, Note: note("tpl/"+t.Path, "still there")})
	}
	for _, rp := range p.Policies {
		out = append(out, TeardownItem{Kind: KindPolicy, Scope: "regions/" + rp.Region, Name: rp.Name, Note: note("policy/"+rp.Region+"/"+rp.Name, "still there")})
	}
	return append(out, p.Left...)
}
