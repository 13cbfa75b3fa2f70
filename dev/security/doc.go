// Package security holds flexslurm's attack suite: each test named
// TestAttack… replays one class of attack a user with a job, a node or the
// Slurm account could try, against the real functions (through the
// in-process harness, the Compute simulator and the memory store) and
// asserts that it is refused and changes nothing. Attacks on the hooks'
// spool, the node bootstrap, the spec's inputs and the identity tokens live
// beside the code they attack (shared/hooks, shared/node, shared/spec,
// shared/identity), under the same TestAttack… names; docs/security.md
// lists every one.
package security
