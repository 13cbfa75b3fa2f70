package plan

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

// SlurmCommandMisses is how many Slurm snapshots taken after a node's
// command was sent must still show it not carried out before the command
// is sent again (as the next attempt). A snapshot taken after the send may
// have been taken before the agent received the command (Pub/Sub delivers
// it a little later), so one such snapshot is not proof that it was lost;
// a second one, taken a snapshot period later, is.
const SlurmCommandMisses = 2

// nodeCommand sends a command that brings a node's Slurm state in line
// with its VM (power_up, resume, power_down_force) and records the send on
// the node (model.Node.SlurmCommand). While the command is outstanding,
// nothing is sent again until SlurmCommandMisses snapshots newer than the
// send each still show the node needing it. Every send of a generation is
// a new attempt, and the command id is (cluster, command, node,
// generation, attempt): a redelivered send is applied once, and a send
// that is needed again (the command was carried out, then undone) is not
// taken by the agent for a redelivery. The clock plays no part: a
// reconciler that runs often, or a simulated clock that runs fast, sends
// each command once. It returns true when it stored the node.
func (b *builder) nodeCommand(node model.Node, command event.SlurmOp, reason string) bool {
	sent := node.SlurmCommand
	attempt := 1
	if sent.Attempt > 0 && sent.Generation == node.Generation {
		attempt = sent.Attempt + 1
		if !sent.Done && sent.Command == string(command) {
			v := b.view
			if v == nil || !v.TakenAt.After(sent.SentAt) || !v.TakenAt.After(sent.LastMiss) {
				return false // no snapshot taken since the send (or since the last one counted)
			}
			sent.Misses++
			sent.LastMiss = v.TakenAt
			if sent.Misses < SlurmCommandMisses {
				node.SlurmCommand = sent
				b.putNode(node, fmt.Sprintf("reconciler: the Slurm snapshot of %s does not show %s (attempt %d) carried out on %s yet (%d of %d snapshots before it is sent again)",
					v.TakenAt.Format(time.RFC3339), command, sent.Attempt, node.Name, sent.Misses, SlurmCommandMisses))
				return true
			}
		}
	}
	b.slurm(command, []string{node.Name}, "", reason, "g"+strconv.FormatInt(node.Generation, 10), "attempt-"+strconv.Itoa(attempt))
	node.SlurmCommand = model.SentCommand{Command: string(command), Generation: node.Generation, Attempt: attempt, SentAt: b.now}
	b.putNode(node, fmt.Sprintf("reconciler: Slurm %s of %s sent (attempt %d): %s", command, node.Name, attempt, reason))
	return true
}

// commandDone marks a node's outstanding command carried out once a
// snapshot taken after it was sent, and newer than the node's record
// (class known), no longer asks for it (the outcome is not a Slurm
// command's). It reports whether it changed the node.
func (b *builder) commandDone(node *model.Node, outcome Outcome, class SlurmClass) bool {
	c := node.SlurmCommand
	if c.Attempt == 0 || c.Done || class == SlurmUnknown || outcome == OutcomeSlurmResume || outcome == OutcomeSlurmPowerDown {
		return false
	}
	if b.view == nil || !b.view.TakenAt.After(c.SentAt) {
		return false
	}
	node.SlurmCommand.Done = true
	return true
}
