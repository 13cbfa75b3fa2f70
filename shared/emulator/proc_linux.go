package emulator

import (
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
