// Package teardown removes, for one cluster, everything flexslurm created in
// Compute Engine outside Terraform: resize requests, MIGs (and with them
// their VMs), VMs in no MIG, and instance templates. It is `flexslurm
// teardown`.
//
// What belongs to the cluster and in which order it goes is decided in
// shared/plan (PlanTeardown: the legacy pool MIG, and each MIG of one
// resize request that its name and description prove the cluster's);
// this package reads Compute, carries the plan out and reports. When
// Compute holds nothing of the cluster's, it asks Options.Records whether
// the cluster has a record: with none, the cluster is reported unknown
// (Report.Unknown), since a mistyped id must not pass for a cluster torn
// down. The order is the one in which nothing re-creates or leaks
// anything: queued resize requests are cancelled first (a cancelled request
// creates no VMs; cancel is only for ACCEPTED requests and delete only for
// inactive ones, https://cloud.google.com/compute/docs/instance-groups/manage-resize-requests-mig), then every request is deleted, then the MIGs
// (deleting a MIG deletes its VMs; Compute makes the deletion wait while a
// request is creating VMs), then the cluster's VMs in no MIG, then the
// templates, which Compute refuses to delete while a MIG uses them. Every
// operation is waited for. At the end Compute is listed again, the run waits
// (up to Options.Wait) for deletions still in progress, and anything of the
// cluster's still there, or that appeared meanwhile (flexslurm's functions
// still deployed), is reported.
//
// Every list is project-wide (aggregated lists over every zone and region,
// and every global template), not limited to the zones of the cluster's
// current spec: a pool removed from the spec, or a zone changed, must not
// hide its VMs.
//
// Mutations carry request ids derived from the run id and the resource, so a
// call retried within a run is performed once by Compute, and a later run
// (after something was re-created under the same name) is not mistaken for
// a retry of this one.
package teardown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/plan"
)

// Compute is the part of *gce.Client the teardown uses.
type Compute interface {
	ListInstanceTemplates(ctx context.Context) ([]gce.InstanceTemplate, error)
	ListMIGsAllScopes(ctx context.Context) ([]gce.MIGRef, error)
	ListInstancesAllZones(ctx context.Context, labels map[string]string) ([]gce.Instance, error)
	ListResizeRequests(ctx context.Context, zone, mig string) ([]gce.ResizeRequest, error)
	GetResizeRequest(ctx context.Context, zone, mig, name string) (gce.ResizeRequest, error)
	CancelResizeRequest(ctx context.Context, zone, mig, name, requestID string) error
	DeleteResizeRequest(ctx context.Context, zone, mig, name, requestID string) error
	DeleteMIG(ctx context.Context, zone, name, requestID string) error
	DeleteInstance(ctx context.Context, zone, name, requestID string) error
	DeleteInstanceTemplate(ctx context.Context, name, requestID string) error
	ListResourcePoliciesAllRegions(ctx context.Context) ([]gce.PolicyRef, error)
	DeleteWorkloadPolicy(ctx context.Context, region, name, requestID string) error
}

var _ Compute = (*gce.Client)(nil)

// Defaults of Options.
const (
	DefaultWait = 20 * time.Minute
	DefaultPoll = 5 * time.Second
	// DefaultParallel is the default of Options.Parallel.
	DefaultParallel = 8
)

// Options configures a teardown.
type Options struct {
	// Project is the project id, for the report only.
	Project string
	// Cluster is the cluster id (shared/spec's rule). Required.
	Cluster string
	// DryRun lists and plans, and changes nothing.
	DryRun bool
	// Wait bounds how long the run waits for a resize request still
	// CREATING to become cancellable and, at the end, for deletions in
	// progress. Default DefaultWait.
	Wait time.Duration
	// Poll is the interval between looks while waiting. Default
	// DefaultPoll.
	Poll time.Duration
	// Parallel bounds the Compute calls in flight within one step (resize
	// requests, MIGs, VMs, templates). Default DefaultParallel.
	Parallel int
	// RunID scopes the run's request ids; default a random UUID.
	RunID string
	// Log receives one line per action. Default slog.Default().
	Log *slog.Logger
	// Records, when set, is asked for the clusters flexslurm's state
	// holds, but only when Compute holds nothing of the cluster's: a
	// cluster id with neither resources nor a record is most likely
	// mistyped, and the report says so (Report.Unknown). Nil: not asked,
	// and such a cluster is reported unknown too.
	Records Records
}

// Records lists the cluster records flexslurm's state holds (shared/store's
// Store.Clusters).
type Records interface {
	Clusters(ctx context.Context) ([]string, error)
}

// Action is one thing the teardown did (or tried).
type Action struct {
	// Item is the resource.
	Item plan.TeardownItem
	// Verb is what was done, or tried: "cancelled", "deleted", "already
	// being deleted".
	Verb string
	// Err is why it failed; nil if it succeeded.
	Err error
}

// Report is the outcome of a teardown.
type Report struct {
	// Project and Cluster are what was torn down.
	Project, Cluster string
	// DryRun: nothing was changed; Plan is what would be done.
	DryRun bool
	// Plan is what was found and planned.
	Plan plan.TeardownPlan
	// Actions are what was done, in order (none in a dry run).
	Actions []Action
	// Remaining is what of the cluster's is still there at the end (in a
	// dry run: what the teardown would leave).
	Remaining []plan.TeardownItem
	// Found is false when Compute held nothing of the cluster's when the
	// run began (and every scope could be listed).
	Found bool
	// Record says, when nothing was Found, whether flexslurm's state
	// holds the cluster's record; Known are the clusters it holds, and
	// RecordErr why they could not be read.
	Record    RecordState
	Known     []string
	RecordErr error
}

// RecordState is what a teardown learnt of the cluster's record.
type RecordState int

// Record states.
const (
	// RecordNotAsked: something of the cluster's was found, or no Records
	// were given.
	RecordNotAsked RecordState = iota
	// RecordFound: flexslurm's state holds the cluster's record.
	RecordFound
	// RecordMissing: it does not.
	RecordMissing
	// RecordUnreadable: the records could not be read (RecordErr).
	RecordUnreadable
)

// Clean reports whether nothing of the cluster's is left (in a dry run:
// would be left).
func (r *Report) Clean() bool { return len(r.Remaining) == 0 }

// Unknown reports whether the cluster id names nothing that could be
// confirmed: Compute held nothing of the cluster's, and flexslurm's state
// holds no record of it (or could not be asked). A mistyped --cluster looks
// like this, and must not pass for a cluster torn down.
func (r *Report) Unknown() bool { return !r.Found && r.Record != RecordFound }

// Run tears cluster o.Cluster down (or, with o.DryRun, only plans it). It
// returns an error only when Compute could not be listed; failed actions
// and leftovers are in the report, which is then not Clean.
func Run(ctx context.Context, c Compute, o Options) (*Report, error) {
	if err := plan.CheckTeardownCluster(o.Cluster); err != nil {
		return nil, fmt.Errorf("listing cluster resources: %w", err)
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.RunID == "" {
		o.RunID = uuid.NewString()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	r := &runner{c: c, o: o, log: o.Log.With("cluster", o.Cluster)}
	before, err := r.inventory(ctx)
	if err != nil {
		return nil, err
	}
	p := plan.PlanTeardown(o.Cluster, before)
	rep := &Report{Project: o.Project, Cluster: o.Cluster, DryRun: o.DryRun, Plan: p, Found: !p.Empty()}
	if !rep.Found && o.Records != nil {
		rep.Known, rep.RecordErr = o.Records.Clusters(ctx)
		switch {
		case rep.RecordErr != nil:
			rep.Record = RecordUnreadable
		case slices.Contains(rep.Known, o.Cluster):
			rep.Record = RecordFound
		default:
			rep.Record = RecordMissing
		}
	}
	if o.DryRun {
		rep.Remaining = p.Left
		return rep, nil
	}
	r.phase(len(p.ResizeRequests), func(i int) { r.resizeRequest(ctx, p.ResizeRequests[i]) })
	r.phase(len(p.MIGs), func(i int) {
		m := p.MIGs[i]
		err := r.c.DeleteMIG(ctx, m.Location(), m.Name, r.requestID("delete-mig", m.Scope()+"/instanceGroupManagers/"+m.Name))
		r.record(migItem(m), "deleted", err)
	})
	r.phase(len(p.VMs), func(i int) {
		vm := p.VMs[i]
		err := r.c.DeleteInstance(ctx, vm.Zone, vm.Name, r.requestID("delete-instance", fmt.Sprintf("zones/%s/instances/%s/%d", vm.Zone, vm.Name, vm.ID)))
		verb := "deleted"
		if gce.IsNotReady(err) {
			verb, err = "already being deleted", nil
		}
		r.record(vmItem(vm), verb, err)
	})
	r.phase(len(p.Templates), func(i int) {
		t := p.Templates[i]
		err := r.c.DeleteInstanceTemplate(ctx, t.Name, r.requestID("delete-template", t.Path))
		r.record(plan.TeardownItem{Kind: plan.KindTemplate, Scope: "global", Name: t.Name}, "deleted", err)
	})
	r.phase(len(p.Policies), func(i int) {
		rp := p.Policies[i]
		err := r.c.DeleteWorkloadPolicy(ctx, rp.Region, rp.Name, r.requestID("delete-resource-policy", "regions/"+rp.Region+"/resourcePolicies/"+rp.Name))
		r.record(plan.TeardownItem{Kind: plan.KindPolicy, Scope: "regions/" + rp.Region, Name: rp.Name}, "deleted", err)
	})
	rep.Actions = r.actions
	remaining, err := r.settle(ctx, before)
	if err != nil {
		return rep, err
	}
	rep.Remaining = remaining
	return rep, nil
}

type runner struct {
	c   Compute
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	actions []Action
}

// phase runs step for items 0..n-1, at most Options.Parallel at a time, and
// returns once every one is done: a phase ends before the next begins. The
// phase's actions are then ordered by resource (a request's cancel stays
// before its delete), so the report does not depend on timing.
func (r *runner) phase(n int, step func(i int)) {
	r.mu.Lock()
	start := len(r.actions)
	r.mu.Unlock()
	sem := make(chan struct{}, r.o.Parallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			step(i)
		}()
	}
	wg.Wait()
	slices.SortStableFunc(r.actions[start:], func(a, b Action) int {
		return strings.Compare(a.Item.Scope+"/"+a.Item.Name, b.Item.Scope+"/"+b.Item.Name)
	})
}

func (r *runner) requestID(op, resource string) string {
	return naming.TeardownRequestID(r.o.RunID, op, resource)
}

func (r *runner) record(it plan.TeardownItem, verb string, err error) {
	r.mu.Lock()
	r.actions = append(r.actions, Action{Item: it, Verb: verb, Err: err})
	r.mu.Unlock()
	if err != nil {
		r.log.Error("teardown: failed", "kind", it.Kind, "scope", it.Scope, "name", it.Name, "err", err)
		return
	}
	r.log.Info("teardown: "+verb, "kind", it.Kind, "scope", it.Scope, "name", it.Name)
}

func migItem(m plan.TeardownMIG) plan.TeardownItem {
	return plan.TeardownItem{Kind: plan.KindMIG, Scope: m.Scope(), Name: m.Name}
}

func vmItem(vm plan.TeardownVM) plan.TeardownItem {
	return plan.TeardownItem{Kind: plan.KindVM, Scope: "zones/" + vm.Zone, Name: vm.Name}
}

func rrItem(rr plan.TeardownResizeRequest) plan.TeardownItem {
	return plan.TeardownItem{Kind: plan.KindResizeRequest, Scope: "zones/" + rr.Zone + "/instanceGroupManagers/" + rr.MIG, Name: rr.Name}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// resizeRequest cancels (if ACCEPTED) and deletes one resize request,
// waiting while it is CREATING, within Options.Wait.
func (r *runner) resizeRequest(ctx context.Context, rr plan.TeardownResizeRequest) {
	it := rrItem(rr)
	path := it.Scope + "/resizeRequests/" + rr.Name
	deadline := time.Now().Add(r.o.Wait)
	state := rr.State
	for {
		switch plan.TeardownResizeRequestStep(state) {
		case plan.RRGone:
			return
		case plan.RRDelete:
			r.record(it, "deleted", r.c.DeleteResizeRequest(ctx, rr.Zone, rr.MIG, rr.Name, r.requestID("delete-rr", path)))
			return
		case plan.RRCancel:
			err := r.c.CancelResizeRequest(ctx, rr.Zone, rr.MIG, rr.Name, r.requestID("cancel-rr", path))
			switch {
			case err == nil:
				r.record(it, "cancelled", nil)
			case errors.Is(err, gce.ErrNotCancellable):
				// It left the queue meanwhile (provisioned, failed or gone):
				// look again.
			case gce.Classify(err).Retryable() && time.Now().Before(deadline):
				if sleep(ctx, r.o.Poll) != nil {
					r.record(it, "cancelled", err)
					return
				}
			default:
				r.record(it, "cancelled", err)
				return
			}
		case plan.RRWait:
			if !time.Now().Before(deadline) {
				r.record(it, "deleted", fmt.Errorf("still %s after %v: cannot be cancelled or deleted yet", state, r.o.Wait))
				return
			}
			if err := sleep(ctx, r.o.Poll); err != nil {
				r.record(it, "deleted", err)
				return
			}
		}
		got, err := r.c.GetResizeRequest(ctx, rr.Zone, rr.MIG, rr.Name)
		switch {
		case gce.IsNotFound(err):
			state = ""
		case err != nil:
			r.record(it, "deleted", err)
			return
		default:
			state = got.State
		}
	}
}

// inventory lists what bears on the cluster. Unreachable scopes are noted in
// the inventory, not returned as errors.
func (r *runner) inventory(ctx context.Context) (plan.TeardownInventory, error) {
	var inv plan.TeardownInventory
	unreachable := func(err error) error {
		var ue *gce.UnreachableError
		if errors.As(err, &ue) {
			inv.Unreachable = append(inv.Unreachable, ue.Scopes...)
			return nil
		}
		return err
	}
	tpls, err := r.c.ListInstanceTemplates(ctx)
	if err != nil {
		return inv, fmt.Errorf("listing cluster resources: %w", err)
	}
	for _, t := range tpls {
		inv.Templates = append(inv.Templates, plan.TeardownTemplate{Name: t.Name, Path: t.Path, Labels: t.Labels})
	}
	migs, err := r.c.ListMIGsAllScopes(ctx)
	if err = unreachable(err); err != nil {
		return inv, fmt.Errorf("listing cluster resources: %w", err)
	}
	for _, m := range migs {
		inv.MIGs = append(inv.MIGs, plan.TeardownMIG{Zone: m.Zone, Region: m.Region, Name: m.Name, Templates: m.Templates, Description: m.Description})
	}
	owned, _ := plan.TeardownOwnedMIGs(r.o.Cluster, inv.Templates, inv.MIGs)
	for _, m := range owned {
		rrs, err := r.c.ListResizeRequests(ctx, m.Location(), m.Name)
		if gce.IsNotFound(err) {
			continue // deleted since it was listed
		}
		if err != nil {
			return inv, fmt.Errorf("listing cluster resources: %w", err)
		}
		for _, rr := range rrs {
			inv.ResizeRequests = append(inv.ResizeRequests, plan.TeardownResizeRequest{Zone: rr.Zone, MIG: rr.MIG, Name: rr.Name, State: rr.State})
		}
	}
	rps, err := r.c.ListResourcePoliciesAllRegions(ctx)
	if err != nil {
		return inv, fmt.Errorf("listing cluster resources: %w", err)
	}
	for _, rp := range rps {
		inv.Policies = append(inv.Policies, plan.TeardownPolicy{Region: rp.Region, Name: rp.Name, Description: rp.Description})
	}
	vms, err := r.c.ListInstancesAllZones(ctx, plan.TeardownClusterLabels(r.o.Cluster))
	if err = unreachable(err); err != nil {
		return inv, fmt.Errorf("listing cluster resources: %w", err)
	}
	for _, v := range vms {
		inv.VMs = append(inv.VMs, plan.TeardownVM{Zone: v.Zone, Name: v.Name, ID: v.ID, Status: v.Status, Labels: v.Labels, MIG: v.MIG})
	}
	return inv, nil
}

// settle lists Compute again until nothing the run removed is still on its
// way out (VMs being deleted), or Options.Wait passes, and returns what of
// the cluster's remains.
func (r *runner) settle(ctx context.Context, before plan.TeardownInventory) ([]plan.TeardownItem, error) {
	removed := map[string]bool{}
	for _, a := range r.actions {
		if a.Err == nil && a.Verb != "cancelled" {
			removed[a.Item.Kind+" "+a.Item.Scope+"/"+a.Item.Name] = true
		}
	}
	for _, vm := range plan.PlanTeardown(r.o.Cluster, before).MIGVMs {
		if removed[plan.KindMIG+" zones/"+vm.Zone+"/"+vm.MIG] {
			removed[plan.KindVM+" zones/"+vm.Zone+"/"+vm.Name] = true
		}
	}
	deadline := time.Now().Add(r.o.Wait)
	for {
		after, err := r.inventory(ctx)
		if err != nil {
			return nil, err
		}
		left := plan.TeardownRemaining(r.o.Cluster, before, after)
		onItsWay := 0
		for _, it := range left {
			if removed[it.Kind+" "+it.Scope+"/"+it.Name] && !strings.HasPrefix(it.Note, "appeared") {
				onItsWay++
			}
		}
		if onItsWay == 0 || !time.Now().Before(deadline) {
			return left, nil
		}
		r.log.Info("teardown: waiting for deletions in progress", "resources", onItsWay)
		if err := sleep(ctx, r.o.Poll); err != nil {
			return left, nil
		}
	}
}

// Write prints the report for an operator.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	head := fmt.Sprintf("Teardown of cluster %s", r.Cluster)
	if r.Project != "" {
		head += " in project " + r.Project
	}
	if r.DryRun {
		head += " (dry run: nothing was changed)"
	}
	fmt.Fprintln(&b, head)
	if r.DryRun {
		fmt.Fprintln(&b, "\nWould remove, in this order:")
		n := 0
		for _, rr := range r.Plan.ResizeRequests {
			verb := "delete"
			switch plan.TeardownResizeRequestStep(rr.State) {
			case plan.RRCancel:
				verb = "cancel, then delete"
			case plan.RRWait:
				verb = "wait until it can be cancelled, cancel, then delete"
			}
			fmt.Fprintf(&b, "  %s (%s): %s\n", rrItem(rr), rr.State, verb)
			n++
		}
		members := map[string][]string{}
		for _, vm := range r.Plan.MIGVMs {
			members[vm.Zone+"/"+vm.MIG] = append(members[vm.Zone+"/"+vm.MIG], vm.Name)
		}
		for _, m := range r.Plan.MIGs {
			fmt.Fprintf(&b, "  %s: delete, with its VMs [%s]\n", migItem(m), strings.Join(members[m.Zone+"/"+m.Name], " "))
			n++
		}
		for _, vm := range r.Plan.VMs {
			fmt.Fprintf(&b, "  %s (%s): delete\n", vmItem(vm), vm.Status)
			n++
		}
		for _, t := range r.Plan.Templates {
			fmt.Fprintf(&b, "  %s global/%s: delete\n", plan.KindTemplate, t.Name)
			n++
		}
		for _, rp := range r.Plan.Policies {
			fmt.Fprintf(&b, "  %s regions/%s/%s: delete\n", plan.KindPolicy, rp.Region, rp.Name)
			n++
		}
		if n == 0 {
			fmt.Fprintln(&b, "  nothing")
		}
	} else {
		fmt.Fprintln(&b, "\nDone, in this order:")
		for _, a := range r.Actions {
			if a.Err != nil {
				attempt := map[string]string{"cancelled": "cancel", "deleted": "delete"}[a.Verb]
				fmt.Fprintf(&b, "  %s: %s FAILED: %v\n", a.Item, attempt, a.Err)
				continue
			}
			fmt.Fprintf(&b, "  %s: %s\n", a.Item, a.Verb)
			if a.Item.Kind != plan.KindMIG {
				continue
			}
			for _, vm := range r.Plan.MIGVMs {
				if "zones/"+vm.Zone == a.Item.Scope && vm.MIG == a.Item.Name {
					fmt.Fprintf(&b, "    %s: deleted with it\n", vmItem(vm))
				}
			}
		}
		if len(r.Actions) == 0 {
			fmt.Fprintln(&b, "  nothing: nothing of the cluster's was found")
		}
	}
	if r.Unknown() {
		fmt.Fprintf(&b, "\nCluster %s is unknown: nothing of it was found in Compute Engine", r.Cluster)
		if r.Project != "" {
			fmt.Fprintf(&b, " in project %s", r.Project)
		}
		switch r.Record {
		case RecordMissing:
			known := "none"
			if len(r.Known) > 0 {
				known = strings.Join(r.Known, ", ")
			}
			fmt.Fprintf(&b, ", and flexslurm's state holds no record of it (clusters it holds: %s).\n", known)
		case RecordUnreadable:
			fmt.Fprintf(&b, ", and its record could not be read: %v.\n", r.RecordErr)
		default:
			fmt.Fprintln(&b, ", and its record was not looked up.")
		}
		fmt.Fprintln(&b, "Is --cluster right? A mistyped id tears nothing down, and the cluster's VMs keep running.")
	} else if r.Clean() {
		if r.DryRun {
			fmt.Fprintf(&b, "\nNothing of cluster %s would be left.\n", r.Cluster)
		} else {
			fmt.Fprintf(&b, "\nNothing of cluster %s is left in Compute Engine.\n", r.Cluster)
		}
	} else {
		if r.DryRun {
			fmt.Fprintf(&b, "\nWould be left (%d):\n", len(r.Remaining))
		} else {
			fmt.Fprintf(&b, "\nLeft (%d):\n", len(r.Remaining))
		}
		for _, it := range r.Remaining {
			fmt.Fprintf(&b, "  %s\n", it)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
