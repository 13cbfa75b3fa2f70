// Package wire builds the production dependencies of the functions from the
// environment (shared/config): the Firestore store, the Compute and Pub/Sub
// clients (universe domain honoured everywhere) and the runner. All four
// function packages are linked into every deployed image, so nothing is
// built in init: the first event builds it once and later events reuse it.
package wire

import (
	"context"
	"fmt"
	"os"
	"sync"

	"google.golang.org/api/option"

	"github.com/flexslurm/flexslurm/shared/apply"
	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/gce"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/logx"
	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/pubsub"
	"github.com/flexslurm/flexslurm/shared/store"
)

var (
	mu     sync.Mutex
	runner *apply.Runner
)

// Runner returns the process-wide runner, building it on first use. A
// failed build is retried on the next call (the event is redelivered).
func Runner(ctx context.Context) (*apply.Runner, error) {
	mu.Lock()
	defer mu.Unlock()
	if runner != nil {
		return runner, nil
	}
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	r, err := Build(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, err
	}
	runner = r
	return r, nil
}

// ClientOptions returns the Google client options of a configuration: the
// universe domain, and for Compute the simulator endpoint without
// authentication.
func ClientOptions(cfg config.Config, forCompute bool) []option.ClientOption {
	var opts []option.ClientOption
	if cfg.UniverseDomain != "" {
		opts = append(opts, option.WithUniverseDomain(cfg.UniverseDomain))
	}
	if forCompute && cfg.ComputeEndpoint != "" {
		opts = append(opts, option.WithEndpoint(cfg.ComputeEndpoint), option.WithoutAuthentication())
	}
	return opts
}

// Build builds a runner from a configuration.
func Build(ctx context.Context, cfg config.Config) (*apply.Runner, error) {
	log := logx.New(os.Stdout, cfg.LogLevel)
	st, err := store.NewFirestore(ctx, cfg.Project, cfg.FirestoreDatabase, ClientOptions(cfg, false)...)
	if err != nil {
		return nil, fmt.Errorf("creating Firestore client: %w", err)
	}
	cc, err := gce.New(ctx, cfg.Project, ClientOptions(cfg, true)...)
	if err != nil {
		return nil, fmt.Errorf("creating Compute clients: %w", err)
	}
	if err := cc.SetResizeRequestAPI(cfg.ResizeRequestAPI); err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvResizeRequestAPI, err)
	}
	cc.SetLogger(log)
	ps, err := pubsub.New(ctx, cfg.Project, ClientOptions(cfg, false)...)
	if err != nil {
		return nil, fmt.Errorf("creating Pub/Sub client: %w", err)
	}
	// Reports are verified with Google's idtoken (Google's certificates,
	// or the local simulator's when FLEXSLURM_IDENTITY_CERTS_URL says so).
	// There is no setting that turns verification off.
	v, err := identity.NewGoogle(ctx, cfg.IdentityCertsURL)
	if err != nil {
		return nil, err
	}
	if cfg.ControllerVM == "" {
		log.Warn("no controller VM configured: every job and node power report will be refused",
			"set", config.EnvControllerVM+"=zones/ZONE/instances/NAME")
	}
	if cfg.IdentityCertsURL != "" {
		log.Warn("identity tokens are verified with the keys of another issuer than Google (local system or tests only)",
			"certs_url", cfg.IdentityCertsURL)
	}
	return apply.New(apply.Deps{
		Store: st, Compute: cc, Publisher: ps, Clock: cfg.Clk(), Log: log,
		SlurmTopic: cfg.SlurmTopic, Project: cfg.Project, Policy: Policy(cfg),
		Identity: v, ControllerVM: cfg.ControllerVM,
	}), nil
}

// Policy is the decisions' Policy of a configuration: the environment's
// overrides, every other field zero, which plan.DefaultPolicy fills.
func Policy(cfg config.Config) plan.Policy {
	return plan.Policy{
		SnapshotMaxAge: cfg.SnapshotMaxAge, IdleTimeout: cfg.IdleTimeout, ObserveGrace: cfg.ObserveGrace,
		UnreportedDrainGrace:     cfg.UnreportedDrainGrace,
		RecreateAfterTermination: cfg.RecreateAfterTermination, MaxEventAge: cfg.MaxEventAge,
		OneNodePerRequest: cfg.ResizeRequestAPI == config.ResizeRequestAPICount,
		EndWarning:        cfg.EndWarning, EndSignal: cfg.EndSignal,
		RepairNodeLimit: cfg.RepairNodeLimit, RepairNodeWindow: cfg.RepairNodeWindow,
	}
}
