package plan

import (
	"fmt"

	"github.com/flexslurm/flexslurm/shared/model"
)

// forgetRemovedPool releases the nodes of a pool removed from the spec as their
// jobs end; its MIGs are deleted as they empty (deleteSpentRequestMIGs, deleteLegacyMIG),
// and the pool is forgotten once no MIG of it is left.
func (b *builder) forgetRemovedPool(pool *model.Pool, po ObservedPool) {
	b.releaseSurplus(pool)
	for _, n := range b.poolNodes(pool.ID) {
		if n.Phase.HasVM() || requestMayBeActive(n) {
			return
		}
	}
	if len(po.VMs) > 0 || len(po.MIGs) > 0 || po.MIGExists {
		return
	}
	b.add(ForgetPool{Pool: pool.ID, Reason: fmt.Sprintf("reconciler: pool %s was removed from the spec and no MIG of it is left", pool.ID)})
	delete(b.st.Pools, pool.ID)
}

// removedPoolPass releases and then forgets a pool removed from the spec.
type removedPoolPass struct{}

func (removedPoolPass) apply(b *builder, pc *poolContext) {
	if pc.pool.Removed {
		b.forgetRemovedPool(pc.pool, pc.observed)
	}
}
