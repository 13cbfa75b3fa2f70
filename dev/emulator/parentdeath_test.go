//go:build linux

package emulator

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a parent that starts both
// emulators, prints their pids and waits to be killed.
const helperEnv = "FLEXSLURM_EMULATOR_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "start-and-wait" {
		os.Exit(helperStartAndWait())
	}
	if _, err := Locate(); err != nil {
		// Printed whether or not -v is given.
		fmt.Fprintf(os.Stderr, "SKIP (loud): dev/emulator tests that run the emulators will skip:\n%v\n", err)
	}
	os.Exit(m.Run())
}

func helperStartAndWait() int {
	env, err := Start(context.Background(), EnvOptions{})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Printf("PIDS %d %d %s %s\n", env.Firestore.PID(), env.PubSub.PID(), env.Firestore.scratch, env.PubSub.scratch)
	time.Sleep(2 * time.Minute)
	_ = env.Stop()
	return 0
}

// TestParentDeathKillsEmulators kills a parent with SIGKILL, so that it
// cannot stop anything, and checks that its emulators die with it.
func TestParentDeathKillsEmulators(t *testing.T) {
	requireInstalled(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=start-and-wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "PIDS ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper said %q, %v", line, err)
	}
	var fsPID, psPID int
	var fsScratch, psScratch string
	if _, err := fmt.Sscanf(line, "PIDS %d %d %s %s", &fsPID, &psPID, &fsScratch, &psScratch); err != nil {
		t.Fatalf("parsing %q: %v", line, err)
	}
	// Nobody is left to remove the scratch directories.
	t.Cleanup(func() {
		_ = os.RemoveAll(fsScratch)
		_ = os.RemoveAll(psScratch)
	})
	if !alive(fsPID) || !alive(psPID) {
		t.Fatalf("emulators %d, %d not running before the parent is killed", fsPID, psPID)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for (alive(fsPID) || alive(psPID)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	requireGone(t, "firestore after parent death", fsPID)
	requireGone(t, "pubsub after parent death", psPID)
}
