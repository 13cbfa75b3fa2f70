package spec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/inputs"
)

// walker collects problems while reading the decoded tree. Each problem
// carries the position of the value it concerns so that the final list is in
// document order whatever order the checks ran in.
type walker struct {
	probs []posProblem
}

// posProblem is a problem with its sort key: pos is the position of the
// value concerned (for a missing field, the end of its object) and sub
// orders missing fields of one object by the schema's field order.
type posProblem struct {
	pos, sub int
	Problem
}

func (w *walker) add(pos int, path, format string, args ...any) {
	w.probs = append(w.probs, posProblem{pos: pos, Problem: Problem{Path: path, Message: fmt.Sprintf(format, args...)}})
}

func (w *walker) err() error {
	if len(w.probs) == 0 {
		return nil
	}
	sort.SliceStable(w.probs, func(i, j int) bool {
		a, b := w.probs[i], w.probs[j]
		if a.pos != b.pos {
			return a.pos < b.pos
		}
		return a.sub < b.sub
	})
	ve := &ValidationError{Problems: make([]Problem, len(w.probs))}
	for i, p := range w.probs {
		ve.Problems[i] = p.Problem
	}
	return ve
}

// apiOnlyFields lists fields of the managed Slurm API (https://github.com/GoogleCloudPlatform/magic-modules/blob/main/mmv1/products/vertexai/ModelDevelopmentCluster.yaml) that
// flexslurm does not model, so they are rejected with a precise message
// rather than as unknown. outputOnlyFields are set by the API and never
// belong in a request.
var (
	apiOnlyFields = map[string]bool{
		"labels": true, "runtime_spec": true, "lustre_export_config": true,
		"node_image": true, "startup_script": true, "filestores": true, "lustres": true,
		"confidential_instance_config": true, "reservation_affinity": true,
		"node_sets": true, "config": true, "prolog_bash_scripts": true,
		"epilog_bash_scripts": true, "accounting": true, "scheduling": true,
	}
	outputOnlyFields = map[string]bool{
		"cluster_status": true, "cluster_events": true, "create_time": true,
		"update_time": true, "start_time": true, "runtime": true,
		"effective_flex_start_max_duration": true,
	}
)

// object is a JSON object being read against a fixed set of field names.
type object struct {
	w     *walker
	v     *value
	path  string
	known []string
}

// object checks that v is a JSON object whose keys are all among known and
// reports every other key. It returns nil, having reported the problem, when
// v is not an object.
func (w *walker) object(v *value, path string, known ...string) *object {
	if v.kind != kindObject {
		w.add(v.pos, path, "must be a JSON object, got %s", v.describe())
		return nil
	}
	for _, k := range v.keys {
		if slices.Contains(known, k) {
			continue
		}
		kv := v.fields[k]
		kpath := joinKey(path, k)
		switch {
		case outputOnlyFields[k]:
			w.add(kv.pos, kpath, "%q is an output-only field of the managed Slurm API; remove it", k)
		case apiOnlyFields[k]:
			w.add(kv.pos, kpath, "%q is a managed Slurm API field that flexslurm does not support; remove it", k)
		default:
			w.add(kv.pos, kpath, "unknown field %q%s", k, suggest(k, known))
		}
	}
	return &object{w: w, v: v, path: path, known: known}
}

// get returns the field's value, or nil when it is absent or JSON null
// (proto JSON reads null as "not set").
func (o *object) get(key string) *value {
	v := o.v.fields[key]
	if v == nil || v.kind == kindNull {
		return nil
	}
	return v
}

func (o *object) child(key string) string { return joinKey(o.path, key) }

// missing reports a required field as absent.
func (o *object) missing(key string) {
	o.missingf(key, "required field is missing")
}

// missingf reports a problem with an absent field, placed at the end of the
// object it belongs in, in schema order among that object's absent fields.
func (o *object) missingf(key, format string, args ...any) {
	o.w.probs = append(o.w.probs, posProblem{
		pos:     o.v.end,
		sub:     1 + slices.Index(o.known, key),
		Problem: Problem{Path: o.child(key), Message: fmt.Sprintf(format, args...)},
	})
}

// reqString reads a required, non-empty string field.
func (o *object) reqString(key string) (string, bool) {
	v := o.get(key)
	if v == nil {
		o.missing(key)
		return "", false
	}
	s, ok := o.w.str(v, o.child(key))
	if ok && s == "" {
		o.w.add(v.pos, o.child(key), "must not be empty")
		return "", false
	}
	return s, ok
}

// optString reads an optional string field; absent and "" both mean unset.
func (o *object) optString(key string) (string, bool) {
	v := o.get(key)
	if v == nil {
		return "", true
	}
	return o.w.str(v, o.child(key))
}

// optInt reads an optional integer field; present reports whether it was
// given.
func (o *object) optInt(key string) (n int, present, ok bool) {
	v := o.get(key)
	if v == nil {
		return 0, false, true
	}
	n, ok = o.w.integer(v, o.child(key))
	return n, true, ok
}

var (
	placeholderRE = regexp.MustCompile(`<[^<>]+>`)
	// numberRE is the JSON number grammar, applied to numeric strings too.
	numberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
)

// str reads a JSON string, rejecting unreplaced placeholders.
func (w *walker) str(v *value, path string) (string, bool) {
	if v.kind != kindString {
		w.add(v.pos, path, "must be a JSON string, got %s", v.describe())
		return "", false
	}
	if w.placeholder(v, path) {
		return "", false
	}
	if inputs.HasControl(v.text) {
		// No spec string may end a line of slurm.conf, of a log or of a
		// command's output.
		w.add(v.pos, path, "%q holds a control character (a newline, tab or the like), which no field of a cluster spec may hold", v.text)
		return "", false
	}
	return v.text, true
}

// placeholder reports a string value containing an unreplaced placeholder
// such as "<project-id>" (a copied example's cluster_config.json is full of them)
// and returns whether it did.
func (w *walker) placeholder(v *value, path string) bool {
	if v.kind != kindString {
		return false
	}
	ph := placeholderRE.FindAllString(v.text, -1)
	if len(ph) == 0 {
		return false
	}
	noun := "placeholder"
	if len(ph) > 1 {
		noun = "placeholders"
	}
	w.add(v.pos, path, "%q contains the unreplaced %s %s; replace with real values", v.text, noun, strings.Join(ph, ", "))
	return true
}

// integer reads a whole number that fits in 32 bits, given either as a JSON
// number or as a numeric string (proto JSON allows both).
func (w *walker) integer(v *value, path string) (int, bool) {
	if v.kind != kindNumber && v.kind != kindString {
		w.add(v.pos, path, "must be an integer, got %s", v.describe())
		return 0, false
	}
	if w.placeholder(v, path) {
		return 0, false
	}
	lit := v.text
	if !numberRE.MatchString(lit) {
		w.add(v.pos, path, "%s is not an integer", v.describe())
		return 0, false
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		// Proto JSON also accepts integral values in float notation (1e2, 3.0).
		f, ferr := strconv.ParseFloat(lit, 64)
		if ferr == nil && f != math.Trunc(f) {
			w.add(v.pos, path, "%s is not an integer", v.describe())
			return 0, false
		}
		if ferr != nil || f < math.MinInt32 || f > math.MaxInt32 {
			w.add(v.pos, path, "%s is out of range", v.describe())
			return 0, false
		}
		n = int64(f)
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		w.add(v.pos, path, "%s is out of range", v.describe())
		return 0, false
	}
	return int(n), true
}

// boolean reads a JSON boolean or the string "true" or "false" (the
// managed service's examples write enable_public_ips as the string "true").
func (w *walker) boolean(v *value, path string) (bool, bool) {
	if w.placeholder(v, path) {
		return false, false
	}
	switch {
	case v.kind == kindBool:
		return v.b, true
	case v.kind == kindString && v.text == "true":
		return true, true
	case v.kind == kindString && v.text == "false":
		return false, true
	}
	w.add(v.pos, path, `must be a JSON boolean or the string "true" or "false", got %s`, v.describe())
	return false, false
}

// array reads a JSON array.
func (w *walker) array(v *value, path string) ([]*value, bool) {
	if v.kind != kindArray {
		w.add(v.pos, path, "must be a JSON array, got %s", v.describe())
		return nil, false
	}
	return v.elems, true
}

// suggest names a known field close to an unknown one: the snake_case form
// of a camelCase name, or a near miss.
func suggest(key string, known []string) string {
	if snake := toSnake(key); snake != key && slices.Contains(known, snake) {
		return fmt.Sprintf("; this format uses snake_case names: %q", snake)
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

func toSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// editDistance is the Levenshtein distance between a and b in bytes; it
// gives up early (returning a large value) for long inputs.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
