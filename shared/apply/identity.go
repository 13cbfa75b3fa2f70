package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/store"
)

// ProveNode proves that msg was sent by the VM of node that the report
// names — vm, or any generation's VM of node when vm is "" — in the zone of
// node's pool in the applied cluster spec, in the deployment's project
// (docs/security.md, "Reports prove which VM sent them"). It returns the
// proven VM's name. An unproven report wraps identity.ErrRefused (Outcome
// acknowledges it), a verification that could not be carried out
// ErrTransient.
func (r *Runner) ProveNode(ctx context.Context, msg *event.Message, cluster, node, vm string) (string, error) {
	_, pool, _, ok := naming.ParseNodeName(node)
	if !ok {
		return "", fmt.Errorf("%w: node %q is not a node name", identity.ErrRefused, node)
	}
	// The VM named must be one of node's: a token proves the VM it names,
	// and the report about another node than that VM's would otherwise
	// pass.
	if vm != "" {
		if vmNode, _, _, _, ok := naming.ParseVMName(vm); !ok || vmNode != node {
			return "", fmt.Errorf("%w: VM %q is not a VM of node %s (<node>-g<generation>)", identity.ErrRefused, vm, node)
		}
	}
	head, err := r.d.Store.Read(ctx, store.Scope{Cluster: cluster})
	if err != nil {
		return "", fmt.Errorf("%w: reading cluster %s: %w", ErrTransient, cluster, err)
	}
	c, err := r.Spec(head)
	if err != nil {
		return "", err
	}
	p, ok := c.Pool(pool)
	if !ok {
		return "", fmt.Errorf("%w: node %s: pool %q is not in the spec of cluster %s", identity.ErrRefused, node, pool, cluster)
	}
	want := identity.Want{Project: r.d.Project, Zone: p.Zone, Zones: p.Ext.Zones, Instance: vm, Role: "node"}
	if vm == "" {
		want.NodeOf = node
	}
	claims, err := r.verify(ctx, msg, cluster, want)
	if err != nil {
		return "", err
	}
	return claims.Instance, nil
}

// ProveController proves that msg was sent by the cluster's Slurm
// controller VM (Deps.ControllerVM). With none configured, every
// controller report is refused.
func (r *Runner) ProveController(ctx context.Context, msg *event.Message, cluster string) error {
	if r.d.ControllerVM == "" {
		return fmt.Errorf("%w: no controller VM is configured, so no controller report can be proven: set %s=zones/ZONE/instances/NAME (deploy/: variable controller_instance)",
			identity.ErrRefused, config.EnvControllerVM)
	}
	v, err := identity.ParseVM(r.d.ControllerVM, r.d.Project)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", identity.ErrRefused, config.EnvControllerVM, err)
	}
	// A controller named as a node VM (<cluster>-<pool>-<index>-g<gen>)
	// would let the root of the node VM of that name, which a MIG of this
	// or another cluster may create, sign controller reports.
	if node, cl, _, _, ok := naming.ParseVMName(v.Name); ok {
		return fmt.Errorf("%w: %s names %s, which is named as a VM of node %s of cluster %s: a node's token cannot prove a controller report; name the controller VM otherwise (e.g. %s-controller)",
			identity.ErrRefused, config.EnvControllerVM, v, node, cl, cluster)
	}
	_, err = r.verify(ctx, msg, cluster, identity.Want{Project: v.Project, Zone: v.Zone, Instance: v.Name, Role: "controller"})
	return err
}

func (r *Runner) verify(ctx context.Context, msg *event.Message, cluster string, want identity.Want) (identity.Claims, error) {
	if r.d.Identity == nil {
		return identity.Claims{}, fmt.Errorf("%w: no identity verifier", identity.ErrRefused)
	}
	c, err := r.d.Identity.Verify(ctx, cluster, msg.Data, msg.Attributes, want)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, identity.ErrRefused):
		return c, err
	default:
		return c, fmt.Errorf("%w: verifying the sender's identity token: %w", ErrTransient, err)
	}
}
