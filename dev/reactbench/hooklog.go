package reactbench

import (
	"bufio"
	"encoding/json"
	"io"
	"time"

	"github.com/flexslurm/flexslurm/shared/slurm"
)

// ResumeCall is one run of ResumeProgram, from the hook's own log.
type ResumeCall struct {
	Nodes  []string
	Called time.Time
	// NoJob are the nodes of the call for which the hook found no job
	// pending (a static node flexslurm powers up while its VM runs): it
	// asks Compute for nothing for them.
	NoJob map[string]bool
}

// ParseHookLog reads the controller-side hooks' log (hooks-USER.log, one
// JSON record a line) and returns every ResumeProgram run: the nodes of
// its argument and when Slurm started it (the "hook done" record's time
// minus its elapsed_ms).
func ParseHookLog(r io.Reader) ([]ResumeCall, error) {
	type rec struct {
		Time      time.Time `json:"time"`
		Message   string    `json:"message"`
		Hook      string    `json:"hook"`
		PID       int       `json:"pid"`
		Args      []string  `json:"args"`
		Nodes     string    `json:"nodes"`
		ElapsedMS float64   `json:"elapsed_ms"`
	}
	noJob := map[int]map[string]bool{}
	var out []ResumeCall
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var x rec
		if json.Unmarshal(sc.Bytes(), &x) != nil || x.Hook != "resume" {
			continue
		}
		switch x.Message {
		case "nodes resumed without a job: no job.pending for them":
			nodes, err := slurm.ExpandHostlist(x.Nodes)
			if err != nil {
				continue
			}
			if noJob[x.PID] == nil {
				noJob[x.PID] = map[string]bool{}
			}
			for _, n := range nodes {
				noJob[x.PID][n] = true
			}
		case "hook done":
			if len(x.Args) == 0 {
				continue
			}
			nodes, err := slurm.ExpandHostlist(x.Args[0])
			if err != nil {
				continue
			}
			called := x.Time.Add(-time.Duration(x.ElapsedMS * float64(time.Millisecond)))
			out = append(out, ResumeCall{Nodes: nodes, Called: called, NoJob: noJob[x.PID]})
			delete(noJob, x.PID)
		}
	}
	return out, sc.Err()
}
