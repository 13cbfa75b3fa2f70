package computefault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/dev/scenario/lang"
)

// listOmit is one list_omit step in force: Compute listings that succeed
// but leave out a VM, or one field of it.
type listOmit struct {
	name      string
	vm        *regexp.Regexp
	field     []string // dotted path; empty: the whole VM
	remaining int      // listings left; < 0: unlimited (window only)
	until     time.Time
	fired     int
}

func (o *listOmit) active(now time.Time) bool {
	if o.remaining == 0 {
		return false
	}
	return o.until.IsZero() || now.Before(o.until)
}

// listingOfVMs reports whether a call lists VMs: instances.list,
// instances.aggregatedList, instanceGroupManagers.listManagedInstances.
func listingOfVMs(method, path string) bool {
	switch {
	case method == http.MethodGet && (strings.HasSuffix(path, "/instances") || strings.HasSuffix(path, "/aggregated/instances")):
		return true
	case method == http.MethodPost && strings.HasSuffix(path, "/listManagedInstances"):
		return true
	}
	return false
}

// omit rewrites a listing's JSON body. It returns the new body and
// whether anything was left out.
func (o *listOmit) omit(body []byte) ([]byte, bool) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return body, false
	}
	changed := false
	filter := func(items []any, nameOf func(map[string]any) string) []any {
		out := items[:0:0]
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok || !o.vm.MatchString(nameOf(m)) {
				out = append(out, it)
				continue
			}
			changed = true
			if len(o.field) == 0 {
				continue
			}
			deletePath(m, o.field)
			out = append(out, m)
		}
		return out
	}
	byName := func(m map[string]any) string { s, _ := m["name"].(string); return s }
	byURL := func(m map[string]any) string {
		s, _ := m["instance"].(string)
		return s[strings.LastIndex(s, "/")+1:]
	}
	switch items := doc["items"].(type) {
	case []any: // instances.list
		doc["items"] = filter(items, byName)
	case map[string]any: // instances.aggregatedList: scope → {instances: […]}
		for _, scope := range items {
			if sc, ok := scope.(map[string]any); ok {
				if list, ok := sc["instances"].([]any); ok {
					sc["instances"] = filter(list, byName)
				}
			}
		}
	}
	if list, ok := doc["managedInstances"].([]any); ok {
		doc["managedInstances"] = filter(list, byURL)
	}
	if !changed {
		return body, false
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body, false
	}
	return out, true
}

func deletePath(m map[string]any, path []string) {
	for len(path) > 1 {
		next, ok := m[path[0]].(map[string]any)
		if !ok {
			return
		}
		m, path = next, path[1:]
	}
	delete(m, path[0])
}

// bufferedWriter holds a response so that it can be rewritten.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.header }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedWriter) WriteHeader(code int)        { b.status = code }

// AddListOmit puts a list_omit step (step i of the scenario, at now) in
// force and describes it for the trace.
func (c *Layer) AddListOmit(i int, lo lang.ListOmitStep, start, now time.Time) string {
	o := &listOmit{name: lo.Name, vm: regexp.MustCompile(lo.VM), remaining: lo.Times}
	if o.name == "" {
		o.name = fmt.Sprintf("list-omit-%d", i)
	}
	if lo.Field != "" {
		o.field = strings.Split(lo.Field, ".")
	}
	switch {
	case lo.Until != nil:
		o.until = start.Add(lo.Until.Offset)
	case lo.For > 0:
		o.until = now.Add(lo.For.D())
	}
	if o.remaining == 0 {
		o.remaining = 1
		if !o.until.IsZero() {
			o.remaining = -1
		}
	}
	what := "VMs " + lo.VM
	if lo.Field != "" {
		what = "field " + lo.Field + " of VMs " + lo.VM
	}
	switch {
	case o.remaining > 0 && !o.until.IsZero():
		what += fmt.Sprintf(" (%d listings, until %s)", o.remaining, lang.FormatDuration(o.until.Sub(start)))
	case o.remaining > 0:
		what += fmt.Sprintf(" (%d listings)", o.remaining)
	default:
		what += " (until " + lang.FormatDuration(o.until.Sub(start)) + ")"
	}
	c.mu.Lock()
	c.omits = append(c.omits, o)
	c.mu.Unlock()
	return fmt.Sprintf("list_omit %s: listings leave out %s", o.name, what)
}
