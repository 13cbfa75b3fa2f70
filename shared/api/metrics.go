package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/shared/config"
	"github.com/flexslurm/flexslurm/shared/metrics"
	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/status"
	"github.com/flexslurm/flexslurm/shared/store"
)

// metricsPage serves GET /metrics: every cluster's gauges (shared/metrics,
// the names the log-based metrics of deploy/metrics.tf carry), the counts
// of the events kept, each pool's recent capacity waits and, where Deps
// provide them (the local system), the decision latencies and the
// dead-letter backlogs, in the Prometheus text format. Read at the
// functions' clock (StateNow).
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
	if s.d.Latencies != nil {
		hs, err := s.d.Latencies()
		if err != nil {
			// What was read is served; the line names what was not.
			s.d.Log.Warn("decision latencies not all read", "error", err.Error())
		}
		if err := metrics.WriteHistograms(&b, metrics.SampleDecisionLatency, "An event's arrival to its decision's last action, by cluster and flow.", metrics.SampleBounds, hs); err != nil {
			return errorf(CodeInternal, "rendering metrics: %v", err)
		}
	}
	if s.d.DeadLetters != nil {
		bls, err := s.d.DeadLetters(ctx)
		if err != nil {
			return errorf(CodeUnavailable, "measuring the dead-letter subscriptions: %v", err)
		}
		if err := metrics.WriteBacklogs(&b, bls); err != nil {
			return errorf(CodeInternal, "rendering metrics: %v", err)
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
	return nil
}

// EnvLocalMetrics names the local system's run directory, where each
// function's log is <entry>.log: set (by `flexslurm local`), the API
// function's /metrics also serves the decision latencies those logs hold
// (LogLatencies) and the dead-letter backlogs (PeekDeadLetters), which a
// deployment reads from Cloud Monitoring instead.
const EnvLocalMetrics = "FLEXSLURM_LOCAL_METRICS"

// LogLatencies returns a Deps.Latencies that reads the decision-latency
// lines of the log files, as the log-based metric
// flexslurm_decision_latency_seconds reads them from Cloud Logging (same
// filter, labels and buckets).
func LogLatencies(files ...string) func() ([]metrics.Histogram, error) {
	l := &metrics.LogSamples{Name: metrics.SampleDecisionLatency, Labels: []string{"cluster", "flow"}, Files: files}
	return l.Read
}

// EntryLogs are the log files of the local system's functions in dir
// (dev/local names each <entry>.log; the API's entry point is "API",
// whose reportFaultyNodes decides repairs too).
func EntryLogs(dir string) []string {
	var out []string
	for _, e := range []string{config.EntryScaleUp, config.EntryExpiry, config.EntryRepair, config.EntryReconcile, "API"} {
		out = append(out, filepath.Join(dir, e+".log"))
	}
	return out
}

// PeekDeadLetters returns a Deps.DeadLetters that counts the messages of
// each topic's dead-letter subscription (status.PeekDeadLetters, every
// topic at once: pulled, counted and handed back). A subscription that
// does not exist is left out.
func PeekDeadLetters(sub status.Subscriber, project string, topics []string) func(ctx context.Context) ([]metrics.Backlog, error) {
	return func(ctx context.Context) ([]metrics.Backlog, error) {
		depths := make([]status.Depth, len(topics))
		var wg sync.WaitGroup
		for i, t := range topics {
			wg.Go(func() {
				depths[i] = status.PeekDeadLetters(ctx, sub, project, []string{t}, status.PeekOptions{Wait: 500 * time.Millisecond})[0]
			})
		}
		wg.Wait()
		var out []metrics.Backlog
		var errs []error
		for _, d := range depths {
			switch {
			case d.Err != nil:
				errs = append(errs, d.Err)
			case !d.Missing:
				out = append(out, metrics.Backlog{Subscription: d.Subscription, Messages: d.Count})
			}
		}
		return out, errors.Join(errs...)
	}
}
