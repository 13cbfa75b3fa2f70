package emulator

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/flexslurm/flexslurm/shared/proc"
)

func platformSupported() error { return nil }

// kill sends sig to pid, or to the process group -pid when pid is negative.
func kill(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// sysProcAttr puts a child in its own process group, so that a Ctrl-C typed
// at the terminal reaches only the parent, and has the kernel SIGKILL it if
// the parent dies without stopping it. Pdeathsig fires when the spawning OS
// thread exits; the Go runtime keeps its threads alive except when a
// goroutine exits while locked to one, which this package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// commandSysProcAttr puts the command run by RunWith in its own process
// group, so that signals can be forwarded to it and everything it started,
// exactly once, and kills it if the parent dies.
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func alive(pid int) bool { return proc.Alive(pid) }

// groupAlive reports whether any live process is in process group pgid.
func groupAlive(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid pgrp …
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		if f := strings.Fields(rest); len(f) > 2 && f[2] == want && alive(pid) {
			return true
		}
	}
	return false
}
