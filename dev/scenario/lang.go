package scenario

import (
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
)

// The scenario language (dev/scenario/lang) under this package's names,
// so that a caller loads, builds and runs a scenario with one import.

// Types of a scenario file (see package lang).
type (
	File                  = lang.File
	Simulator             = lang.Simulator
	CapacityDelay         = lang.CapacityDelay
	Delivery              = lang.Delivery
	Reconcile             = lang.Reconcile
	Slurm                 = lang.Slurm
	RandomFaults          = lang.RandomFaults
	Initial               = lang.Initial
	ForeignVM             = lang.ForeignVM
	Invariants            = lang.Invariants
	Within                = lang.Within
	Prefix                = lang.Prefix
	Step                  = lang.Step
	ApplyStep             = lang.ApplyStep
	JobStep               = lang.JobStep
	HealthStep            = lang.HealthStep
	PowerStep             = lang.PowerStep
	SnapshotStep          = lang.SnapshotStep
	SnapshotNode          = lang.SnapshotNode
	SnapshotJob           = lang.SnapshotJob
	TickStep              = lang.TickStep
	VMRef                 = lang.VMRef
	PoolRef               = lang.PoolRef
	FailResizeRequestStep = lang.FailResizeRequestStep
	SubmitStep            = lang.SubmitStep
	CancelStep            = lang.CancelStep
	DeliveryFaults        = lang.DeliveryFaults
	DeliveryRule          = lang.DeliveryRule
	DuplicateStep         = lang.DuplicateStep
	ReleaseStep           = lang.ReleaseStep
	CrashStep             = lang.CrashStep
	ComputeErrorStep      = lang.ComputeErrorStep
	ShortageStep          = lang.ShortageStep
	ListOmitStep          = lang.ListOmitStep
	LateDecisionStep      = lang.LateDecisionStep
	Watch                 = lang.Watch
	Check                 = lang.Check
	Count                 = lang.Count
	VMCheck               = lang.VMCheck
	NodeCheck             = lang.NodeCheck
	PoolCheck             = lang.PoolCheck
	JobCheck              = lang.JobCheck
	RRCheck               = lang.RRCheck
	CommandCheck          = lang.CommandCheck
	SlurmNodeCheck        = lang.SlurmNodeCheck
	SlurmJobCheck         = lang.SlurmJobCheck
	CounterCheck          = lang.CounterCheck
	Duration              = lang.Duration
	At                    = lang.At
	StringList            = lang.StringList
	ClusterRef            = lang.ClusterRef
	Records               = lang.Records
	Policy                = lang.Policy
)

// MaxFileBytes is the largest scenario file Load reads.
const MaxFileBytes = lang.MaxFileBytes

// Never is a duration longer than any run.
const Never = lang.Never

// ShortageCodes are the codes a shortage step accepts.
var ShortageCodes = lang.ShortageCodes

// Load reads, decodes and validates a scenario file (lang.Load).
func Load(path string) (*File, error) { return lang.Load(path) }

// Parse decodes and validates a scenario (lang.Parse).
func Parse(data []byte) (*File, error) { return lang.Parse(data) }

// Marshal encodes a scenario as YAML that Parse reads back (lang.Marshal).
func Marshal(f *File) ([]byte, error) { return lang.Marshal(f) }

// ParseDuration parses a scenario duration such as 90s, 2h30m or 7d
// (lang.ParseDuration).
func ParseDuration(s string) (time.Duration, error) { return lang.ParseDuration(s) }

// FormatDuration prints a duration as scenario files write it
// (lang.FormatDuration).
func FormatDuration(d time.Duration) string { return lang.FormatDuration(d) }
