// Package config is flexslurm's typed runtime configuration, read once from
// the environment of a function (set by the deployment, deploy/) or of the
// local system. Validate reports every problem at once.
//
// This package imports shared/clock only.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/clock"
)

// Environment variable names.
const (
	EnvProject                  = "GOOGLE_CLOUD_PROJECT"
	EnvUniverseDomain           = "GOOGLE_CLOUD_UNIVERSE_DOMAIN"
	EnvFirestoreDatabase        = "FLEXSLURM_FIRESTORE_DATABASE"
	EnvComputeEndpoint          = "FLEXSLURM_COMPUTE_ENDPOINT"
	EnvSlurmTopic               = "FLEXSLURM_SLURM_TOPIC"
	EnvClock                    = "FLEXSLURM_CLOCK"
	EnvLogLevel                 = "FLEXSLURM_LOG_LEVEL"
	EnvMaxEventAge              = "FLEXSLURM_MAX_EVENT_AGE"
	EnvSnapshotMaxAge           = "FLEXSLURM_SNAPSHOT_MAX_AGE"
	EnvIdleTimeout              = "FLEXSLURM_IDLE_TIMEOUT"
	EnvObserveGrace             = "FLEXSLURM_OBSERVE_GRACE"
	EnvUnreportedDrainGrace     = "FLEXSLURM_UNREPORTED_DRAIN_GRACE"
	EnvRecreateAfterTermination = "FLEXSLURM_RECREATE_AFTER_TERMINATION"
	EnvControllerVM             = "FLEXSLURM_CONTROLLER_VM"
	EnvIdentityCertsURL         = "FLEXSLURM_IDENTITY_CERTS_URL"
	EnvResizeRequestAPI         = "FLEXSLURM_RESIZE_REQUEST_API"
	EnvEndWarning               = "FLEXSLURM_END_WARNING"
	EnvEndSignal                = "FLEXSLURM_END_SIGNAL"
	EnvRepairNodeLimit          = "FLEXSLURM_REPAIR_NODE_LIMIT"
	EnvRepairNodeWindow         = "FLEXSLURM_REPAIR_NODE_WINDOW"
)

// Values of EnvResizeRequestAPI (the same as shared/gce's
// ResizeRequestAPI* constants; this package imports no client).
const (
	ResizeRequestAPIV1   = "v1"
	ResizeRequestAPIBeta = "beta"
	ResizeRequestAPIAuto = "auto"
	// ResizeRequestAPICount names no VM: each node is requested through
	// a resize request of its own, resizeBy 1, its VM named by its MIG.
	ResizeRequestAPICount = "count"
)

// endSignals are the signals EnvEndSignal may name: shared/event's
// Signals (this package imports nothing of flexslurm's but the clock;
// TestEndSignalsAreTheEventsSignals keeps them equal).
var endSignals = []string{"USR1", "USR2", "TERM", "INT", "HUP", "URG"}

// Topic ids (Pub/Sub), the same in deploy/ and the local system.
const (
	TopicJobs           = "job-pending"           // job lifecycle reports from the Slurm hooks → ScaleUp
	TopicClusterSpec    = "cluster-spec"          // cluster.applied from `flexslurm apply` → ScaleUp
	TopicExpiry         = "instance-expiry"       // Compute audit logs from the log sink → Expiry
	TopicHealthFailure  = "health-failure"        // failed health checks from the node hooks → Repair
	TopicReconcile      = "reconcile-tick"        // Cloud Scheduler → Reconcile
	TopicSlurmCommands  = "slurm-commands"        // commands for the Slurm agent, from every function
	TopicSlurmSnapshot  = "slurm-snapshot"        // the agent's periodic Slurm snapshot → Reconcile
	TopicCommandResults = "slurm-command-results" // the agent's command reports (operators, tests)
)

// Config is the runtime configuration.
type Config struct {
	// Project is the Google Cloud project (Compute, Firestore, Pub/Sub). Required.
	Project string
	// UniverseDomain is the Google Cloud universe, e.g. "s3nsapis.fr" for
	// S3NS; "" is googleapis.com.
	UniverseDomain string
	// FirestoreDatabase is the Firestore database id; "" is "(default)".
	FirestoreDatabase string
	// ComputeEndpoint points the Compute clients at another endpoint (the
	// local Compute simulator) and turns authentication off. "" in production.
	ComputeEndpoint string
	// SlurmTopic receives Slurm commands. Default "slurm-commands".
	SlurmTopic string
	// Clock is the scaled clock of the local system (clock.Scaled.String
	// form); nil means the wall clock.
	Clock *clock.Scaled
	// LogLevel is the minimum log level. Default INFO.
	LogLevel slog.Level
	// MaxEventAge drops events published longer ago (Go duration, e.g.
	// "1h"); 0 takes the default (1 h).
	MaxEventAge time.Duration
	// SnapshotMaxAge, IdleTimeout, ObserveGrace and UnreportedDrainGrace
	// override plan.Policy's (Go durations, 1s–2160h); 0 keeps
	// plan.DefaultPolicy's. The local system sets them in simulated time,
	// because Slurm there runs on the wall clock while flexslurm's clock
	// runs faster.
	SnapshotMaxAge, IdleTimeout, ObserveGrace, UnreportedDrainGrace time.Duration
	// RecreateAfterTermination ("true" or "false") turns plan.Policy's
	// make-before-break off: static nodes are then recreated after their
	// VM ends. The local system sets it, since a scaled clock inflates the
	// capacity waits make-before-break sizes its lead time from.
	RecreateAfterTermination bool
	// ControllerVM is the cluster's Slurm controller VM,
	// "zones/ZONE/instances/NAME" (or "projects/P/zones/ZONE/instances/NAME"):
	// the controller's reports (job.*, node.suspend, node.resume_failed)
	// are accepted only with its identity token. "" refuses them all.
	ControllerVM string
	// IdentityCertsURL replaces Google's certificates URL
	// (https://www.googleapis.com/oauth2/v3/certs) when identity tokens are
	// verified: for the local system and tests, whose simulated VMs sign
	// with a key of their own. "" in production.
	IdentityCertsURL string
	// ResizeRequestAPI is the Compute API version of the resize-request
	// calls: "v1", "beta" or "auto" (default: v1 first, beta for requests
	// that name their VMs once v1 refuses one, resizeBy for one-VM
	// requests once both refuse), or "count" (no names: one request per
	// node; docs/compute-contract.md, "Named VMs").
	ResizeRequestAPI string
	// EndWarning (Go duration, 1m–24h; "" or "0" off) and EndSignal (one
	// of event.Signals without SIG, default USR1) override plan.Policy's:
	// the jobs running on a node receive EndSignal this long before its VM
	// ends at its run duration (docs/user.md, "A warning before the end").
	EndWarning time.Duration
	EndSignal  string
	// RepairNodeLimit (an integer 1–100, or "none": -1) and
	// RepairNodeWindow (whole hours, 1h–720h) override plan.Policy's: a
	// node whose repairs within the window reached the limit is left
	// drained for an operator on its next failure
	// (docs/design/repair-limit.md). Zero: flexslurm's defaults.
	RepairNodeLimit  int
	RepairNodeWindow time.Duration
}

// FromEnv reads the configuration; getenv is os.Getenv in production.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Project:           strings.TrimSpace(getenv(EnvProject)),
		UniverseDomain:    strings.TrimSpace(getenv(EnvUniverseDomain)),
		FirestoreDatabase: strings.TrimSpace(getenv(EnvFirestoreDatabase)),
		ComputeEndpoint:   strings.TrimSpace(getenv(EnvComputeEndpoint)),
		SlurmTopic:        strings.TrimSpace(getenv(EnvSlurmTopic)),
		ControllerVM:      strings.TrimSpace(getenv(EnvControllerVM)),
		IdentityCertsURL:  strings.TrimSpace(getenv(EnvIdentityCertsURL)),
		ResizeRequestAPI:  strings.TrimSpace(getenv(EnvResizeRequestAPI)),
	}
	if c.ResizeRequestAPI == "" {
		c.ResizeRequestAPI = ResizeRequestAPIAuto
	}
	if c.SlurmTopic == "" {
		c.SlurmTopic = TopicSlurmCommands
	}
	var errs []error
	if v := getenv(EnvClock); v != "" {
		s, err := clock.ParseScaled(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvClock, err))
		}
		c.Clock = s
	}
	if v := getenv(EnvLogLevel); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want DEBUG, INFO, WARN or ERROR", EnvLogLevel, v))
		}
	}
	if v := getenv(EnvMaxEventAge); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > 7*24*time.Hour {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration between 1m and 168h", EnvMaxEventAge, v))
		}
		c.MaxEventAge = d
	}
	for _, o := range []struct {
		env string
		dst *time.Duration
	}{{EnvSnapshotMaxAge, &c.SnapshotMaxAge}, {EnvIdleTimeout, &c.IdleTimeout}, {EnvObserveGrace, &c.ObserveGrace}, {EnvUnreportedDrainGrace, &c.UnreportedDrainGrace}} {
		if v := getenv(o.env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second || d > 90*24*time.Hour {
				errs = append(errs, fmt.Errorf("%s=%q: want a duration between 1s and 2160h", o.env, v))
			}
			*o.dst = d
		}
	}
	if v := strings.TrimSpace(getenv(EnvEndWarning)); v != "" && v != "0" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > 24*time.Hour {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration between 1m and 24h, or 0 for none", EnvEndWarning, v))
		}
		c.EndWarning = d
	}
	c.EndSignal = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(getenv(EnvEndSignal))), "SIG")
	if c.EndSignal != "" && !slices.Contains(endSignals, c.EndSignal) {
		errs = append(errs, fmt.Errorf("%s=%q: want one of %s", EnvEndSignal, getenv(EnvEndSignal), strings.Join(endSignals, ", ")))
	}
	if v := strings.TrimSpace(getenv(EnvRepairNodeLimit)); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case v == "none":
			c.RepairNodeLimit = -1
		case err != nil || n < 1 || n > 100:
			errs = append(errs, fmt.Errorf("%s=%q: want a number of repairs between 1 and 100, or none for no limit", EnvRepairNodeLimit, v))
		default:
			c.RepairNodeLimit = n
		}
	}
	if v := strings.TrimSpace(getenv(EnvRepairNodeWindow)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Hour || d > 720*time.Hour || d%time.Hour != 0 || !strings.HasSuffix(v, "h") {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number of hours between 1h and 720h, e.g. 48h", EnvRepairNodeWindow, v))
		}
		c.RepairNodeWindow = d
	}
	if v := getenv(EnvRecreateAfterTermination); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", EnvRecreateAfterTermination, v))
		}
		c.RecreateAfterTermination = b
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Project == "" {
		errs = append(errs, fmt.Errorf("%s is not set: the Google Cloud project is required", EnvProject))
	}
	if c.ComputeEndpoint != "" {
		u, err := url.Parse(c.ComputeEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q is not an http(s) URL", EnvComputeEndpoint, c.ComputeEndpoint))
		}
	}
	if c.IdentityCertsURL != "" {
		u, err := url.Parse(c.IdentityCertsURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q is not an http(s) URL", EnvIdentityCertsURL, c.IdentityCertsURL))
		}
	}
	if c.ControllerVM != "" && !controllerVMRe.MatchString(c.ControllerVM) {
		errs = append(errs, fmt.Errorf("%s=%q is not zones/ZONE/instances/NAME (or projects/PROJECT/zones/ZONE/instances/NAME)", EnvControllerVM, c.ControllerVM))
	}
	switch c.ResizeRequestAPI {
	case "", ResizeRequestAPIV1, ResizeRequestAPIBeta, ResizeRequestAPIAuto, ResizeRequestAPICount:
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %s, %s, %s or %s", EnvResizeRequestAPI, c.ResizeRequestAPI, ResizeRequestAPIV1, ResizeRequestAPIBeta, ResizeRequestAPIAuto, ResizeRequestAPICount))
	}
	if c.UniverseDomain != "" && (strings.Contains(c.UniverseDomain, "/") || !strings.Contains(c.UniverseDomain, ".")) {
		errs = append(errs, fmt.Errorf("%s=%q is not a domain (e.g. s3nsapis.fr)", EnvUniverseDomain, c.UniverseDomain))
	}
	return errors.Join(errs...)
}

// controllerVMRe is the form of ControllerVM (shared/identity.ParseVM
// checks it again).
var controllerVMRe = regexp.MustCompile(`^(projects/[a-z0-9.:-]+/)?zones/[a-z]+(-[a-z0-9]+)+/instances/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Clk returns the configured clock.
func (c Config) Clk() clock.Clock {
	if c.Clock != nil {
		return c.Clock
	}
	return clock.Real{}
}
