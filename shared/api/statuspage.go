package api

import (
	_ "embed"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/spec"
	"github.com/flexslurm/flexslurm/shared/store"
)

// The status page: one HTML file, no build step, that reads only what this
// API serves (the clusters of each location, and /status/clock) and draws
// each pool's nodes and their VMs on a timeline.
//
//go:embed status.html
var statusHTML string

var statusTmpl = template.Must(template.New("status").Parse(statusHTML))

func (s *Server) statusPage(w http.ResponseWriter, req *http.Request, path string) *Error {
	if path == "/status/clock" {
		writeJSON(w, http.StatusOK, map[string]any{"now": s.d.StateNow().UTC().Format(time.RFC3339Nano)})
		return nil
	}
	locs, e := s.locations(req)
	if e != nil {
		return e
	}
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := statusTmpl.Execute(w, map[string]string{"Project": s.d.Project, "Locations": strings.Join(locs, ",")}); err != nil {
		s.d.Log.Warn("status page", "flow", Flow, "err", err)
	}
	return nil
}

// locations are the regions of the stored clusters' specs.
func (s *Server) locations(req *http.Request) ([]string, *Error) {
	ids, err := s.d.Store.Clusters(req.Context())
	if err != nil {
		return nil, errorf(CodeUnavailable, "listing clusters: %v", err)
	}
	var out []string
	for _, id := range ids {
		st, err := s.d.Store.Read(req.Context(), store.Scope{Cluster: id})
		if err != nil || st.Cluster == nil {
			continue
		}
		if c, err := spec.Parse(st.Cluster.Spec); err == nil && c.Project == s.d.Project && !slices.Contains(out, c.Region) {
			out = append(out, c.Region)
		}
	}
	slices.Sort(out)
	return out, nil
}
