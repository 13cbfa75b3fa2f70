package computesim

import (
	"context"
	"log/slog"
	"time"
)

// Expiry audit-log styles (Options.ExpiryLogStyle). Whether Compute Engine logs
// the end-of-run deletion of a resize-request VM as a system event or as a MIG
// delete is not documented (https://cloud.google.com/compute/docs/logging/audit-logging lists neither), so flexslurm must handle both.
const (
	// ExpiryLogDeferredDelete emits one System Event entry,
	// methodName compute.instances.deferredDelete, principal system@google.com,
	// operation.first and operation.last both true.
	ExpiryLogDeferredDelete = "deferredDelete"
	// ExpiryLogMIGDelete emits two Admin Activity entries,
	// methodName v1.compute.instances.delete, principal
	// PROJECT_NUMBER@cloudservices.gserviceaccount.com: one with
	// operation.first true when the deletion starts and one with
	// operation.last true when the VM is gone.
	ExpiryLogMIGDelete = "migDelete"
)

// DefaultProjectNumber is the project number used when Options.ProjectNumber
// is empty.
const DefaultProjectNumber = "123456789012"

// AuditTimestampAttr is the Pub/Sub message attribute a Logging sink sets to
// the entry's timestamp (RFC 3339 with nanoseconds; https://cloud.google.com/logging/docs/export/pubsub).
const AuditTimestampAttr = "logging.googleapis.com/timestamp"

// Options configures a simulator. The zero value is usable: any project,
// project number DefaultProjectNumber, seed 0, every delay zero, expiry logged
// as ExpiryLogDeferredDelete, no sink and no hooks.
type Options struct {
	// Project, if set, is the only project served; requests for any other
	// project get 404. If empty, every project is served.
	Project string
	// ProjectNumber appears in the cloudservices principal and in the
	// created-by metadata of MIG VMs. Default DefaultProjectNumber.
	ProjectNumber string
	// Seed makes IDs, operation names, generated instance names and audit
	// insert IDs deterministic: the same seed and the same sequence of calls
	// and ticks produce the same values.
	Seed uint64

	// CapacityDelay returns how long a resize request for machineType in zone
	// stays ACCEPTED before its VMs are provisioned, measured from the moment
	// it is accepted. Nil means zero: capacity is available at the first Tick
	// after acceptance.
	CapacityDelay func(zone, machineType string) time.Duration
	// AttemptInterval is how often a queued request short of capacity or
	// quota (SetShortage) is attempted again; each attempt replaces its
	// status.lastAttempt.error. Default DefaultAttemptInterval.
	AttemptInterval time.Duration
	// AcceptDelay is how long a resize request stays CREATING before it is
	// ACCEPTED. Default zero (accepted at the next Tick).
	AcceptDelay time.Duration
	// DeleteDelay is how long a VM being deleted (at the end of its run
	// duration or by an API call) stays visible with status STOPPING before it
	// is gone. During that time its name is not free. Default zero.
	DeleteDelay time.Duration
	// RepairDelay is how long a VM stays REPAIRING after reportHostAsFaulty
	// with disruptionSchedule IMMEDIATE before it is RUNNING again on a new
	// host. Default zero.
	RepairDelay time.Duration

	// ExpiryLogStyle selects how the end-of-run deletion of a VM is logged:
	// ExpiryLogDeferredDelete (default) or ExpiryLogMIGDelete. It is
	// Readings.RunEndAudit's older name: a non-empty Readings.RunEndAudit
	// wins.
	ExpiryLogStyle string
	// Readings chooses how each open point of Compute behaviour is
	// simulated (readings.go). The zero value is LenientReadings.
	Readings Readings
	// AuditSink receives every audit LogEntry the simulator writes, as the
	// LogEntry JSON a Logging sink publishes to Pub/Sub (message data), with
	// the message attributes {AuditTimestampAttr: RFC 3339 timestamp}. It is
	// called outside the simulator's lock, in log order, from the goroutine
	// that caused the entry (an API request, Tick or ExpireNow). An error is
	// logged and the entry dropped, as a sink would eventually drop it.
	AuditSink func(ctx context.Context, entry []byte, attrs map[string]string) error
	// CallerPrincipal is the principal of API calls, used in audit entries
	// and operation.user. Default flexslurm@PROJECT.iam.gserviceaccount.com.
	CallerPrincipal string

	// OnInstanceRunning is called, outside the lock, when a VM becomes
	// RUNNING: created by a resize request or a MIG resize, or back from
	// REPAIRING.
	OnInstanceRunning func(Instance)
	// OnInstanceDeleted is called, outside the lock, when a VM is gone. The
	// argument is the VM as it was last seen (status STOPPING).
	OnInstanceDeleted func(Instance)
	// OnInstanceStopping is called, outside the lock, when a VM begins
	// to be deleted (status STOPPING): at the end of its run duration or
	// by an API call. The guest is shutting down from then on.
	OnInstanceStopping func(Instance)
	// OnInstanceRepairing is called, outside the lock, when a VM goes
	// REPAIRING after reportHostAsFaulty.
	OnInstanceRepairing func(Instance)

	// Quotas sets quota limits by metric (e.g. INSTANCE_GROUP_MANAGERS: 2,
	// PREEMPTIBLE_NVIDIA_H100_GPUS: 16): regions.get and projects.get
	// report them, and the simulator enforces them (quotas.go). A metric
	// not set is reported with DefaultQuotaLimit and not enforced.
	Quotas map[string]float64
	// UnlistedQuotas are metrics regions.get and projects.get leave out of
	// quotas[], as Compute does for quotas it does not report there.
	UnlistedQuotas []string

	// Logger receives warnings (sink errors, reused request IDs). Default
	// slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.ProjectNumber == "" {
		o.ProjectNumber = DefaultProjectNumber
	}
	if o.Readings.RunEndAudit != "" {
		o.ExpiryLogStyle = o.Readings.RunEndAudit
	}
	if o.ExpiryLogStyle == "" {
		o.ExpiryLogStyle = ExpiryLogDeferredDelete
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
