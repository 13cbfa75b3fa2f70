package api

import (
	"bytes"
	"net/http"

	"github.com/flexslurm/flexslurm/shared/metrics"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/store"
)

// metricsPage serves GET /metrics: every cluster's gauges (shared/metrics,
// the names the log-based metrics of deploy/metrics.tf carry), the counts
// of the events kept, and each pool's recent capacity waits, in the
// Prometheus text format. Read at the functions' clock (StateNow).
func (s *Server) metricsPage(w http.ResponseWriter, req *http.Request) *Error {
	ctx := req.Context()
	ids, err := s.d.Store.Clusters(ctx)
	if err != nil {
		return errorf(CodeUnavailable, "listing clusters: %v", err)
	}
	now := s.d.StateNow()
	var samples []metrics.Sample
	var events []store.ClusterEvent
	var pools []*model.Pool
	clusterOf := map[*model.Pool]string{}
	for _, id := range ids {
		st, err := s.d.Store.Read(ctx, store.Scope{Cluster: id, AllPools: true})
		if err != nil {
			return errorf(CodeUnavailable, "reading cluster %s: %v", id, err)
		}
		samples = append(samples, metrics.PoolGauges(st, now)...)
		for _, p := range st.Pools {
			if !p.Removed {
				pools = append(pools, p)
				clusterOf[p] = id
			}
		}
		if s.d.Events == nil {
			continue
		}
		for after := ""; ; {
			page, err := s.d.Events.Events(ctx, id, store.EventFilter{After: after, Limit: store.MaxEventPage})
			if err != nil {
				return errorf(CodeUnavailable, "listing events of cluster %s: %v", id, err)
			}
			events = append(events, page...)
			if len(page) < store.MaxEventPage {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	var b bytes.Buffer
	if err := metrics.WritePrometheus(&b, samples, events, pools, func(p *model.Pool) string { return clusterOf[p] }); err != nil {
		return errorf(CodeInternal, "rendering metrics: %v", err)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
	return nil
}
