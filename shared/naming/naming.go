// Package naming derives every Compute resource name, label and request id
// flexslurm uses from (cluster, pool, node or job, generation), so that a
// redelivered event or a retried call names exactly the same resource and
// repeats nothing.
//
// Names follow Compute's RFC1035 rule (1–63 characters,
// [a-z]([-a-z0-9]*[a-z0-9])?); cluster ids (≤ 10) and pool ids (≤ 16) are
// bounded by shared/spec so that every name here fits.
//
// This package imports no other flexslurm package.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Labels put on every VM (through the instance template) so that flexslurm
// only ever touches what is its own for this cluster.
const (
	LabelManagedBy = "managed-by"        // always "flexslurm"
	LabelCluster   = "flexslurm-cluster" // cluster id
	LabelPool      = "flexslurm-pool"    // node pool id
	ManagedBy      = "flexslurm"
)

// Labels returns the labels of a pool's VMs.
func Labels(cluster, pool string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelCluster: cluster, LabelPool: pool}
}

// MIG is the managed instance group of a pool: "fs-<cluster>-<pool>".
func MIG(cluster, pool string) string { return fmt.Sprintf("fs-%s-%s", cluster, pool) }

// RequestMIG is the managed instance group that holds one resize request
// and the VMs it creates: "fs-<cluster>-<pool>-r<first 10 hex of
// sha256(request)>" (at most 41 characters). Every resize request
// flexslurm makes lives in a MIG of its own (docs/design/compute.md, "One MIG per
// resize request"), as Cluster Toolkit's mig_flex.py does for Slurm on
// Flex-Start (GoogleCloudPlatform/cluster-toolkit,
// community/modules/scheduler/schedmd-slurm-gcp-v6-controller/modules/slurm_files/scripts/mig_flex.py),
// so releasing a VM never changes the target size of a MIG that holds a
// queued request.
func RequestMIG(cluster, pool, request string) string {
	sum := sha256.Sum256([]byte(request))
	return fmt.Sprintf("fs-%s-%s-r%s", cluster, pool, hex.EncodeToString(sum[:5]))
}

// RequestMIGPrefix is the prefix every request MIG of a pool's name starts
// with (a list filter; the MIG's description proves which request it
// holds: RequestMIGDescription, ParseRequestMIGDescription).
func RequestMIGPrefix(cluster, pool string) string { return fmt.Sprintf("fs-%s-%s-r", cluster, pool) }

// requestMIGDescription's fixed words; the request, pool and cluster are
// RFC1035 names, so they contain no space.
const requestMIGWords = "flexslurm resize request %s of pool %s of cluster %s"

// RequestMIGDescription is the description a request MIG is created with:
// it names the request, pool and cluster, so a MIG found by listing is
// proved this cluster's only when its name is RequestMIG of what its
// description says (ParseRequestMIGDescription).
func RequestMIGDescription(cluster, pool, request string) string {
	return fmt.Sprintf(requestMIGWords, request, pool, cluster)
}

// ParseRequestMIGDescription reads back RequestMIGDescription. ok is false
// for any other text.
func ParseRequestMIGDescription(d string) (cluster, pool, request string, ok bool) {
	f := strings.Fields(d)
	if len(f) != 10 || strings.Join([]string{f[0], f[1], f[2], f[4], f[5], f[7], f[8]}, " ") != "flexslurm resize request of pool of cluster" {
		return "", "", "", false
	}
	return f[9], f[6], f[3], true
}

// IsRequestMIG reports whether a MIG named name with description
// description is the request MIG of a request of pool pool of cluster
// cluster (name and description agree), and which request.
func IsRequestMIG(cluster, pool, name, description string) (request string, ok bool) {
	c, p, r, ok := ParseRequestMIGDescription(description)
	if !ok || c != cluster || p != pool || RequestMIG(c, p, r) != name {
		return "", false
	}
	return r, true
}

// Template is the instance template of a pool for one template content:
// "fs-<cluster>-<pool>-<first 8 hex of sha256(content)>". Templates are
// immutable, so a changed machine spec or run duration is a new template.
func Template(cluster, pool string, content string) string {
	sum := sha256.Sum256([]byte(content))
	return fmt.Sprintf("fs-%s-%s-%s", cluster, pool, hex.EncodeToString(sum[:4]))
}

// NodeResizeRequest names the resize request that provisions one generation
// of one node (static nodes, and replacements of a single node).
func NodeResizeRequest(node string, generation int64) string {
	return fmt.Sprintf("rr-%s-g%d", node, generation)
}

// JobResizeRequest names the resize request that provisions a job's nodes,
// for the job's provisioning generation. A Slurm array job id "12_3" becomes "12-3".
func JobResizeRequest(cluster, pool, jobID string, generation int64) string {
	return fmt.Sprintf("rr-%s-%s-j%s-g%d", cluster, pool, strings.ReplaceAll(jobID, "_", "-"), generation)
}

// namespace scopes flexslurm's name-based request ids.
var namespace = uuid.MustParse("6f0b6c3e-5a0f-4f5e-9a43-5f1e7c2d9b10")

// RequestID is the Compute requestId (a UUID, as the API requires) for one
// operation on one resource: a name-based (SHA-1) UUID of "op/resource", so
// a retried call carries the same id and Compute performs it once. Callers
// use the per-operation constructors below rather than assembling
// "op/resource" themselves.
func RequestID(op, resource string) string {
	return uuid.NewSHA1(namespace, []byte(op+"/"+resource)).String()
}

// One constructor per Compute operation flexslurm performs: each builds the
// RequestID of that operation on that resource, so a decision and the
// re-drive of the same operation (shared/apply) name it identically. The
// strings they hash are fixed: changing one would give an in-flight
// operation a new id after an upgrade, and Compute would perform it twice.

// DeleteInstancesRequestID is the request id of
// instanceGroupManagers.deleteInstances removing VM vm from MIG mig.
func DeleteInstancesRequestID(mig, vm string) string {
	return RequestID("delete-instances", mig+"/"+vm)
}

// CreateResizeRequestID is the request id of
// instanceGroupManagerResizeRequests.insert creating resize request rr in
// MIG mig.
func CreateResizeRequestID(mig, rr string) string {
	return RequestID("create-resize-request", mig+"/"+rr)
}

// CreateResizeRequestIDFor is CreateResizeRequestID for incarnation
// incarnation of the cluster (model.Cluster.Incarnation): "" gives
// CreateResizeRequestID's id, so requests recorded before incarnations
// existed keep theirs; a cluster torn down and created again gets new ids
// for the same names.
func CreateResizeRequestIDFor(incarnation, mig, rr string) string {
	if incarnation == "" {
		return CreateResizeRequestID(mig, rr)
	}
	return RequestID("create-resize-request", mig+"/"+rr+"@"+incarnation)
}

// CancelResizeRequestIDFor, DeleteInstancesRequestIDFor and
// DeleteRequestMIGRequestID are the request ids of the calls on the MIG of
// one resize request in incarnation incarnation of the cluster
// (model.Cluster.Incarnation): a cluster torn down and created again names
// its requests and their MIGs as before, and Compute answers a call that
// reuses a request id within its memory (60 minutes or more) with the first
// call's operation, doing nothing. "" gives the ids of CancelResizeRequestID,
// DeleteInstancesRequestID and DeleteMIGRequestID(zone, mig, 0).
func CancelResizeRequestIDFor(incarnation, mig, rr string) string {
	if incarnation == "" {
		return CancelResizeRequestID(mig, rr)
	}
	return RequestID("cancel-resize-request", mig+"/"+rr+"@"+incarnation)
}

// DeleteInstancesRequestIDFor: see CancelResizeRequestIDFor.
func DeleteInstancesRequestIDFor(incarnation, mig, vm string) string {
	if incarnation == "" {
		return DeleteInstancesRequestID(mig, vm)
	}
	return RequestID("delete-instances", mig+"/"+vm+"@"+incarnation)
}

// DeleteRequestMIGRequestID: see CancelResizeRequestIDFor.
func DeleteRequestMIGRequestID(zone, mig, incarnation string) string {
	if incarnation == "" {
		return DeleteMIGRequestID(zone, mig, 0)
	}
	return RequestID("delete-mig", fmt.Sprintf("%s/%s@%s", zone, mig, incarnation))
}

// InsertRequestMIGRequestID is the request id of instanceGroupManagers.insert
// of request MIG mig in zone zone for incarnation incarnation of the
// cluster.
func InsertRequestMIGRequestID(zone, mig, incarnation string) string {
	return RequestID("insert-mig", fmt.Sprintf("%s/%s@%s", zone, mig, incarnation))
}

// CancelResizeRequestID is the request id of
// instanceGroupManagerResizeRequests.cancel of resize request rr in MIG mig.
func CancelResizeRequestID(mig, rr string) string {
	return RequestID("cancel-resize-request", mig+"/"+rr)
}

// DeleteResizeRequestID is the request id of
// instanceGroupManagerResizeRequests.delete of resize request rr in
// incarnation incarnation of MIG mig (a recreated MIG may hold a request of
// the same name).
func DeleteResizeRequestID(mig, rr string, incarnation int) string {
	return RequestID("delete-resize-request", fmt.Sprintf("%s/%s#%d", mig, rr, incarnation))
}

// ReportHostAsFaultyRequestID is the request id of
// instances.reportHostAsFaulty on VM vm in zone zone.
func ReportHostAsFaultyRequestID(zone, vm string) string {
	return RequestID("report-host-as-faulty", zone+"/"+vm)
}

// StartInstanceRequestID is the request id of instances.start of VM vm in
// zone zone.
func StartInstanceRequestID(zone, vm string) string {
	return RequestID("start-instance", zone+"/"+vm)
}

// InsertTemplateRequestID is the request id of instanceTemplates.insert of
// template template (template names carry a hash of their content).
func InsertTemplateRequestID(template string) string {
	return RequestID("insert-template", template)
}

// InsertTemplateRequestIDIn is the request id of instanceTemplates.insert
// of template template by incarnation incarnation of its cluster
// (model.Cluster.Incarnation). Template names hash only the cluster, pool
// and content, so a cluster torn down and created again with the same spec
// inserts a template of the same name: were the id the same, Compute would
// answer the new insert, within its request-id window, with the old,
// finished operation and create nothing. incarnation "" (a cluster record
// older than incarnations) gives InsertTemplateRequestID's id, so an
// insert in flight across an upgrade keeps its id.
func InsertTemplateRequestIDIn(template, incarnation string) string {
	if incarnation == "" {
		return InsertTemplateRequestID(template)
	}
	return RequestID("insert-template", template+"#"+incarnation)
}

// InsertMIGRequestID is the request id of instanceGroupManagers.insert of
// incarnation incarnation of MIG mig in zone zone.
func InsertMIGRequestID(zone, mig string, incarnation int) string {
	return RequestID("insert-mig", fmt.Sprintf("%s/%s#%d", zone, mig, incarnation))
}

// DeleteMIGRequestID is the request id of instanceGroupManagers.delete of
// incarnation incarnation of MIG mig in zone zone.
func DeleteMIGRequestID(zone, mig string, incarnation int) string {
	return RequestID("delete-mig", fmt.Sprintf("%s/%s#%d", zone, mig, incarnation))
}

// TeardownRequestID is the request id of teardown operation op (e.g.
// "delete-mig") on resource in teardown run runID.
func TeardownRequestID(runID, op, resource string) string {
	return RequestID("teardown-"+op, runID+"/"+resource)
}

// CommandID is the deterministic id of a Slurm command, so the agent runs a
// redelivered command once.
func CommandID(parts ...string) string {
	return uuid.NewSHA1(namespace, []byte("slurm/"+strings.Join(parts, "/"))).String()
}

// ParseVMName splits a VM name "<cluster>-<pool>-<index>-g<generation>" into
// its node name, cluster, pool and generation. Cluster ids contain no hyphen
// (shared/spec), so the first hyphen ends the cluster id and the last two
// segments are the index and generation.
//
// A VM a resize request created without naming it (resizeBy, when Compute
// accepts no instances[]: docs/compute-contract.md, "Named VMs") is named
// by its MIG from the MIG's baseInstanceName, which flexslurm sets to
// "<node>-g<generation>", and a random suffix: "<node>-g<generation>-xxxx"
// (the v1 discovery document, InstanceGroupManager.baseInstanceName: "When
// a VM is created in the group, the MIG appends a hyphen and a random
// four-character string to the base instance name").
// ParseVMName reads that form too: its node and generation are the base's.
// The two forms cannot be confused: a named VM ends in -g and digits, and
// the base of a suffixed one would then end in an index that is not a
// number.
func ParseVMName(vm string) (node, cluster, pool string, generation int64, ok bool) {
	if node, cluster, pool, generation, ok = parseVMBase(vm); ok {
		return node, cluster, pool, generation, true
	}
	if base, suffixed := stripVMSuffix(vm); suffixed {
		return parseVMBase(base)
	}
	return "", "", "", 0, false
}

// BaseVMName is the name flexslurm gives a node generation's VM for vm:
// vm itself when it is "<node>-g<generation>", its base when it is a VM a
// MIG named from that base ("<node>-g<generation>-xxxx"), and vm unchanged
// when it is neither. Records name a generation's VM by its base
// (model.VMName), so a VM matches a record when their bases are equal.
func BaseVMName(vm string) string {
	base, suffixed := stripVMSuffix(vm)
	if !suffixed {
		return vm
	}
	if _, _, _, _, ok := parseVMBase(vm); ok {
		return vm
	}
	if _, _, _, _, ok := parseVMBase(base); ok {
		return base
	}
	return vm
}

// SameVM reports whether the VM named vm is the one a record names as
// recorded (a node generation's model.VMName): the same name, or a name
// its MIG made from it (BaseVMName).
func SameVM(recorded, vm string) bool {
	return recorded != "" && (vm == recorded || BaseVMName(vm) == recorded)
}

// vmSuffixLen is the length of a MIG's generated suffix: a hyphen and four lowercase
// letters or digits.
const vmSuffixLen = 5

func stripVMSuffix(vm string) (string, bool) {
	if len(vm) <= vmSuffixLen || vm[len(vm)-vmSuffixLen] != '-' {
		return "", false
	}
	for _, r := range vm[len(vm)-vmSuffixLen+1:] {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return "", false
		}
	}
	return vm[:len(vm)-vmSuffixLen], true
}

func parseVMBase(vm string) (node, cluster, pool string, generation int64, ok bool) {
	i := strings.LastIndex(vm, "-g")
	if i <= 0 {
		return "", "", "", 0, false
	}
	gen, err := strconv.ParseInt(vm[i+2:], 10, 64)
	if err != nil || gen < 1 || strconv.FormatInt(gen, 10) != vm[i+2:] {
		return "", "", "", 0, false
	}
	node = vm[:i]
	cluster, pool, _, ok = ParseNodeName(node)
	if !ok {
		return "", "", "", 0, false
	}
	return node, cluster, pool, gen, true
}

// ParseNodeName splits a node name "<cluster>-<pool>-<index>".
func ParseNodeName(node string) (cluster, pool string, index int, ok bool) {
	c, rest, found := strings.Cut(node, "-")
	if !found || c == "" {
		return "", "", 0, false
	}
	j := strings.LastIndex(rest, "-")
	if j <= 0 {
		return "", "", 0, false
	}
	idx, err := strconv.Atoi(rest[j+1:])
	if err != nil || idx < 0 || strconv.Itoa(idx) != rest[j+1:] {
		return "", "", 0, false
	}
	return c, rest[:j], idx, true
}

// WorkloadPolicy is the workload policy (a regional resource policy) of a
// pool with compact placement: "fs-<cluster>-<pool>-wp-<distance>", the
// distance in lower case, "any" when the policy sets none (at most 42
// characters). A workload policy cannot be changed once created
// (https://cloud.google.com/ai-hypercomputer/docs/create/create-mig-with-a4-or-a3ultra:
// "To make changes in a workload policy, you must create a new one"), so
// a pool whose distance changes names another policy.
func WorkloadPolicy(cluster, pool, distance string) string {
	d := strings.ToLower(distance)
	if d == "" {
		d = "any"
	}
	return fmt.Sprintf("fs-%s-%s-wp-%s", cluster, pool, d)
}

// WorkloadPolicyPath is the partial URL a MIG's
// resourcePolicies.workloadPolicy names a policy by
// ("regions/REGION/resourcePolicies/NAME", one of the forms the discovery
// document's InstanceGroupManagerResourcePolicies.workloadPolicy lists).
// zone is the MIG's zone; the policy lives in its region.
func WorkloadPolicyPath(zone, name string) string {
	return "regions/" + ZoneRegion(zone) + "/resourcePolicies/" + name
}

// ZoneRegion is the region of a zone ("us-central1-a" → "us-central1").
func ZoneRegion(zone string) string {
	if i := strings.LastIndexByte(zone, '-'); i > 0 {
		return zone[:i]
	}
	return zone
}

// workloadPolicyWords are WorkloadPolicyDescription's fixed words; pool and
// cluster are RFC1035 names without spaces.
const workloadPolicyWords = "flexslurm workload policy of pool %s of cluster %s"

// WorkloadPolicyDescription is the description a pool's workload policy is
// created with. Resource policies carry no labels (the discovery
// document's ResourcePolicy has no labels field), so a policy found by
// name is proved the pool's only when its description names the pool and
// cluster (IsWorkloadPolicy).
func WorkloadPolicyDescription(cluster, pool string) string {
	return fmt.Sprintf(workloadPolicyWords, pool, cluster)
}

// IsWorkloadPolicy reports whether a resource policy named name with
// description description is a workload policy of pool pool of cluster
// cluster, and which distance its name gives ("" for none).
func IsWorkloadPolicy(cluster, pool, name, description string) (distance string, ok bool) {
	if description != WorkloadPolicyDescription(cluster, pool) {
		return "", false
	}
	prefix := fmt.Sprintf("fs-%s-%s-wp-", cluster, pool)
	d, found := strings.CutPrefix(name, prefix)
	if !found {
		return "", false
	}
	switch d {
	case "any":
		return "", true
	case "subblock", "block", "cluster":
		return strings.ToUpper(d), true
	}
	return "", false
}

// ParseWorkloadPolicyDescription reads back WorkloadPolicyDescription.
func ParseWorkloadPolicyDescription(d string) (cluster, pool string, ok bool) {
	f := strings.Fields(d)
	if len(f) != 9 || strings.Join([]string{f[0], f[1], f[2], f[3], f[4], f[6], f[7]}, " ") != "flexslurm workload policy of pool of cluster" {
		return "", "", false
	}
	return f[8], f[5], true
}

// InsertWorkloadPolicyRequestID is the request id of resourcePolicies.insert
// creating workload policy name in region, for incarnation incarnation of
// the cluster.
func InsertWorkloadPolicyRequestID(region, name, incarnation string) string {
	return RequestID("insert-workload-policy/"+incarnation, region+"/"+name)
}
