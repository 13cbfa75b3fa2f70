package apply

import (
	"context"
	"fmt"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/gce"
)

// aliveStatuses are the Compute statuses of a VM that has not ended: an
// audit entry saying it was deleted, stopped or ended at its run duration
// is not corroborated while Compute shows one of them
// (https://cloud.google.com/compute/docs/instances/instance-life-cycle).
var aliveStatuses = map[string]bool{
	"PROVISIONING": true, "STAGING": true, "RUNNING": true, "REPAIRING": true, "PENDING": true,
}

// CorroborateEnd asks Compute whether the VM an audit entry says ended
// really did, before the Expiry acts on the entry. An audit entry is a log
// entry, and identities other than Compute may write log entries in the
// project (the node account holds roles/logging.logWriter; whether Cloud
// Logging refuses a user-written entry under a cloudaudit log name is not
// settled by Google's pages). So the entry is refused (event.ErrRefused:
// logged, counted, acknowledged) while Compute shows the VM alive
// (aliveStatuses); a VM that is gone or stopping corroborates it. A
// failure to ask is transient: the event is redelivered. A genuine entry
// refused because it arrived before the VM left RUNNING loses nothing:
// the reconciler sees the VM gone on its next pass and ends the
// generation as the Expiry would have.
func (r *Runner) CorroborateEnd(ctx context.Context, a *event.Audit) error {
	vm, err := r.d.Compute.GetInstance(ctx, a.Zone, a.Instance)
	switch {
	case gce.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("%w: asking Compute whether %s ended: %w", ErrTransient, a.Instance, err)
	case aliveStatuses[vm.Status]:
		return fmt.Errorf("%w: %s says VM %s ended, but Compute shows it %s: not corroborated (the reconciler follows the VM)",
			event.ErrRefused, a.Method, a.Instance, vm.Status)
	}
	return nil
}
