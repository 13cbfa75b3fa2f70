package agent_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/dev/testenv"
	"github.com/flexslurm/flexslurm/shared/agent"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// TestRunDoesNotCreateItsSubscription: without CreateSubscription the
// agent creates nothing (its Terraform-granted role could not), and a
// missing subscription is one error naming it, on the Pub/Sub emulator.
func TestRunDoesNotCreateItsSubscription(t *testing.T) {
	testenv.PubSub(t)
	sub := testenv.UniqueID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := agent.Run(ctx, agent.Options{
		Spec: &spec.Cluster{ID: "flexvm"}, Project: testenv.Project(), Subscription: sub,
		CommandsTopic: testenv.UniqueID(t) + "-commands", SnapshotEvery: -1,
		LedgerPath: filepath.Join(t.TempDir(), "ledger.json"),
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	want := "subscription projects/" + testenv.Project() + "/subscriptions/" + sub + " does not exist"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Run = %v, want an error starting %q", err, want)
	}
	if ctx.Err() != nil {
		t.Fatal("Run only returned at its deadline")
	}
}
