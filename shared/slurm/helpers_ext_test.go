package slurm_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/slurm"
)

func errorsIsNotFound(err error) bool { return errors.Is(err, slurm.ErrNotFound) }

// processesOf returns the live processes named comm whose environment says
// they run for node.
func processesOf(node, comm string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		if strings.TrimSpace(string(c)) != comm {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if bytes.Contains(env, []byte("SLURMD_NODENAME="+node+"\x00")) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reads /proc/PID/status: a zombie is not alive.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if st, ok := strings.CutPrefix(l, "State:"); ok {
			st = strings.TrimSpace(st)
			return !strings.HasPrefix(st, "Z") && !strings.HasPrefix(st, "X")
		}
	}
	return false
}
