package plan

import "github.com/flexslurm/flexslurm/shared/model"

// A poolPass is one rule family that the reconciler applies to every pool
// on every pass. poolPasses lists them in the order they run; each pass
// type lives in the file of its rule (docs/design.md, "Where each rule
// lives").
type poolPass interface {
	apply(b *builder, pc *poolContext)
}

// poolContext is what a pass over one pool reads: the pool's record, what
// Compute listed for it, the Slurm snapshot, and the policy. A pass that
// may replace the pool's record hands the passes after it the current one
// (pc.pool).
type poolContext struct {
	pool     *model.Pool
	observed ObservedPool
	slurm    *model.SlurmView
	pol      Policy
	vms      vmIndex
	rrs      map[string]ObservedResizeRequest
	// legacy reports whether generations of the earlier layout (one MIG
	// per pool) are still in the pool's MIG.
	legacy bool
}

// poolPasses is the order of the passes over a pool. The per-node
// decision table runs in the middle: the passes before it settle what the
// pool's requests and MIGs say about its nodes; the passes after it act on
// the pool as a whole.
var poolPasses = []poolPass{
	shortagePass{},
	legacyMIGDeletedPass{},
	vanishedRequestMIGsPass{},
	legacyRequestsPass{},
	adoptArrivedPass{},
	previousRequestsPass{},
	nodeTablePass{},
	unblockRepairsPass{},
	shrinkPass{},
	makeBeforeBreakPass{},
	endWarningPass{},
	staticMinimumPass{},
	orphansPass{},
	unwantedRequestsPass{},
	finishedRequestsPass{},
	requestMIGsPass{},
	legacyMIGPass{},
	removedPoolPass{},
}
