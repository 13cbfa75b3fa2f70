package store

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/flexslurm/flexslurm/shared/model"
)

// The functions below are reflect.DeepEqual for the records a transaction
// compares (applyDiff), written out field by field: a transaction compares
// every record it loaded, and most are unchanged, which DeepEqual finds by
// walking them through reflection. Each returns true only when DeepEqual
// does (TestEqualMatchesDeepEqual changes every field of a filled record in
// turn, by reflection, so a field added and not compared fails it), and
// false only when DeepEqual does, so the same records are written.

// sameTime is reflect.DeepEqual for times: the same instant, monotonic
// reading and location (== compares the location pointer, DeepEqual the
// locations it points to; they differ only for equal locations held
// apart, which Equal's check keeps off the slow path).
func sameTime(a, b time.Time) bool {
	return a == b || (a.Equal(b) && reflect.DeepEqual(a, b))
}

// sameSlice is reflect.DeepEqual for slices of comparable elements with
// no time in them: both nil or both not, and the same elements.
func sameSlice[S ~[]E, E comparable](a, b S) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

// sameBytes is reflect.DeepEqual for byte slices: sameSlice, but compared
// by the runtime's memory comparison (which finds a slice shared with the
// other equal at once) instead of a byte at a time.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// sameMap is reflect.DeepEqual for maps of comparable values with no
// time in them.
func sameMap[M ~map[K]V, K, V comparable](a, b M) bool {
	return (a == nil) == (b == nil) && maps.Equal(a, b)
}

// samePtr is reflect.DeepEqual for pointers, given DeepEqual for what
// they point to.
func samePtr[T any](a, b *T, eq func(a, b *T) bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || eq(a, b)
}

func clusterEqual(a, b *model.Cluster) bool {
	return a.ID == b.ID &&
		a.SpecVersion == b.SpecVersion &&
		a.SpecSHA256 == b.SpecSHA256 &&
		a.Project == b.Project &&
		sameBytes(a.Spec, b.Spec) &&
		a.Node.Image == b.Node.Image &&
		sameMap(a.Node.PoolImages, b.Node.PoolImages) &&
		a.Node.ServiceAccount == b.Node.ServiceAccount &&
		a.Node.ConfServer == b.Node.ConfServer &&
		a.Node.MungeKeySecret == b.Node.MungeKeySecret &&
		a.Node.Home == b.Node.Home &&
		a.Node.Topics == b.Node.Topics &&
		a.Node.BinaryURL == b.Node.BinaryURL &&
		sameTime(a.CreatedAt, b.CreatedAt) &&
		sameTime(a.UpdatedAt, b.UpdatedAt)
}

func shortageEqual(a, b *model.Shortage) bool {
	return a.Class == b.Class && a.Code == b.Code && a.Message == b.Message &&
		a.Request == b.Request && sameTime(a.Since, b.Since)
}

func poolEqual(a, b *model.Pool) bool {
	return a.ID == b.ID &&
		a.Zone == b.Zone &&
		sameSlice(a.Zones, b.Zones) &&
		a.Region == b.Region &&
		a.MIG == b.MIG &&
		a.Template == b.Template &&
		a.TemplateBody == b.TemplateBody &&
		a.MinNodes == b.MinNodes &&
		a.MaxNodes == b.MaxNodes &&
		a.MaxRunDuration == b.MaxRunDuration &&
		a.RunDuration == b.RunDuration &&
		a.UseJobDuration == b.UseJobDuration &&
		a.Ready == b.Ready &&
		a.ProvisioningModel == b.ProvisioningModel &&
		a.MachineType == b.MachineType &&
		a.WorkloadPolicy == b.WorkloadPolicy &&
		a.PlacementDistance == b.PlacementDistance &&
		a.WorkloadPolicyRefused == b.WorkloadPolicyRefused &&
		a.WorkloadPolicyError == b.WorkloadPolicyError &&
		sameSlice(a.CapacityWaits, b.CapacityWaits) &&
		a.OverlapSeconds == b.OverlapSeconds &&
		a.MIGIncarnation == b.MIGIncarnation &&
		a.NodesBeyondMax == b.NodesBeyondMax &&
		a.Removed == b.Removed &&
		sameTime(a.BackoffUntil, b.BackoffUntil) &&
		a.BackoffAttempts == b.BackoffAttempts &&
		a.BackoffReason == b.BackoffReason &&
		a.Condition == b.Condition &&
		sameTime(a.ConditionSince, b.ConditionSince) &&
		samePtr(a.Shortage, b.Shortage, shortageEqual) &&
		a.BootstrapFailures == b.BootstrapFailures &&
		sameTime(a.BreakerOpenedAt, b.BreakerOpenedAt) &&
		sameTime(a.UpdatedAt, b.UpdatedAt)
}

// nodeEqual: a node record is comparable (no slice, map or pointer: this
// would not compile otherwise), so == implies DeepEqual and is most often
// true; DeepEqual decides otherwise (times in equal but distinct
// locations).
func nodeEqual(a, b *model.Node) bool { return *a == *b || reflect.DeepEqual(a, b) }

func jobEqual(a, b *model.Job) bool {
	return a.ID == b.ID &&
		a.Partition == b.Partition &&
		a.Pool == b.Pool &&
		a.State == b.State &&
		a.NodesWanted == b.NodesWanted &&
		sameSlice(a.Nodes, b.Nodes) &&
		a.Generation == b.Generation &&
		a.ResizeRequest == b.ResizeRequest &&
		a.Requeues == b.Requeues &&
		a.AwaitingSlurm == b.AwaitingSlurm &&
		a.Resubmits == b.Resubmits &&
		a.TimeLimit == b.TimeLimit &&
		a.Unfit == b.Unfit &&
		a.Comment == b.Comment &&
		sameTime(a.SubmittedAt, b.SubmittedAt) &&
		sameTime(a.UpdatedAt, b.UpdatedAt) &&
		a.Stage == b.Stage &&
		a.Reason == b.Reason &&
		sameTime(a.ReportedAt, b.ReportedAt) &&
		a.Incarnation == b.Incarnation &&
		sameTime(a.PreviousEnd, b.PreviousEnd)
}

func slurmNodeEqual(a, b *model.SlurmNode) bool {
	return a.State == b.State &&
		sameSlice(a.Flags, b.Flags) &&
		a.Reason == b.Reason &&
		a.Owner == b.Owner &&
		a.ReasonGeneration == b.ReasonGeneration &&
		a.ReasonHealth == b.ReasonHealth
}

func slurmJobEqual(a, b *model.SlurmJob) bool {
	return a.ID == b.ID &&
		a.State == b.State &&
		a.Reason == b.Reason &&
		a.Partition == b.Partition &&
		sameSlice(a.Nodes, b.Nodes) &&
		a.NodeCount == b.NodeCount &&
		a.TimeLimitSeconds == b.TimeLimitSeconds
}

func slurmConfigEqual(a, b *model.SlurmConfigCheck) bool {
	return a.SpecSHA256 == b.SpecSHA256 && sameSlice(a.Divergences, b.Divergences)
}

func slurmViewEqual(a, b *model.SlurmView) bool {
	if a.Version != b.Version || !sameTime(a.TakenAt, b.TakenAt) || !sameTime(a.ReceivedAt, b.ReceivedAt) ||
		!samePtr(a.Config, b.Config, slurmConfigEqual) {
		return false
	}
	if (a.Nodes == nil) != (b.Nodes == nil) || len(a.Nodes) != len(b.Nodes) ||
		(a.Jobs == nil) != (b.Jobs == nil) || len(a.Jobs) != len(b.Jobs) {
		return false
	}
	for k, n := range a.Nodes {
		m, ok := b.Nodes[k]
		if !ok || !slurmNodeEqual(&n, &m) {
			return false
		}
	}
	for i := range a.Jobs {
		if !slurmJobEqual(&a.Jobs[i], &b.Jobs[i]) {
			return false
		}
	}
	return true
}
