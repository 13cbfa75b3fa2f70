// Package api is the API function: the modelDevelopmentClusters REST
// surface (shared/api) as one HTTP entry point. Cloud Run admits only
// callers with the invoker role (deploy/api.tf); the handler itself does
// not authenticate.
//
// It is built on first use from the environment (shared/config, and
// FLEXSLURM_NODE_SETTINGS for the node settings `flexslurm apply` would
// read from a file) over the runner every function uses (shared/wire):
// the Firestore store, which also holds the API's operations, the Pub/Sub
// publisher of cluster specs, the Compute client that resolves images, and
// the repair decisions.
package api

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"

	sapi "github.com/flexslurm/flexslurm/shared/api"
	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/status"
	"github.com/flexslurm/flexslurm/shared/store"
	"github.com/flexslurm/flexslurm/shared/wire"
)

var (
	mu     sync.Mutex
	server http.Handler
)

// Entry is the deployed entry point (registered as "API").
func Entry(w http.ResponseWriter, r *http.Request) {
	h, err := handler(r.Context())
	if err != nil {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "{\"error\":{\"code\":503,\"message\":%q,\"status\":\"UNAVAILABLE\"}}\n", "the API is not configured: "+err.Error())
		return
	}
	h.ServeHTTP(w, r)
}

// handler builds the server once; a failed build is retried on the next
// request.
func handler(ctx context.Context) (http.Handler, error) {
	mu.Lock()
	defer mu.Unlock()
	if server != nil {
		return server, nil
	}
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	r, err := wire.Runner(ctx)
	if err != nil {
		return nil, err
	}
	s, err := Build(cfg, r, os.Getenv(sapi.EnvNodeSettings), os.Getenv(sapi.EnvLocalMetrics))
	if err != nil {
		return nil, err
	}
	server = s
	return s, nil
}

// Build builds the server over a runner whose store is Firestore.
// localMetrics is the local system's run directory (sapi.EnvLocalMetrics),
// "" when deployed.
func Build(cfg config.Config, r *apply.Runner, nodeSettings, localMetrics string) (*sapi.Server, error) {
	d := r.Deps()
	fs, ok := d.Store.(*store.Firestore)
	if !ok {
		return nil, fmt.Errorf("the API keeps its operations in Firestore; the runner's store is %T", d.Store)
	}
	if nodeSettings == "" {
		return nil, fmt.Errorf("%s is not set: the node settings (JSON, or a file) that flexslurm apply --node-settings reads", sapi.EnvNodeSettings)
	}
	ns, err := sapi.LoadNodeSettings(nodeSettings)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sapi.EnvNodeSettings, err)
	}
	cc, _ := d.Compute.(*gce.Client)
	var resolver sapi.ImageResolver
	if cc != nil {
		resolver = cc
	}
	deps := sapi.Deps{
		Store: fs, State: fs, Publisher: d.Publisher, Project: cfg.Project, Log: d.Log, StateNow: d.Clock.Now,
		NodeSettings: sapi.ResolvedNodeSettings(ns, resolver),
		Repair:       sapi.RunnerRepair(r),
	}
	// No Teardown: a function account may not delete VMs or templates
	// (docs/security.md); a deleted cluster's templates are removed by
	// `flexslurm teardown` (docs/api.md).
	if localMetrics != "" {
		// The local system: /metrics also serves what Cloud Monitoring
		// measures of a deployment.
		ps, ok := d.Publisher.(*pubsub.Client)
		if !ok {
			return nil, fmt.Errorf("%s: the dead letters are peeked through the Pub/Sub client; the runner's publisher is %T", sapi.EnvLocalMetrics, d.Publisher)
		}
		deps.Latencies = sapi.LogLatencies(sapi.EntryLogs(localMetrics)...)
		deps.DeadLetters = sapi.PeekDeadLetters(ps.SubscriptionAdmin(), cfg.Project, status.ConsumedTopics)
	}
	return sapi.New(deps), nil
}
