package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// render is the cluster as a ModelDevelopmentCluster resource in JSON
// names: the spec it runs, its name, times, and clusterStatus with a
// nodesStatus entry per Flex-Start node that holds or awaits a VM. It is
// built from the spec and the node records only: the deployment's node
// settings (which name the munge key's secret) never reach it.
func (s *Server) render(r route, v *clusterView) (map[string]any, *Error) {
	eff, err := v.spec.EffectiveJSON()
	if err != nil {
		return nil, errorf(CodeInternal, "rendering %s: %v", v.spec.ID, err)
	}
	camel, err := rewriteKeys(eff, toCamel)
	if err != nil {
		return nil, errorf(CodeInternal, "rendering %s: %v", v.spec.ID, err)
	}
	var res map[string]any
	if err := json.Unmarshal(camel, &res); err != nil {
		return nil, errorf(CodeInternal, "rendering %s: %v", v.spec.ID, err)
	}
	res["name"] = r.clusterName(v.spec.ID)
	if pools, ok := res["nodePools"].([]any); ok {
		for _, p := range pools {
			if pm, ok := p.(map[string]any); ok && pm["flexStartMaxDuration"] != nil {
				pm["effectiveFlexStartMaxDuration"] = pm["flexStartMaxDuration"]
			}
		}
	}
	state, detail := "RUNNING", "every Flex-Start pool is managed by flexslurm"
	switch {
	case v.hasAPI && v.api.State == store.APIClusterDeleting:
		state, detail = "STOPPING", "being deleted (operation "+v.api.Operation+")"
	case v.pending != nil && (v.pending.Kind == kindCreate || v.st == nil || v.st.Cluster == nil):
		state, detail = "PROVISIONING", "operation "+v.pending.ID+": "+v.pending.Progress
	case v.pending != nil && v.pending.Kind == kindUpdate:
		state, detail = "UPDATING", "operation "+v.pending.ID+": "+v.pending.Progress
	}
	status := map[string]any{"state": state, "detail": detail, "nodesStatus": nodesStatus(v.st)}
	res["clusterStatus"] = status
	if v.st != nil && v.st.Cluster != nil {
		if t := v.st.Cluster.CreatedAt; !t.IsZero() {
			res["createTime"] = t.UTC().Format(time.RFC3339Nano)
		}
		if t := v.st.Cluster.UpdatedAt; !t.IsZero() {
			res["updateTime"] = t.UTC().Format(time.RFC3339Nano)
		}
	}
	return res, nil
}

// nodesStatus lists the nodes that hold or await a VM, by name. Node
// states are the API's (PREPARING, RUNNING, UPDATING) and REPAIRING, which
// Google's resiliency page names for a node whose repair is under way.
func nodesStatus(st *model.State) []map[string]any {
	out := []map[string]any{}
	if st == nil {
		return out
	}
	names := make([]string, 0, len(st.Nodes))
	for n := range st.Nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		n := st.Nodes[name]
		if !n.Phase.HasVM() {
			continue
		}
		state, detail := "PREPARING", "capacity requested (Flex-Start may queue)"
		switch n.Phase {
		case model.PhaseRunning:
			state, detail = "RUNNING", "VM running"
		case model.PhaseDeleting:
			state, detail = "UPDATING", "VM being deleted"
		}
		switch {
		case n.Repair == model.RepairLimit:
			state, detail = "ERROR", fmt.Sprintf("left drained for an operator: repair limit reached (%d repairs since %s): %s; reportFaultyNodes repairs it",
				n.RepairCount, n.RepairCountSince.UTC().Format(time.RFC3339), n.RepairReason)
		case n.Repair != "":
			state, detail = "REPAIRING", fmt.Sprintf("repair %s: %s", n.Repair, n.RepairReason)
		}
		e := map[string]any{
			"nodeId": n.Name, "instanceName": n.VMName, "nodePoolId": n.Pool, "nodePoolType": "NODE_POOL_TYPE_COMPUTE",
			"nodeState": state, "detail": detail,
		}
		if n.VMID != "" {
			e["instanceId"] = n.VMID
		}
		// flexslurm's additions, for the timeline of the status page:
		// when the VM ran, when it ends at its run duration, what takes a
		// static node's place, since when a repair runs.
		e["nodeKind"] = strings.ToUpper(string(n.Kind))
		for k, t := range map[string]time.Time{"runningTime": n.RunningAt, "endTime": n.TerminationTime, "repairTime": n.RepairSince} {
			if !t.IsZero() {
				e[k] = t.UTC().Format(time.RFC3339Nano)
			}
		}
		if n.Successor != "" {
			e["successor"] = n.Successor
		}
		if n.Predecessor != "" {
			e["predecessor"] = n.Predecessor
		}
		if !n.RequestedAt.IsZero() {
			e["createTime"] = n.RequestedAt.UTC().Format(time.RFC3339Nano)
		}
		last := n.RequestedAt
		for _, t := range []time.Time{n.RunningAt, n.RepairSince} {
			if t.After(last) {
				last = t
			}
		}
		if !last.IsZero() {
			e["lastUpdateTime"] = last.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, e)
	}
	return out
}

// Page tokens name the last cluster of the page, and the collection they
// were listed from (a token of another location is refused).
func encodePageToken(name string, r route) string {
	return base64.RawURLEncoding.EncodeToString([]byte(name))
}

func decodePageToken(t string, r route) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(t)
	if err != nil {
		return "", false
	}
	id, ok := strings.CutPrefix(string(b), r.parent()+"/"+collection+"/")
	return id, ok && id != ""
}

// refresh decides, from the stores, whether a pending operation is done,
// and records it: a create or update once the cluster's record holds its
// spec (or, past Deps.ApplyDeadline, failed); a delete once every pool is
// removed and no node holds a VM, and Deps.Teardown (when set) removed the
// rest.
func (s *Server) refresh(ctx context.Context, op store.Operation) (store.Operation, *Error) {
	if op.Done {
		return op, nil
	}
	st, err := s.d.Store.Read(ctx, store.Scope{Cluster: op.Cluster, AllPools: true})
	if err != nil {
		return op, errorf(CodeUnavailable, "reading cluster %s: %v", op.Cluster, err)
	}
	now := s.d.Now()
	switch op.Kind {
	case kindCreate, kindUpdate:
		if st.Cluster != nil && st.Cluster.SpecSHA256 == op.SpecSHA256 {
			return s.done(ctx, op, nil, "ScaleUp applied the spec")
		}
		if now.Sub(op.CreateTime) > s.d.ApplyDeadline {
			return s.done(ctx, op, errorf(CodeDeadlineExceeded,
				"ScaleUp did not apply the spec within %s: see its logs and the cluster-spec dead letters (flexslurm status --dead-letter)", s.d.ApplyDeadline), "")
		}
	case kindDelete:
		left := 0
		for _, n := range st.Nodes {
			if n.Phase.HasVM() {
				left++
			}
		}
		removed := true
		for _, p := range st.Pools {
			removed = removed && p.Removed
		}
		if st.Cluster == nil || !removed || left > 0 {
			progress := fmt.Sprintf("%d node(s) still hold a VM; busy nodes are released when their jobs end", left)
			if !removed {
				progress = "waiting for ScaleUp to remove the Flex-Start pools"
			}
			if progress != op.Progress {
				op.Progress = progress
				if up, err := s.d.State.UpdateOperation(ctx, op.ID, func(o *store.Operation) error { o.Progress, o.UpdateTime = progress, now; return nil }); err == nil {
					op = up
				}
			}
			return op, nil
		}
		if s.d.Teardown != nil {
			if err := s.d.Teardown(ctx, op.Cluster); err != nil {
				s.d.Log.Warn("teardown of a deleted cluster left something; the next operations.get runs it again",
					"flow", "flex.api", "cluster", op.Cluster, "operation", op.ID, "err", err)
				return op, nil
			}
		}
		if err := s.d.State.PutAPICluster(ctx, store.APICluster{ID: op.Cluster, State: store.APIClusterDeleted, Operation: op.ID, UpdateTime: now}); err != nil {
			return op, errorf(CodeUnavailable, "storing cluster %s: %v", op.Cluster, err)
		}
		return s.done(ctx, op, nil, "no node holds a VM; the cluster's Flex-Start pools are removed")
	}
	return op, nil
}

func (s *Server) done(ctx context.Context, op store.Operation, e *Error, progress string) (store.Operation, *Error) {
	up, err := s.finish(ctx, op.ID, e, progress)
	if err != nil {
		return op, errorf(CodeUnavailable, "storing operation %s: %v", op.ID, err)
	}
	return up, nil
}

// getOperation handles GET /v1/projects/P/locations/L/operations/OP.
func (s *Server) getOperation(ctx context.Context, w http.ResponseWriter, r route, q query) *Error {
	if e := q.only(); e != nil {
		return e
	}
	op, err := s.d.State.Operation(ctx, r.id)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(CodeNotFound, "%s/operations/%s not found", r.parent(), r.id)
	}
	if err != nil {
		return errorf(CodeUnavailable, "reading operation %s: %v", r.id, err)
	}
	if op.Name != r.parent()+"/operations/"+r.id {
		return errorf(CodeNotFound, "%s/operations/%s not found", r.parent(), r.id)
	}
	op, e := s.refresh(ctx, op)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, s.renderOperation(ctx, op))
	return nil
}

// renderOperation is a google.longrunning.Operation in JSON: name,
// metadata (an Any with genericMetadata and progressMessage, as Google's
// create example shows), done, and response or error.
func (s *Server) renderOperation(ctx context.Context, op store.Operation) map[string]any {
	mdType := map[string]string{kindCreate: typeCreateMetadata, kindUpdate: typeUpdateMetadata, kindDelete: typeDeleteMetadata, kindReport: typeReportMetadata}[op.Kind]
	out := map[string]any{
		"name": op.Name,
		"metadata": map[string]any{
			"@type": mdType,
			"genericMetadata": map[string]any{
				"createTime": op.CreateTime.UTC().Format(time.RFC3339Nano),
				"updateTime": op.UpdateTime.UTC().Format(time.RFC3339Nano),
			},
			"progressMessage": op.Progress,
		},
	}
	if !op.Done {
		return out
	}
	out["done"] = true
	if op.ErrorCode != 0 {
		out["error"] = (&Error{Code: Code(op.ErrorCode), Message: op.ErrorMessage}).status()
		return out
	}
	if op.Kind == kindDelete {
		out["response"] = map[string]any{"@type": typeEmpty}
		return out
	}
	r, ok := parseRoute("/v1beta1/" + op.Target)
	if !ok {
		out["response"] = map[string]any{"@type": typeCluster, "name": op.Target}
		return out
	}
	r.id = ""
	v, e := s.load(ctx, r, op.Cluster)
	if e != nil || !v.exists() {
		out["response"] = map[string]any{"@type": typeCluster, "name": op.Target}
		return out
	}
	res, e := s.render(r, v)
	if e != nil {
		out["response"] = map[string]any{"@type": typeCluster, "name": op.Target}
		return out
	}
	res["@type"] = typeCluster
	out["response"] = res
	return out
}
