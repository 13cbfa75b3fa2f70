package plan

// What one Compute listing may be trusted with.
//
// A list call that succeeds is not a complete, consistent picture: the
// public documentation of instances.list, instanceGroupManagers
// .listManagedInstances and instanceGroupManagerResizeRequests.list says
// nothing of their consistency with recent writes (the aggregated lists
// even answer with partial results, returnPartialSuccess and UNREACHABLE
// warnings, in the Compute v1 discovery document). The docs being silent,
// the reconciler fails safe:
//
//   - a VM missing from a listing is never taken for deleted on one
//     listing: a running node's VM (or the VM of a request seen SUCCEEDED)
//     is given up only after Policy.MissThreshold consecutive passes miss
//     it in the same generation (reconcile.go, OutcomeVMGone);
//   - a VM listed without its status or its creation time is not
//     classified at all that pass (an empty status would read as stopped
//     and have the VM deleted; a zero creation time would make any VM old
//     enough to delete as an orphan): its node is decided on the next pass
//     that lists it whole, and it is never deleted as an orphan or stray
//     from such a listing;
//   - a VM listed without its termination time keeps the one recorded.

// incompleteVM reports whether a listed VM lacks what a decision about it
// needs: its status or its creation time.
func incompleteVM(vm VM) bool {
	return vm.Status == "" || vm.Created.IsZero()
}
