package teardown_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/teardown"
)

// describedMIG creates a zonal MIG with a description.
func (w *world) describedMIG(zone, name, template, description string) {
	w.t.Helper()
	if err := w.c.EnsureMIG(w.ctx, gce.MIGSpec{Zone: zone, Name: name, Template: template, Description: description}, ""); err != nil {
		w.t.Fatal(err)
	}
}

// TestTeardownRemovesRequestMIGs: with one MIG per resize request, the
// teardown removes every request MIG its name and description prove the
// cluster's — a queued request cancelled before its MIG is deleted, a
// provisioned one's VMs deleted with its MIG — and the legacy pool MIG
// beside them. A MIG named like one of the cluster's request MIGs whose
// description lies, on the cluster's template, is left and reported (with
// the template it uses); another cluster's MIG under the same name prefix
// is neither touched nor mentioned.
func TestTeardownRemovesRequestMIGs(t *testing.T) {
	w := newWorld(t)
	c1a3, c1h200 := naming.Labels("c1", "a3"), naming.Labels("c1", "h200")
	w.template("fs-c1-a3-11111111", ready, c1a3)
	w.template("fs-c1-h200-33333333", queued, c1h200)
	w.template("fs-c2-a3-55555555", ready, naming.Labels("c2", "a3"))

	// The legacy pool MIG, still serving a static node.
	w.mig(zoneA, "fs-c1-a3", "fs-c1-a3-11111111")
	w.request(zoneA, "fs-c1-a3", naming.NodeResizeRequest("c1-a3-0", 1), "c1-a3-0-g1")
	// A provisioned request in its own MIG.
	job := naming.JobResizeRequest("c1", "a3", "12", 1)
	jobMIG := naming.RequestMIG("c1", "a3", job)
	w.describedMIG(zoneA, jobMIG, "fs-c1-a3-11111111", naming.RequestMIGDescription("c1", "a3", job))
	w.request(zoneA, jobMIG, job, "c1-a3-1-g1", "c1-a3-2-g1")
	// A queued request in its own MIG, in another zone.
	queuedRR := naming.NodeResizeRequest("c1-h200-0", 2)
	queuedMIG := naming.RequestMIG("c1", "h200", queuedRR)
	w.describedMIG(zoneB, queuedMIG, "fs-c1-h200-33333333", naming.RequestMIGDescription("c1", "h200", queuedRR))
	w.request(zoneB, queuedMIG, queuedRR, "c1-h200-0-g2")
	// Named as the request MIG of job 13, described as job 12's.
	lying := naming.RequestMIG("c1", "a3", naming.JobResizeRequest("c1", "a3", "13", 1))
	w.describedMIG(zoneA, lying, "fs-c1-a3-11111111", naming.RequestMIGDescription("c1", "a3", job))
	// Another cluster's MIG under c1's request-MIG prefix, described as
	// c1's, on c2's template.
	foreign := naming.RequestMIG("c1", "a3", "rr-c2-a3-j7-g1")
	w.describedMIG(zoneA, foreign, "fs-c2-a3-55555555", naming.RequestMIGDescription("c1", "a3", "rr-c2-a3-j7-g1"))
	w.request(zoneA, foreign, "rr-c2-a3-j7-g1", "c2-a3-0-g1")
	w.waitFor(func() bool {
		return len(w.sim.Instances()) == 4 && slices.ContainsFunc(w.sim.ResizeRequests(), func(rr computesim.ResizeRequest) bool {
			return rr.Name == queuedRR && rr.State == gce.StateAccepted
		})
	})

	rep, out := w.run(true)
	for _, want := range []string{
		"resize request zones/europe-west4-b/instanceGroupManagers/" + queuedMIG + "/" + queuedRR + " (ACCEPTED): cancel, then delete",
		"MIG zones/us-central1-a/" + jobMIG + ": delete, with its VMs [c1-a3-1-g1 c1-a3-2-g1]",
		"MIG zones/europe-west4-b/" + queuedMIG + ": delete, with its VMs []",
		"MIG zones/us-central1-a/fs-c1-a3: delete, with its VMs [c1-a3-0-g1]",
		"MIG zones/us-central1-a/" + lying + ": uses only the cluster's templates, but its description names request " + job,
		"instance template global/fs-c1-a3-11111111: in use by MIG zones/us-central1-a/" + lying,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, foreign) || strings.Contains(out, "c2-") || !rep.Found || rep.Unknown() {
		t.Errorf("dry run: found %v, unknown %v; the report must not name %s or c2's VM:\n%s", rep.Found, rep.Unknown(), foreign, out)
	}

	rep, out = w.run(false)
	for _, a := range rep.Actions {
		if a.Err != nil {
			t.Errorf("action failed: %+v", a)
		}
	}
	want := state{
		VMs:       []string{"us-central1-a/c2-a3-0-g1 RUNNING"},
		MIGs:      []string{"us-central1-a/" + foreign, "us-central1-a/" + lying},
		Requests:  []string{foreign + "/rr-c2-a3-j7-g1 SUCCEEDED"},
		Templates: []string{"fs-c1-a3-11111111", "fs-c2-a3-55555555"},
	}
	if diff := cmp.Diff(want, w.state()); diff != "" {
		t.Errorf("what remains (-want +got):\n%s", diff)
	}
	var left []string
	for _, it := range rep.Remaining {
		left = append(left, it.Kind+" "+it.Name)
	}
	if diff := cmp.Diff([]string{"MIG " + lying, "instance template fs-c1-a3-11111111"}, left); diff != "" {
		t.Errorf("reported left (-want +got):\n%s\n%s", diff, out)
	}
	// The queued request was cancelled before its MIG went.
	var cancelAt, deleteAt int = -1, -1
	for i, c := range w.sim.Calls() {
		switch {
		case c.Method == "POST" && strings.HasSuffix(c.Path, "/instanceGroupManagers/"+queuedMIG+"/resizeRequests/"+queuedRR+"/cancel"):
			cancelAt = i
		case c.Method == "DELETE" && strings.HasSuffix(c.Path, "/instanceGroupManagers/"+queuedMIG):
			deleteAt = i
		}
	}
	if cancelAt < 0 || deleteAt < cancelAt {
		t.Errorf("cancel of %s at call %d, delete of its MIG at call %d: want the cancel first", queuedRR, cancelAt, deleteAt)
	}
}

// records is a Records answering a fixed list, or an error.
type records struct {
	ids []string
	err error
}

func (r records) Clusters(context.Context) ([]string, error) { return r.ids, r.err }

// TestTeardownUnknownCluster: a cluster id with nothing in Compute is
// reported unknown unless flexslurm's state holds its record, dry run or
// not; a cluster with resources is never unknown, and its record is not
// looked up.
func TestTeardownUnknownCluster(t *testing.T) {
	w := newWorld(t)
	w.template("fs-c1-a3-11111111", ready, naming.Labels("c1", "a3"))
	run := func(cluster string, dry bool, recs teardown.Records) (*teardown.Report, string) {
		t.Helper()
		rep, err := teardown.Run(w.ctx, w.c, teardown.Options{
			Project: project, Cluster: cluster, DryRun: dry, Records: recs, Poll: 20 * time.Millisecond, Wait: 5 * time.Second,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := rep.Write(&b); err != nil {
			t.Fatal(err)
		}
		return rep, b.String()
	}
	for _, dry := range []bool{true, false} {
		rep, out := run("flexvn", dry, records{ids: []string{"c1", "flexvm"}})
		if !rep.Unknown() || rep.Record != teardown.RecordMissing ||
			!strings.Contains(out, "Cluster flexvn is unknown: nothing of it was found in Compute Engine in project proj, and flexslurm's state holds no record of it (clusters it holds: c1, flexvm).") ||
			!strings.Contains(out, "Is --cluster right?") || strings.Contains(out, "Nothing of cluster flexvn") {
			t.Errorf("dry run %v, mistyped id: unknown %v, record %v\n%s", dry, rep.Unknown(), rep.Record, out)
		}
		rep, out = run("flexvn", dry, records{err: errors.New("permission denied")})
		if !rep.Unknown() || !strings.Contains(out, "its record could not be read: permission denied") {
			t.Errorf("dry run %v, records unreadable: unknown %v\n%s", dry, rep.Unknown(), out)
		}
		rep, out = run("flexvn", dry, nil)
		if !rep.Unknown() || !strings.Contains(out, "its record was not looked up") {
			t.Errorf("dry run %v, no records: unknown %v\n%s", dry, rep.Unknown(), out)
		}
		// A cluster whose record exists but that holds nothing (torn down
		// already, or never scaled up) is clean.
		rep, out = run("flexvm", dry, records{ids: []string{"c1", "flexvm"}})
		if rep.Unknown() || !rep.Clean() || !strings.Contains(out, "Nothing of cluster flexvm") {
			t.Errorf("dry run %v, recorded cluster with nothing: unknown %v clean %v\n%s", dry, rep.Unknown(), rep.Clean(), out)
		}
	}
	// A cluster with resources: found, its record not looked up.
	rep, out := run("c1", true, records{err: errors.New("must not be asked")})
	if rep.Unknown() || !rep.Found || rep.Record != teardown.RecordNotAsked || strings.Contains(out, "unknown") {
		t.Errorf("cluster with a template: unknown %v found %v record %v\n%s", rep.Unknown(), rep.Found, rep.Record, out)
	}
}
