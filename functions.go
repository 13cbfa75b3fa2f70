// Package flexslurm registers flexslurm's Cloud Functions entry points with
// functions-framework-go. The repository root is deployed once per function
// with --entry-point ScaleUp, Expiry, Repair, Reconcile or API (the Go buildpack
// builds the root package, which must import the framework itself).
// Decisions live in shared/; each function package is a thin handler.
package flexslurm

import (
	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/flexslurm/flexslurm/functions/api"
	"github.com/flexslurm/flexslurm/functions/expiry"
	"github.com/flexslurm/flexslurm/functions/reconcile"
	"github.com/flexslurm/flexslurm/functions/repair"
	"github.com/flexslurm/flexslurm/functions/scaleup"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/wire"
)

// Entry point names, as given to --entry-point and in deploy/.
const (
	EntryScaleUp   = "ScaleUp"
	EntryExpiry    = "Expiry"
	EntryRepair    = "Repair"
	EntryReconcile = "Reconcile"
	// EntryAPI is the HTTP function serving the modelDevelopmentClusters
	// REST surface (shared/api).
	EntryAPI = "API"
)

func init() {
	// Each event-driven function runs its events through the skeleton
	// every function shares (shared/apply Function), over the process's
	// runner, built from the environment on first use (shared/wire).
	functions.CloudEvent(EntryScaleUp, apply.Entry(wire.Runner, scaleup.Function))
	functions.CloudEvent(EntryExpiry, apply.Entry(wire.Runner, expiry.Function))
	functions.CloudEvent(EntryRepair, apply.Entry(wire.Runner, repair.Function))
	functions.CloudEvent(EntryReconcile, apply.Entry(wire.Runner, reconcile.Function))
	functions.HTTP(EntryAPI, api.Entry)
}
