package scenario

import (
	"context"
	"time"

	"github.com/flexslurm/flexslurm/functions/reconcile"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Late decisions (late_decision steps). A reconcile pass reads the pool
// records, lists Compute pool by pool (apply.Runner.Observe: resize
// requests, VMs, MIGs), then decides in a store transaction with the
// clock's time (apply.Runner.Process). On a loaded instance the decision
// can come long after the lists, while other functions act. The runner
// plays that without touching the functions: the Compute client the
// functions use is wrapped (lateCompute), and when a late pass's lists
// end (its last pool listed), the runner processes everything due up to
// the lag's end — deliveries to every function (other reconcile passes
// among them, on time), the simulator's transitions, ticks, snapshots and
// the Slurm model — before the call returns; the pass then decides with
// the later time against its earlier lists.
//
// Nesting: a pass that starts while another one is late is on time (one
// loaded instance at a time), and the delivery queue keeps the crash
// planned for the late pass's delivery while the deliveries in between run
// (delivery.Queue.DeliverNext). A lag ends at the end of the runUntil it
// happens in (the next step's time, an advance's end) at the latest, so
// that steps keep their times.

// lateDecisions is the late_decision rule in force and the pass it
// follows.
type lateDecisions struct {
	active  bool
	lag     time.Duration
	until   time.Time // zero: until the end
	pass    *latePass // the late pass whose lists are being made
	lagging bool      // a late pass waits for its decision
	err     error     // what the run in between failed with
}

// latePass is a late pass while it lists.
type latePass struct {
	lastZone, lastMIG string // the last pool's: its lists end the pass's
	zone, mig         string // the pool being listed
}

func (l *lateDecisions) inForce(now time.Time) bool {
	return l.active && (l.until.IsZero() || now.Before(l.until))
}

// hasLateDecisions reports whether a scenario has a late_decision step
// (only then are the functions' Compute client and store watched).
func hasLateDecisions(f *File) bool {
	for _, s := range f.Steps {
		if s.LateDecision != nil {
			return true
		}
	}
	return false
}

// functionsCompute is the Compute client the functions use (through the
// fault layer): under late_decision steps, one that tells the runner where
// a pass's lists begin and end.
func (r *runner) functionsCompute(apply.Compute) apply.Compute {
	if hasLateDecisions(r.f) {
		return &lateCompute{Compute: r.client, r: r}
	}
	return r.client
}

// setLateDecision carries out a late_decision step; a later step replaces
// an earlier one.
func (r *runner) setLateDecision(s LateDecisionStep) {
	now := r.now()
	r.late.active, r.late.lag, r.late.until = true, s.Lag.D(), time.Time{}
	switch {
	case s.Until != nil:
		r.late.until = r.start.Add(s.Until.Offset)
	case s.For > 0:
		r.late.until = now.Add(s.For.D())
	}
	until := "the end"
	if !r.late.until.IsZero() {
		until = FormatDuration(r.late.until.Sub(r.start))
	}
	r.tracef("reconcile passes decide %s after their lists until %s", FormatDuration(s.Lag.D()), until)
}

// lateListing is called before a pool's first list call (its MIGs). A pass that starts listing while the rule is in force, and no
// other pass is late, is late: the pools it lists are those of the
// cluster's records (as Observe reads them just before).
func (r *runner) lateListing(ctx context.Context, zone, mig string) {
	l := &r.late
	if l.lagging {
		return
	}
	if l.pass == nil {
		if !l.inForce(r.now()) {
			return
		}
		st, err := r.mem.Read(ctx, store.Scope{Cluster: r.spec.ID, AllPoolRecords: true})
		if err != nil {
			r.note("late_decision: reading the pool records: %v", err)
			return
		}
		pools := st.SortedPools()
		if len(pools) == 0 || pools[0].Zone != zone || pools[0].MIG != mig {
			// Not a pass over this cluster's pools as the records have
			// them (another cluster's): on time.
			return
		}
		last := pools[len(pools)-1]
		l.pass = &latePass{lastZone: last.Zone, lastMIG: last.MIG}
	}
	l.pass.zone, l.pass.mig = zone, mig
}

// latePoolListed is called when a pool's lists end (its VMs listed, or an
// earlier list failed and Observe skips the pool). After the last pool's,
// a late pass waits for its lag.
func (r *runner) latePoolListed() {
	l := &r.late
	if l.lagging || l.pass == nil || l.pass.zone != l.pass.lastZone || l.pass.mig != l.pass.lastMIG {
		return
	}
	l.pass = nil
	listed := r.now()
	until := listed.Add(l.lag)
	if r.horizon.Before(until) {
		until = r.horizon
	}
	if !until.After(listed) {
		return
	}
	r.stats.LateDecisions++
	r.tracef("reconcile pass listed Compute: it decides at %s", FormatDuration(until.Sub(r.start)))
	l.lagging = true
	err := r.runUntil(until)
	l.lagging = false
	if err != nil && l.err == nil {
		l.err = err
	}
}

// lateUpdate is called before every store transaction: a reconcile
// transaction while a late pass is still listing means its lists ended
// where the runner did not see them end (the model no longer follows
// Observe), which is reported rather than passed over.
func (r *runner) lateUpdate(scope store.Scope) {
	if scope.EventKind != reconcile.Function.Flow || r.late.pass == nil {
		return
	}
	mig := r.late.pass.mig
	r.late.pass = nil
	r.note("late_decision: a reconcile pass decided before the runner saw its lists end (MIG %s listed last): that pass was not late", mig)
}

// lateCompute is the functions' Compute client under late_decision steps:
// it tells the runner where a pass's lists begin and end.
type lateCompute struct {
	apply.Compute
	r *runner
}

func (c *lateCompute) ListResizeRequests(ctx context.Context, zone, mig string) ([]gce.ResizeRequest, error) {
	rrs, err := c.Compute.ListResizeRequests(ctx, zone, mig)
	if err != nil && !gce.IsNotFound(err) {
		c.r.latePoolListed() // Observe skips the pool
	}
	return rrs, err
}

func (c *lateCompute) ListInstances(ctx context.Context, zone string, labels map[string]string) ([]gce.Instance, error) {
	vms, err := c.Compute.ListInstances(ctx, zone, labels)
	c.r.latePoolListed() // a pool's last list
	return vms, err
}

func (c *lateCompute) ListMIGs(ctx context.Context, zone, namePrefix string) ([]gce.MIG, error) {
	c.r.lateListing(ctx, zone, namePrefix) // a pool's first list
	migs, err := c.Compute.ListMIGs(ctx, zone, namePrefix)
	if err != nil {
		c.r.latePoolListed()
	}
	return migs, err
}
