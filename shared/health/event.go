package health

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
)

// EventFields identify where and when a check ran, for its health.failure
// event.
type EventFields struct {
	Cluster    string    // cluster id
	Node       string    // Slurm node name
	Generation int64     // node generation the check ran on (0 = unknown)
	VMName     string    // Compute Engine instance name, if known
	JobID      string    // Slurm job id, "" when no job was involved
	JobState   string    // "pending", "requeued", "running" or ""
	CheckedAt  time.Time // when the check finished
}

// FailureEvent builds the health.failure payload of a FAIL result: the
// verdict, the bounded evidence (Result.Reasons), the node, its generation
// and the job. It returns an error for a result that is not FAIL (only
// failures are published) and for fields the Repair function would reject:
// the payload is checked with event.DecodeHealth before it is returned.
func (r Result) FailureEvent(f EventFields) (*event.Health, error) {
	if r.Verdict != Fail {
		return nil, fmt.Errorf("only FAIL results are published as health.failure events, this one is %s", r.Verdict)
	}
	h := &event.Health{
		Header:     event.Header{Version: event.SchemaVersion, Type: event.TypeHealthFailure, Cluster: f.Cluster},
		Node:       f.Node,
		Generation: f.Generation,
		VMName:     f.VMName,
		JobID:      f.JobID,
		JobState:   f.JobState,
		Verdict:    string(Fail),
		Reasons:    bound(r.Reasons),
		CheckedAt:  f.CheckedAt.UTC(),
	}
	data, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encoding health.failure event: %w", err)
	}
	if _, err := event.DecodeHealth(data); err != nil {
		return nil, fmt.Errorf("health.failure event for node %q: %w", f.Node, err)
	}
	return h, nil
}
