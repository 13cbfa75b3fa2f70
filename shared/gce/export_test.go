package gce

import "time"

// SetMaxOperationWait sets the bound of each operation wait for a test and
// returns a function that restores it.
func SetMaxOperationWait(d time.Duration) (restore func()) {
	old := maxOperationWait
	maxOperationWait = d
	return func() { maxOperationWait = old }
}

// WaitOp is waitOp, for tests.
var WaitOp = waitOp
