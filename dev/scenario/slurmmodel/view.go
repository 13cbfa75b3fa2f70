package slurmmodel

import (
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
)

// Command is one Slurm command flexslurm published (event.SlurmCommand),
// as the agent received it; Raw is the whole payload.
type Command struct {
	At      time.Time
	ID      string
	Command event.SlurmOp
	Nodes   []string
	Job     string
	Reason  string
	Raw     map[string]any
}

// SuspendTime is slurm.conf's SuspendTime in force (its default when the
// scenario sets none).
func (m *Model) SuspendTime() time.Duration { return m.cfg.SuspendTime.D() }

// Node returns a node the model knows.
func (m *Model) Node(name string) (*Node, bool) {
	n, ok := m.nodes[name]
	return n, ok
}

// Job returns a job submitted to the model.
func (m *Model) Job(id string) (*Job, bool) {
	j, ok := m.jobs[id]
	return j, ok
}

// State is the node's state as scontrol prints it (IDLE+CLOUD+POWERED_DOWN).
func (n *Node) State() string { return n.state() }

// Reason is the node's reason ("" if none).
func (n *Node) Reason() string { return n.reason }

// Flag reports whether the node has a state flag (DRAIN, POWERED_DOWN…).
func (n *Node) Flag(f string) bool { return n.flags[f] }

// Static reports whether the node is static: below its pool's
// min_node_count, never suspended by Slurm.
func (n *Node) Static() bool { return n.static }

// JobID is the job allocated to the node ("" if none; the first of them
// when jobs share it by GPUs).
func (n *Node) JobID() string { return n.job }

// JobIDs are the jobs allocated to the node, in allocation order.
func (n *Node) JobIDs() []string {
	if n.job == "" {
		return nil
	}
	return append([]string{n.job}, n.shared...)
}

// GPUs is the node's GRES gpu count, and GPUsUsed what its jobs hold.
func (n *Node) GPUs() int     { return n.gpus }
func (n *Node) GPUsUsed() int { return n.gpusUsed }

// GPUs is the GPUs per node the job asked for (0: whole nodes).
func (j *Job) GPUs() int { return j.gpus }

// Nodes are the nodes allocated to the job (nil while none).
func (j *Job) Nodes() []string { return j.nodes }

// FreedAt is the last time a job on the node finished or was taken away.
func (n *Node) FreedAt() time.Time { return n.freedAt }

// UndrainedAt is the last time a resume lifted the node's DRAIN.
func (n *Node) UndrainedAt() time.Time { return n.undrainedAt }

// State is the job's state: PENDING, CONFIGURING, RUNNING, COMPLETED,
// CANCELLED, or REFUSED (sbatch refused it).
func (j *Job) State() string { return j.state }

// Active reports whether the job is pending, configuring or running.
func (j *Job) Active() bool { return j.active() }

// Comment is the job's Comment in Slurm.
func (j *Job) Comment() string { return j.comment }

// Restarts counts the job's requeues.
func (j *Job) Restarts() int { return j.restarts }

// EndAt is when the job ended (or, running, will end).
func (j *Job) EndAt() time.Time { return j.endAt }
