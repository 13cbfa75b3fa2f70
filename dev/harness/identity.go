package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/store"
)

// ControllerVM is the harness's Slurm controller VM (apply.Deps.ControllerVM).
const ControllerVM = "zones/us-central1-a/instances/flexvm-controller"

// SenderAttr, on a message the harness delivers, names the VM that sent
// it ("projects/P/zones/Z/instances/N"), or "none" for a message without
// an identity token; KnownSender is then not trusted for it. Messages
// without it come from the VM they name.
const SenderAttr = "harness.sender"

// KnownSender is the harness's identity.Verifier. The harness delivers
// reports in process, without tokens (a scenario or chaos run delivers
// millions of them; signing each would dominate), and knows who sent each
// one: the VM the report names, unless the test says otherwise with
// SenderAttr. The claims it derives go through the same matching
// (identity.Want.Match) as a verified token's. It is a Go value for tests
// only: nothing in a deployed function's configuration selects it.
type KnownSender struct {
	Store store.Store
}

// Verify implements identity.Verifier.
func (k KnownSender) Verify(ctx context.Context, cluster string, data []byte, attrs map[string]string, want identity.Want) (identity.Claims, error) {
	if s, ok := attrs[SenderAttr]; ok {
		if s == "none" {
			return identity.Claims{}, fmt.Errorf("%w: no identity token", identity.ErrRefused)
		}
		v, err := identity.ParseVM(strings.TrimPrefix(s, "projects/"+Project+"/"), Project)
		if err != nil {
			return identity.Claims{}, err
		}
		c := identity.Claims{Project: v.Project, Zone: v.Zone, Instance: v.Name}
		return c, want.Match(c)
	}
	c := identity.Claims{Project: want.Project, Zone: want.Zone, Instance: want.Instance}
	if c.Instance == "" {
		// Any VM of the node: the one it runs now.
		st, err := k.Store.Read(ctx, store.Scope{Cluster: cluster, Nodes: []string{want.NodeOf}})
		if err != nil {
			return identity.Claims{}, fmt.Errorf("%w: %w", identity.ErrUnavailable, err)
		}
		if n, ok := st.Nodes[want.NodeOf]; ok && n.Generation > 0 {
			c.Instance = fmt.Sprintf("%s-g%d", want.NodeOf, n.Generation)
		}
	}
	return c, want.Match(c)
}
