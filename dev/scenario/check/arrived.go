package check

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
)

// arrivedCapacity follows arrived_capacity_kept: capacity that arrives
// while its request is being cancelled serves the job (docs/design/
// convergence.md, "Capacity that arrives while its request is
// cancelled"). It holds the live VMs no node record has yet held running
// (capacity that came, not yet serving), each with the pending job that,
// at the last evaluation, flexslurm had assigned its node and could use
// it, per the newest fact; and the VMs flexslurm deleted while such a job
// could use them.
type arrivedCapacity struct {
	served  map[string]bool      // VM → a node record held it running
	live    map[string]arrivedVM // live VM not yet served → what could use it
	deleted map[string]deletedVM // VM deleted while a job could use it → when
	failed  map[string]bool      // VMs reported
}

type arrivedVM struct {
	node    string
	gen     int64
	mig     string
	created time.Time
	job     string // the pending job that could use it ("" none)
}

type deletedVM struct {
	arrivedVM
	at time.Time
}

func newArrivedCapacity() *arrivedCapacity {
	return &arrivedCapacity{served: map[string]bool{}, live: map[string]arrivedVM{}, deleted: map[string]deletedVM{}, failed: map[string]bool{}}
}

// arrivedCapacityKept lists the violations of arrived_capacity_kept: a VM
// of a node that no record had yet held running, which flexslurm deleted
// (its MIG deleted, or the VM by name) while a pending job flexslurm had
// assigned to that node could use it per the newest fact — flexslurm's
// record of the job, or the stored Slurm snapshot when taken after that
// record last changed, showing the job alive with the node among its nodes,
// before the event that deleted it and after — and for which node a new
// resize request was made (the job's or the node's own, naming a later
// generation of the node, created after the VM, up to an hour after its
// deletion): the job waited in the queue again for capacity it had. A VM
// deleted out of band, at its run's end or for a failed health check is not
// flexslurm's cancellation and is not counted.
func (r *Checker) arrivedCapacityKept(w world, now time.Time) []string {
	a := r.arrived
	st := r.state()
	for _, n := range st.Nodes {
		if n.Phase == model.PhaseRunning && n.VMName != "" {
			a.served[n.VMName] = true
		}
	}
	live := map[string]bool{}
	for _, vm := range w.ours {
		if vm.Status == "STOPPING" || a.served[vm.Name] {
			continue
		}
		node, _, _, gen, ok := naming.ParseVMName(vm.Name)
		if !ok {
			continue
		}
		live[vm.Name] = true
		a.live[vm.Name] = arrivedVM{node: node, gen: gen, mig: vm.MIG, created: vm.Created, job: r.usableBy(st, node)}
	}
	for name, v := range a.live {
		if live[name] {
			continue
		}
		delete(a.live, name)
		// The job could use it before the event that deleted it, and
		// still can after it: the decision that deleted it had not
		// learnt otherwise (the job placed elsewhere, ended).
		if a.served[name] || v.job == "" || r.usableBy(st, v.node) != v.job || !cancelEnded(st.Nodes[v.node], v.gen) || !r.deletedByFlexslurm(v.mig, now) {
			continue
		}
		a.deleted[name] = deletedVM{arrivedVM: v, at: now}
	}
	if len(a.deleted) == 0 {
		return nil
	}
	var out []string
	rrs := r.sim.ResizeRequestHistory()
	for name, d := range a.deleted {
		if now.Sub(d.at) > time.Hour {
			delete(a.deleted, name)
			continue
		}
		for _, rr := range rrs {
			if rr.Created.Before(d.created) {
				continue
			}
			// The job's own request, or the node's.
			again := false
			for _, in := range rr.Instances {
				if node, _, _, gen, ok := naming.ParseVMName(in); ok && node == d.node && gen > d.gen {
					again = strings.Contains(rr.Name, "-j"+d.job+"-g") || rr.Name == naming.NodeResizeRequest(d.node, gen)
				}
			}
			if !again || a.failed[name] {
				continue
			}
			a.failed[name] = true
			out = append(out, fmt.Sprintf("VM %s of node %s (created at %s) was deleted at %s while job %s, pending on the node, could use it, and resize request %s (created at %s) asked for the node again",
				name, d.node, lang.FormatDuration(d.created.Sub(r.start)), lang.FormatDuration(d.at.Sub(r.start)), d.job, rr.Name, lang.FormatDuration(rr.Created.Sub(r.start))))
		}
	}
	sort.Strings(out)
	return out
}

// usableBy returns the pending job (the first by id) that flexslurm
// assigned node and can use it, per the newest fact: its record names the
// node (or it is the job the node's current generation was requested for,
// not placed yet), and a Slurm snapshot taken after the record last changed
// shows it alive with the node among its nodes. The job must also be able
// to use it in fact: the Slurm model, when it knows the job, holds it
// waiting (not yet running) with the node among those it allocated it — a
// job Slurm holds pending without placing it there, or runs elsewhere, can
// use no VM of the node now, whatever flexslurm last heard.
func (r *Checker) usableBy(st *model.State, node string) string {
	var ids []string
	for id, j := range st.Jobs {
		if j.State != model.JobPending {
			continue
		}
		assigned := slices.Contains(j.Nodes, node)
		if n, ok := st.Nodes[node]; ok && n.JobID == id && len(j.Nodes) == 0 {
			assigned = true
		}
		if !assigned {
			continue
		}
		if v := st.Slurm; v != nil && v.TakenAt.After(j.UpdatedAt) {
			i := slices.IndexFunc(v.Jobs, func(sj model.SlurmJob) bool { return sj.ID == id })
			if i < 0 || !v.Jobs[i].State.Alive() || !slices.Contains(v.Jobs[i].Nodes, node) {
				continue
			}
		}
		if r.slurm != nil {
			if sj, known := r.slurm.Job(id); known && (!sj.Active() || sj.State() == "RUNNING" || !slices.Contains(sj.Nodes(), node)) {
				continue
			}
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	return ids[0]
}

// cancelEnded reports whether the node's generation gen ended by flexslurm
// giving up its capacity — released, a queue timeout, a job's end — or the
// node moved on to a later generation; not at the VM's run's end, for a
// health failure, or lost out of band.
func cancelEnded(n *model.Node, gen int64) bool {
	if n == nil {
		return false
	}
	if n.Generation > gen {
		return true
	}
	switch n.LastEnd {
	case model.EndReleased, model.EndTimeout, model.EndCancelled:
		return n.Generation == gen && !n.Phase.Serving()
	}
	return false
}

// deletedByFlexslurm reports whether flexslurm asked Compute to delete the
// VM by now: its MIG deleted, or deleteInstances on its MIG (a VM that came
// for a request is a member of the request's MIG, which flexslurm never
// deletes by instances.delete). flexslurm names every such call with a
// request id; a scenario's out-of-band deletions carry none.
func (r *Checker) deletedByFlexslurm(mig string, now time.Time) bool {
	if mig == "" {
		return false
	}
	for _, c := range r.sim.Calls() {
		if c.Time.After(now) || c.Status >= 300 || c.RequestID == "" {
			continue
		}
		switch {
		case c.Method == "DELETE" && strings.HasSuffix(c.Path, "/instanceGroupManagers/"+mig):
			return true
		case c.Method == "POST" && strings.HasSuffix(c.Path, "/instanceGroupManagers/"+mig+"/deleteInstances"):
			return true
		}
	}
	return false
}
