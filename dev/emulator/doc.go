// Package emulator owns the lifecycle of the local Google Cloud emulators that
// flexslurm's tests and local runs use: the Firestore emulator and the Pub/Sub
// emulator from the Google Cloud CLI packages
// google-cloud-cli-firestore-emulator and google-cloud-cli-pubsub-emulator.
//
// It finds the installed emulators (Locate), starts each one directly as a
// Java process rather than through the gcloud wrapper, which would orphan the
// JVM when killed (StartFirestore, StartPubSub, Start), waits until it
// answers, and stops it without leaving any process behind (Process.Stop).
// RunWith and Main run a command with both emulators up; they back
// `flexslurm emulators run -- go test ./...` and `flexslurm emulators start`.
//
// Every emulator child runs in its own process group, so a Ctrl-C typed at
// the terminal reaches only the parent, which then stops the children in
// order. On Linux each child also gets SIGKILL if the parent dies without
// stopping it. Liveness is read from /proc/PID/status; a zombie counts as
// gone. Other operating systems are not supported: Start* returns
// ErrUnsupportedPlatform there.
//
// This package imports no other flexslurm package.
package emulator
