package api_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/flexslurm/flexslurm/dev/harness"
	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/api"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// TestFirestoreCreateOperationDone runs create → operations.get → done with
// the functions' records and the API's operations in the Firestore
// emulator, and answers operations.get from a second server over the same
// database: what another function instance would see. It skips (loudly)
// without the emulator.
func TestFirestoreCreateOperationDone(t *testing.T) {
	testenv.Firestore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := firestore.NewClient(ctx, testenv.Project())
	if err != nil {
		t.Fatalf("connecting to the Firestore emulator: %v", err)
	}
	defer c.Close()
	fs := store.NewFirestoreFromClient(c, store.WithRoot(testenv.UniqueID(t)+"_"))
	h, err := harness.New(ctx, harness.Options{Store: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	newServer := func(q *queue) *api.Server {
		return api.New(api.Deps{
			Store: fs, State: fs, Publisher: q, Project: project,
			NodeSettings: func(_ context.Context, c *spec.Cluster) (nodeconfig.Settings, error) { return settings(c), nil },
			Repair:       api.RunnerRepair(h.Runner),
			Log:          slog.New(slog.DiscardHandler),
		})
	}
	e := &env{t: t, ctx: ctx, h: h, q: &queue{}}
	e.srv = newServer(e.q)
	op := e.create("flexvm", example(t))
	if got := e.operation(op); got["done"] != nil {
		t.Fatalf("done before ScaleUp applied the spec: %v", got)
	}
	e.deliver()
	// Another instance: nothing in memory, everything from Firestore.
	other := &env{t: t, ctx: ctx, h: h, q: &queue{}}
	other.srv = newServer(other.q)
	got := other.operation(op)
	if got["done"] != true || got["error"] != nil || str(got, "response", "name") != "projects/flexslurm-demo/locations/us-central1/modelDevelopmentClusters/flexvm" {
		t.Fatalf("operations.get on another instance: %v", got)
	}
	stored, err := fs.Operation(ctx, str(op, "name")[len("projects/flexslurm-demo/locations/us-central1/operations/"):])
	if err != nil || !stored.Done || stored.ExpireAt.IsZero() {
		t.Fatalf("stored operation: %+v %v", stored, err)
	}
	if g := other.do("GET", base+"/flexvm", nil); g.code != 200 || str(g.body, "clusterStatus", "state") != "RUNNING" {
		t.Fatalf("get on another instance: %s", g.raw)
	}
}
