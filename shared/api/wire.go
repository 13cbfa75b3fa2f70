package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/instancetemplate"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// EnvNodeSettings holds the deployment's node settings (shared/nodeconfig
// Settings) as JSON, or the path of a JSON file: what `flexslurm apply
// --node-settings` reads, set by deploy/ from the same values as its
// node_settings output.
const EnvNodeSettings = "FLEXSLURM_NODE_SETTINGS"

// Flow names the API in logs and in the event ids of its repairs.
const Flow = "flex.api"

// LoadNodeSettings reads node settings given as JSON text or a file path;
// unknown fields are errors.
func LoadNodeSettings(v string) (nodeconfig.Settings, error) {
	var s nodeconfig.Settings
	b := []byte(v)
	if t := strings.TrimSpace(v); !strings.HasPrefix(t, "{") {
		var err error
		if b, err = os.ReadFile(t); err != nil {
			return s, fmt.Errorf("node settings: %w", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("node settings: %w", err)
	}
	if err := s.Validate(false); err != nil {
		return s, fmt.Errorf("node settings: %w", err)
	}
	return s, nil
}

// ImageResolver is the part of the Compute client that resolves images.
type ImageResolver interface {
	ResolveImage(ctx context.Context, ref string) (string, error)
}

// ResolvedNodeSettings returns Deps.NodeSettings over fixed settings: the
// spec's images resolved through Compute, as `flexslurm apply` does.
func ResolvedNodeSettings(s nodeconfig.Settings, r ImageResolver) func(ctx context.Context, c *spec.Cluster) (nodeconfig.Settings, error) {
	return func(ctx context.Context, c *spec.Cluster) (nodeconfig.Settings, error) {
		if r == nil {
			return nodeconfig.Settings{}, errors.New("no Compute client to resolve the node images with")
		}
		return instancetemplate.Resolve(ctx, c, s, r.ResolveImage)
	}
}

// RunnerRepair returns Deps.Repair over a runner: one node's repair is
// decided by plan.Repair from a FAIL verdict the operator gave through the
// API (the caller was admitted by IAM, so no node identity is asked for),
// in one transaction whose event id is the operation's and the node's.
func RunnerRepair(r *apply.Runner) func(ctx context.Context, cluster string, n FaultyNode, opID string) error {
	return func(ctx context.Context, cluster string, n FaultyNode, opID string) error {
		_, pool, _, ok := naming.ParseNodeName(n.Node)
		if !ok {
			return fmt.Errorf("%w: %q is not a node name", ErrRepairRefused, n.Node)
		}
		reasons := []string{"reportFaultyNodes: delete the node (operator, through the API)"}
		if n.Host {
			reasons = []string{"reportFaultyNodes: report its host as faulty (operator, through the API)"}
			reasons = append(reasons, n.Reasons...)
		}
		if len(reasons) > 16 {
			reasons = reasons[:16]
		}
		h := &event.Health{
			Header: event.Header{Version: event.SchemaVersion, Type: event.TypeHealthFailure, Cluster: cluster},
			Node:   n.Node, Verdict: event.VerdictFail, Reasons: reasons, CheckedAt: time.Now().UTC(),
		}
		res, err := r.Process(ctx, apply.Input{
			Flow: Flow, EventID: "api-report-" + opID + "-" + n.Node,
			Scope: store.Scope{Cluster: cluster, Pools: []string{pool}, Slurm: true},
			Decide: func(st *model.State, now time.Time) ([]plan.Action, error) {
				return plan.RepairByOperator(st, h, now, r.Deps().Policy)
			},
		})
		if err != nil {
			return err
		}
		if res.Rejected != nil {
			return fmt.Errorf("%w: %v", ErrRepairRefused, res.Rejected)
		}
		return nil
	}
}
