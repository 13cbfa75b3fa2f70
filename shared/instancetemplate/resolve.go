package instancetemplate

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// ImageResolver turns an image or image family reference into the specific
// image it names now ("projects/P/global/images/NAME"); shared/gce's
// Client.ResolveImage asks Compute Engine.
type ImageResolver func(ctx context.Context, ref string) (string, error)

// Resolve completes a deployment's node settings for cluster c, as
// `flexslurm apply` does before it publishes them: the default image and
// every FLEX_START pool's node_image are resolved to specific images (a
// family to its latest image), so the templates built from them stay the
// same until the next apply, and the home mount records the spec's
// home_directory_storage. Every problem is reported, each naming the field
// or the pool's JSON path.
func Resolve(ctx context.Context, c *spec.Cluster, s nodeconfig.Settings, resolve ImageResolver) (nodeconfig.Settings, error) {
	out := s
	out.PoolImages = nil
	out.Home.Storage = c.Slurm.HomeDirectoryStorage
	var errs []error
	if s.Image == "" {
		errs = append(errs, errors.New("node settings image: missing (an image or image family for pools without node_image)"))
	} else if img, err := resolve(ctx, s.Image); err != nil {
		errs = append(errs, fmt.Errorf("node settings image %s: %w", s.Image, err))
	} else {
		out.Image = img
	}
	for i, p := range c.NodePools {
		if p.NodeImage == "" || !p.IsFlexStart() || p.ID == c.Slurm.LoginNodePoolID {
			continue
		}
		img, err := resolve(ctx, p.NodeImage)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s: node_pools[%d].node_image %s: %w", p.ID, i, p.NodeImage, err))
			continue
		}
		if out.PoolImages == nil {
			out.PoolImages = map[string]string{}
		}
		out.PoolImages[p.ID] = img
	}
	if len(errs) > 0 {
		return nodeconfig.Settings{}, errors.Join(errs...)
	}
	out.PoolImages = maps.Clone(out.PoolImages)
	if err := out.Validate(true); err != nil {
		return nodeconfig.Settings{}, fmt.Errorf("node settings: %w", err)
	}
	return out, nil
}
