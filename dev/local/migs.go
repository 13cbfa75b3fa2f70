package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/store"
)

// gcloudMIG is what `gcloud compute instance-groups managed list
// --format=json` prints of a MIG.
type gcloudMIG struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Zone        string `json:"zone"`
	TargetSize  int    `json:"targetSize"`
}

// migsThroughGcloud lists the project's MIGs as an operator would, with
// gcloud pointed at the Compute simulator (docs/compute-contract.md), and
// checks the layout: every MIG of the cluster is the MIG of one resize
// request (its name and description agree, naming.IsRequestMIG) holding
// that one request, and every node that serves does so from a MIG listed.
// It returns the lines to print and the problems found.
func (s *System) migsThroughGcloud(ctx context.Context) (lines, problems []string) {
	cfg, err := os.MkdirTemp("", "flexslurm-gcloud-")
	if err != nil {
		return nil, []string{"gcloud config directory: " + err.Error()}
	}
	defer os.RemoveAll(cfg)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gcloud", "compute", "instance-groups", "managed", "list", "--format=json", "--project="+s.Opts.Project, "--quiet")
	cmd.Env = append(os.Environ(), "CLOUDSDK_CONFIG="+cfg, "CLOUDSDK_AUTH_DISABLE_CREDENTIALS=true",
		"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE="+s.SimURL+"/compute/v1/", "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return nil, []string{fmt.Sprintf("gcloud compute instance-groups managed list: %v %s", err, stderr)}
	}
	var migs []gcloudMIG
	if err := json.Unmarshal(out, &migs); err != nil {
		return nil, []string{"gcloud's MIG list does not decode: " + err.Error()}
	}
	cluster := s.Spec.ID
	requests := map[string]int{}
	for _, rr := range s.Sim.ResizeRequests() {
		requests[rr.MIG]++
	}
	listed := map[string]bool{}
	for _, m := range migs {
		if !strings.HasPrefix(m.Name, "fs-"+cluster+"-") {
			continue
		}
		listed[m.Name] = true
		pool := ""
		if c, p, _, ok := naming.ParseRequestMIGDescription(m.Description); ok && c == cluster {
			pool = p
		}
		rr, ok := naming.IsRequestMIG(cluster, pool, m.Name, m.Description)
		if !ok {
			problems = append(problems, fmt.Sprintf("MIG %s (%q) is not the MIG of one resize request", m.Name, m.Description))
			continue
		}
		if n := requests[m.Name]; n != 1 {
			problems = append(problems, fmt.Sprintf("MIG %s holds %d resize requests, want its one (%s)", m.Name, n, rr))
		}
		lines = append(lines, fmt.Sprintf("%s  target size %d  resize request %s", m.Name, m.TargetSize, rr))
	}
	slices.Sort(lines)
	st, err := s.Store.Read(ctx, store.Scope{Cluster: cluster, AllPools: true})
	if err != nil {
		return lines, append(problems, "reading the records: "+err.Error())
	}
	for _, n := range st.Nodes {
		if n.Phase.Serving() && n.MIG != "" && !listed[n.MIG] {
			problems = append(problems, fmt.Sprintf("node %s serves from MIG %s, which gcloud does not list", n.Name, n.MIG))
		}
	}
	return lines, problems
}
