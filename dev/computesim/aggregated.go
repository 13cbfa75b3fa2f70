package computesim

import (
	"slices"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"
)

// Aggregated lists: GET projects/P/aggregated/instances and
// projects/P/aggregated/instanceGroupManagers (Compute v1 discovery document,
// instances.aggregatedList and instanceGroupManagers.aggregatedList). The
// response maps a scope key ("zones/us-central1-a") to a scoped list
// ({"instances": [...]}, {"instanceGroupManagers": [...]}). filter applies to
// the items, as for a zonal list. maxResults counts items across scopes and
// pages run in (scope, name) order.
//
// Fidelity note: the real API also lists every other visible zone (and, for
// MIGs, region) with warning NO_RESULTS_ON_PAGE; the simulator lists only the
// scopes that have results. It has no unreachable scopes.

// scopedItem is one candidate of an aggregated list.
type scopedItem struct {
	scope, name string
	msg         proto.Message
}

// aggToken is the continuation token of an aggregated list: the (scope, name)
// of the last item returned.
type aggToken struct {
	Scope string `json:"s"`
	Name  string `json:"n"`
}

// paginateScoped applies filter, maxResults and pageToken to items (orderBy is
// not supported by the simulator for aggregated lists) and returns the page
// grouped by scope and the next page token.
func paginateScoped(items []scopedItem, q map[string][]string) (map[string][]proto.Message, string, *apiError) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if get("orderBy") != "" {
		return nil, "", errInvalidField("orderBy", get("orderBy"), "computesim does not sort aggregated lists.")
	}
	lf := listFilterOfQuery(q)
	if lf.err != nil {
		return nil, "", errInvalidField("filter", get("filter"), "Invalid list filter expression: "+lf.err.Error()+".")
	}
	filter := lf.expr
	var only map[string]bool
	if filter != nil {
		only = filterFields(filter)
	}
	var kept []scopedItem
	for _, it := range items {
		if filter != nil {
			obj, err := jsonView(it.msg, only)
			if err != nil {
				return nil, "", &apiError{code: 500, reason: "internalError", message: err.Error()}
			}
			if !filter.eval(obj) {
				continue
			}
		}
		kept = append(kept, it)
	}
	less := func(a, b aggToken) bool { return a.Scope < b.Scope || (a.Scope == b.Scope && a.Name < b.Name) }
	key := func(it scopedItem) aggToken { return aggToken{Scope: it.scope, Name: it.name} }
	slices.SortStableFunc(kept, func(a, b scopedItem) int {
		switch {
		case less(key(a), key(b)):
			return -1
		case less(key(b), key(a)):
			return 1
		}
		return 0
	})
	start, end, next, aerr := pageWindow(kept, key, less, get)
	if aerr != nil {
		return nil, "", aerr
	}
	out := map[string][]proto.Message{}
	for _, it := range kept[start:end] {
		out[it.scope] = append(out[it.scope], it.msg)
	}
	return out, next, nil
}

// scopedLists groups a page of paginateScoped into the response's scoped
// lists, each made by wrap from its scope's items, in page order.
func scopedLists[T proto.Message, L any](page map[string][]proto.Message, wrap func([]T) L) map[string]L {
	out := make(map[string]L, len(page))
	for scope, msgs := range page {
		items := make([]T, len(msgs))
		for i, m := range msgs {
			items[i] = m.(T)
		}
		out[scope] = wrap(items)
	}
	return out
}

func (s *Sim) instanceAggregatedListLocked(req *request) (proto.Message, *apiError) {
	var items []scopedItem
	for _, in := range s.instances {
		if in.project == req.project {
			items = append(items, scopedItem{scope: "zones/" + in.zone, name: in.name, msg: in.pb})
		}
	}
	page, next, aerr := paginateScoped(items, req.query)
	if aerr != nil {
		return nil, aerr
	}
	base := "projects/" + req.project + "/aggregated/instances"
	out := &computepb.InstanceAggregatedList{
		Kind: strp("compute#instanceAggregatedList"), Id: strp(base), SelfLink: strp(link(base)),
		Items: scopedLists(page, func(v []*computepb.Instance) *computepb.InstancesScopedList {
			return &computepb.InstancesScopedList{Instances: v}
		}),
	}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}

func (s *Sim) migAggregatedListLocked(req *request) (proto.Message, *apiError) {
	var items []scopedItem
	for _, m := range s.migs {
		if m.project == req.project {
			items = append(items, scopedItem{scope: scopeOf(m.zone), name: m.name, msg: s.migViewLocked(m)})
		}
	}
	page, next, aerr := paginateScoped(items, req.query)
	if aerr != nil {
		return nil, aerr
	}
	base := "projects/" + req.project + "/aggregated/instanceGroupManagers"
	out := &computepb.InstanceGroupManagerAggregatedList{
		Kind: strp("compute#instanceGroupManagerAggregatedList"), Id: strp(base), SelfLink: strp(link(base)),
		Items: scopedLists(page, func(v []*computepb.InstanceGroupManager) *computepb.InstanceGroupManagersScopedList {
			return &computepb.InstanceGroupManagersScopedList{InstanceGroupManagers: v}
		}),
	}
	if next != "" {
		out.NextPageToken = strp(next)
	}
	return out, nil
}
