// Package proc answers questions about local processes that the local
// system, the Slurm hooks and the local Slurm cluster all ask. It imports no
// other flexslurm package.
package proc

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Alive reports whether pid names a live process according to
// /proc/PID/status (Linux). A zombie (exited, not yet reaped) or dead task
// counts as gone, unlike with kill(pid, 0), which succeeds on a zombie.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if state, ok := strings.CutPrefix(sc.Text(), "State:"); ok {
			state = strings.TrimSpace(state)
			return !strings.HasPrefix(state, "Z") && !strings.HasPrefix(state, "X")
		}
	}
	return false
}
