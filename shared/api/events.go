package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/plan"
	"github.com/flexslurm/flexslurm/shared/store"
)

// Event page sizes: 0 or absent is DefaultEventPageSize, larger than
// store.MaxEventPage is coerced to it (AIP-158).
const DefaultEventPageSize = 100

// listEvents handles GET …/modelDevelopmentClusters/ID/events: the
// cluster's events, oldest first (docs/api.md, "Cluster events"). Filters:
// the query parameters nodeId, jobId and type, or an AIP-160 filter of
// equalities joined by AND (`nodeId="flexvm-a3u-0" AND type="VM_EXPIRED"`).
// Paging: pageSize, pageToken; nextPageToken is set whenever the page is
// full, and is the token to poll with for what comes next (--follow).
func (s *Server) listEvents(ctx context.Context, w http.ResponseWriter, r route, q query) *Error {
	if e := q.only("pageSize", "pageToken", "filter", "nodeId", "jobId", "type"); e != nil {
		return e
	}
	if s.d.Events == nil {
		return errorf(CodeFailedPrecondition, "this deployment keeps no cluster events")
	}
	v, e := s.load(ctx, r, r.id)
	if e != nil {
		return e
	}
	if !v.exists() {
		return notFound(r, r.id)
	}
	f, e := eventFilter(q)
	if e != nil {
		return e
	}
	f.Limit = DefaultEventPageSize
	if ps, ok := q["pageSize"]; ok && ps != "" {
		n, err := parseInt32(ps)
		switch {
		case err != nil:
			return invalid(FieldViolation{Field: "pageSize", Description: fmt.Sprintf("%q is not an integer", ps)})
		case n < 0:
			return invalid(FieldViolation{Field: "pageSize", Description: fmt.Sprintf("%d: must not be negative", n)})
		case n > 0:
			f.Limit = min(int(n), store.MaxEventPage)
		}
	}
	parent := r.clusterName(r.id) + "/events/"
	if t := q["pageToken"]; t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		id, ok := strings.CutPrefix(string(b), parent)
		if err != nil || !ok || !strings.HasPrefix(id, r.id+"-") {
			return invalid(FieldViolation{Field: "pageToken", Description: "not a page token this list returned"})
		}
		f.After = id
	}
	evs, err := s.d.Events.Events(ctx, r.id, f)
	if err != nil {
		return errorf(CodeUnavailable, "listing events of cluster %s: %v", r.id, err)
	}
	out := make([]map[string]any, 0, len(evs))
	for _, ev := range evs {
		m := map[string]any{
			"name":      parent + ev.ID,
			"type":      ev.Type,
			"eventTime": ev.Time.UTC().Format(time.RFC3339Nano),
			"message":   ev.Message,
		}
		for k, v := range map[string]string{"nodePoolId": ev.Pool, "nodeId": ev.Node, "instanceName": ev.VM, "jobId": ev.Job, "healthCheckHook": ev.Check} {
			if v != "" {
				m[k] = v
			}
		}
		if ev.Generation != 0 {
			m["generation"] = fmt.Sprint(ev.Generation) // int64 as a string: Google's JSON mapping
		}
		out = append(out, m)
	}
	resp := map[string]any{"events": out}
	if len(evs) == f.Limit {
		resp["nextPageToken"] = base64.RawURLEncoding.EncodeToString([]byte(parent + evs[len(evs)-1].ID))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// eventFilter reads the filter parameters: nodeId, jobId, type, and filter
// (AIP-160 equalities joined by AND, on nodeId, jobId and type, in either
// casing). A field given twice with different values is refused.
func eventFilter(q query) (store.EventFilter, *Error) {
	var f store.EventFilter
	var vs []FieldViolation
	set := func(field, val, from string) {
		p := map[string]*string{"nodeId": &f.Node, "jobId": &f.Job, "type": &f.Type}[field]
		if p == nil {
			vs = append(vs, FieldViolation{Field: from, Description: fmt.Sprintf("%q is not a field events are filtered by (nodeId, jobId, type)", field)})
			return
		}
		if *p != "" && *p != val {
			vs = append(vs, FieldViolation{Field: from, Description: fmt.Sprintf("%s given twice (%q and %q)", field, *p, val)})
			return
		}
		*p = val
	}
	for _, k := range []string{"nodeId", "jobId", "type"} {
		if v := q[k]; v != "" {
			set(k, v, k)
		}
	}
	if expr := strings.TrimSpace(q["filter"]); expr != "" {
		for _, term := range strings.Split(expr, " AND ") {
			k, v, ok := strings.Cut(term, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if uq, err := unquote(v); err == nil {
				v = uq
			}
			if !ok || k == "" || v == "" || strings.ContainsAny(v, `"= `) {
				vs = append(vs, FieldViolation{Field: "filter", Description: fmt.Sprintf("%q: want field=\"value\" terms joined by AND", strings.TrimSpace(term))})
				continue
			}
			set(toCamel(k), v, "filter")
		}
	}
	if f.Type != "" && !validEventType(f.Type) {
		vs = append(vs, FieldViolation{Field: "type", Description: fmt.Sprintf("%q is not an event type (%s)", f.Type, strings.Join(plan.EventTypes, ", "))})
	}
	if len(vs) > 0 {
		return f, invalid(vs...)
	}
	return f, nil
}

func unquote(v string) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1], nil
	}
	return v, fmt.Errorf("not quoted")
}

func validEventType(t string) bool {
	for _, x := range plan.EventTypes {
		if x == t {
			return true
		}
	}
	return false
}
