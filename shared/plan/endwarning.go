package plan

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// warnOfRepair sends the jobs still running on a node whose repair starts
// the end signal, once per generation, when a warning is configured: the
// repair replaces the VM once Slurm has drained it (no job left), so a job
// that checkpoints and leaves lets its faulty node be replaced sooner, and
// its own work go on elsewhere. Jobs that ignore it run to their end.
func (b *builder) warnOfRepair(node *model.Node, reason string) {
	if b.pol.EndWarning <= 0 || node.EndWarned == node.Generation {
		return
	}
	node.EndWarned = node.Generation
	why := fmt.Sprintf("%s on %s: the node is drained and its VM replaced once its jobs end; the jobs on %s are sent SIG%s",
		reason, node.VMName, node.Name, b.pol.EndSignal)
	b.add(SlurmCommand{
		ID:      naming.CommandID(b.cluster, string(event.SlurmSignal), node.Name, node.VMName, strconv.FormatInt(node.Generation, 10), b.pol.EndSignal),
		Command: event.SlurmSignal, Nodes: []string{node.Name}, Signal: b.pol.EndSignal, Reason: why,
	})
}

// warnBeforeEnd sends the jobs running on a node the pool's end signal
// once per generation, Policy.EndWarning before its VM ends at its run
// duration, so that a batch script that traps the signal can checkpoint
// (and, submitted with --requeue, be requeued when the node goes DOWN at
// the end). It acts on the first reconcile pass within the warning: the
// warning is at most one reconcile period late. A node whose end is
// already past, or that no longer runs its VM, is not warned.
func (b *builder) warnBeforeEnd(pool *model.Pool) {
	if b.pol.EndWarning <= 0 {
		return
	}
	for _, n := range b.poolNodes(pool.ID) {
		if n.Phase != model.PhaseRunning || n.TerminationTime.IsZero() || n.EndWarned == n.Generation {
			continue
		}
		at := n.TerminationTime.Add(-b.pol.EndWarning)
		if b.now.Before(at) || !b.now.Before(n.TerminationTime) {
			continue
		}
		node := *n
		node.EndWarned = node.Generation
		left := n.TerminationTime.Sub(b.now).Round(time.Second)
		why := fmt.Sprintf("%s ends at %s (max run duration), in %s: the jobs on %s are sent SIG%s", n.VMName,
			n.TerminationTime.Format(time.RFC3339), left, n.Name, b.pol.EndSignal)
		b.add(SlurmCommand{
			ID:      naming.CommandID(b.cluster, string(event.SlurmSignal), n.Name, n.VMName, strconv.FormatInt(n.Generation, 10), b.pol.EndSignal),
			Command: event.SlurmSignal, Nodes: []string{n.Name}, Signal: b.pol.EndSignal, Reason: why,
		})
		b.putNode(node, why)
	}
}

// endWarningPass signals the jobs on a node nearing its end.
type endWarningPass struct{}

func (endWarningPass) apply(b *builder, pc *poolContext) { b.warnBeforeEnd(pc.pool) }
