package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/store"
)

// reportRequest is a reportFaultyNodes body in proto names (Google's
// resiliency page: {"nodeActions": [{"nodeId": …, "reportFaultyHost":
// {"faultReasons": [{"behavior": …, "description": …}]}}]}).
type reportRequest struct {
	NodeActions []struct {
		NodeID           string `json:"node_id"`
		ReportFaultyHost *struct {
			FaultReasons []struct {
				Behavior    string `json:"behavior"`
				Description string `json:"description"`
			} `json:"fault_reasons"`
		} `json:"report_faulty_host"`
	} `json:"node_actions"`
}

// behaviors are the faultReasons behaviors Google's resiliency page lists.
var behaviors = []string{"PERFORMANCE", "SILENT_DATA_CORRUPTION", "UNRECOVERABLE_GPU_ERROR", "BEHAVIOR_UNSPECIFIED"}

// vmSuffix is a VM name's generation suffix (naming: "<node>-g<generation>"):
// a node may be named by its instanceName too.
var vmSuffix = regexp.MustCompile(`-g[1-9][0-9]*$`)

// maxNodeActions bounds one request.
const maxNodeActions = 100

// reportFaultyNodes handles POST …/modelDevelopmentClusters/ID:reportFaultyNodes.
// Each named node is repaired the way a failed health check has it
// repaired (shared/plan.Repair: drained in Slurm, then replaced, or its
// host repaired where Compute Engine offers that); a reportFaultyHost
// action's reasons are recorded with the repair, and the decision between
// host repair and replacement stays flexslurm's.
func (s *Server) reportFaultyNodes(ctx context.Context, w http.ResponseWriter, req *http.Request, r route, q query) *Error {
	if e := q.only(); e != nil {
		return e
	}
	body, e := readBody(req)
	if e != nil {
		return e
	}
	snake, err := rewriteKeys(body, toSnake)
	if err != nil {
		return invalid(FieldViolation{Field: "body", Description: "not JSON"})
	}
	var rq reportRequest
	dec := json.NewDecoder(strings.NewReader(string(snake)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rq); err != nil {
		return invalid(FieldViolation{Field: "body", Description: fmt.Sprintf("not a reportFaultyNodes request: %v", err)})
	}
	if len(rq.NodeActions) == 0 {
		return invalid(FieldViolation{Field: "nodeActions", Description: "required: at least one {\"nodeId\": CLUSTER-POOL-INDEX}"})
	}
	if len(rq.NodeActions) > maxNodeActions {
		return invalid(FieldViolation{Field: "nodeActions", Description: fmt.Sprintf("%d actions: at most %d", len(rq.NodeActions), maxNodeActions)})
	}
	var vs []FieldViolation
	var nodes []FaultyNode
	for i, a := range rq.NodeActions {
		at := fmt.Sprintf("nodeActions[%d]", i)
		node := vmSuffix.ReplaceAllString(a.NodeID, "")
		cl, _, _, ok := naming.ParseNodeName(node)
		switch {
		case a.NodeID == "":
			vs = append(vs, FieldViolation{Field: at + ".nodeId", Description: "required: CLUSTER_ID-NODEPOOL_ID-INDEX"})
			continue
		case !ok || cl != r.id:
			vs = append(vs, FieldViolation{Field: at + ".nodeId", Description: fmt.Sprintf("%q is not a node of cluster %s (CLUSTER_ID-NODEPOOL_ID-INDEX)", a.NodeID, r.id)})
			continue
		case slices.ContainsFunc(nodes, func(n FaultyNode) bool { return n.Node == node }):
			vs = append(vs, FieldViolation{Field: at + ".nodeId", Description: fmt.Sprintf("node %s is named twice", node)})
			continue
		}
		fn := FaultyNode{Node: node}
		if h := a.ReportFaultyHost; h != nil {
			fn.Host = true
			if len(h.FaultReasons) == 0 {
				vs = append(vs, FieldViolation{Field: at + ".reportFaultyHost.faultReasons", Description: "required: one or more {behavior, description}"})
			}
			for j, fr := range h.FaultReasons {
				if !slices.Contains(behaviors, fr.Behavior) {
					vs = append(vs, FieldViolation{Field: fmt.Sprintf("%s.reportFaultyHost.faultReasons[%d].behavior", at, j),
						Description: fmt.Sprintf("%q: want one of %s", fr.Behavior, strings.Join(behaviors, ", "))})
				}
				if len(fr.Description) > 512 {
					vs = append(vs, FieldViolation{Field: fmt.Sprintf("%s.reportFaultyHost.faultReasons[%d].description", at, j), Description: "longer than 512 bytes"})
				}
				fn.Reasons = append(fn.Reasons, fr.Behavior+": "+fr.Description)
			}
		}
		nodes = append(nodes, fn)
	}
	if len(vs) > 0 {
		return invalid(vs...)
	}
	v, e := s.load(ctx, r, r.id)
	if e != nil {
		return e
	}
	if !v.exists() || v.st == nil || v.st.Cluster == nil {
		return notFound(r, r.id)
	}
	for i, n := range nodes {
		rec, ok := v.st.Nodes[n.Node]
		if !ok {
			return errorf(CodeNotFound, "nodeActions[%d].nodeId: node %s of %s not found", i, n.Node, r.clusterName(r.id))
		}
		if !rec.Phase.Serving() {
			return errorf(CodeFailedPrecondition, "nodeActions[%d].nodeId: node %s holds no VM to repair (it is %s)", i, n.Node, rec.Phase)
		}
	}
	now := s.d.Now()
	op := store.Operation{
		ID: newOperationID(), Kind: kindReport, Cluster: r.id, Target: r.clusterName(r.id),
		CreateTime: now, UpdateTime: now, ExpireAt: now.Add(store.OperationTTL),
	}
	for _, n := range nodes {
		op.Nodes = append(op.Nodes, n.Node)
	}
	op.Name = r.parent() + "/operations/" + op.ID
	op.Progress = "repair requested for " + strings.Join(op.Nodes, ", ")
	if err := s.d.State.CreateOperation(ctx, op); err != nil {
		return errorf(CodeUnavailable, "storing the operation: %v", err)
	}
	var failed *Error
	for _, n := range nodes {
		if err := s.d.Repair(ctx, r.id, n, op.ID); err != nil {
			code := CodeUnavailable
			if errors.Is(err, ErrRepairRefused) {
				code = CodeFailedPrecondition
			}
			failed = errorf(code, "node %s: %v", n.Node, err)
			break
		}
	}
	progress := "repair started for " + strings.Join(op.Nodes, ", ") + ": drained in Slurm, then replaced (or its host repaired); see the cluster's nodesStatus"
	done, err := s.finish(ctx, op.ID, failed, progress)
	if err != nil {
		return errorf(CodeUnavailable, "storing operation %s: %v", op.ID, err)
	}
	writeJSON(w, http.StatusOK, s.renderOperation(ctx, done))
	return nil
}
