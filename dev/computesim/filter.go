package computesim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
)

// List filters follow the Compute API's `filter` parameter: expressions
// `FIELD OPERATOR VALUE` with operators =, !=, <, >, <=, >=, : (":*" tests presence)
// and the regular-expression operators eq and ne (RE2, whole-field match);
// nested fields with dots (labels.pool, scheduling.provisioningModel);
// expressions combined by juxtaposition or AND, by OR, negated by NOT, and
// grouped with parentheses, e.g.
//
//	labels.pool = "a100"
//	(labels.pool = "a100") AND (name != "x")
//	(labels.pool = "a100") (status = RUNNING)
//	name eq "pool-.*"
//
// The parser accepts the general grammar; the restrictions the API documents
// (each of several expressions in parentheses, no mixing of regular
// expressions with the other operators) are rules in rules.go.
//
// As in Google's list-filter grammar (AIP-160), OR binds tighter than AND.
// Values are compared as strings; < and > compare numerically when both sides
// are numbers. A repeated field matches if any element does. A missing field
// matches only != and ne.

type filterExpr interface {
	eval(obj map[string]any) bool
}

type andExpr []filterExpr

func (a andExpr) eval(o map[string]any) bool {
	for _, e := range a {
		if !e.eval(o) {
			return false
		}
	}
	return true
}

type orExpr []filterExpr

func (a orExpr) eval(o map[string]any) bool {
	for _, e := range a {
		if e.eval(o) {
			return true
		}
	}
	return false
}

// groupExpr is a parenthesized expression.
type groupExpr struct{ e filterExpr }

func (g groupExpr) eval(o map[string]any) bool { return g.e.eval(o) }

type notExpr struct{ e filterExpr }

func (n notExpr) eval(o map[string]any) bool { return !n.e.eval(o) }

type cmpExpr struct {
	path  []string
	op    string
	value string
	re    *regexp.Regexp
}

func (c cmpExpr) eval(o map[string]any) bool {
	vals, present := lookup(o, c.path)
	has := func(f func(string) bool) bool { return slices.ContainsFunc(vals, f) }
	switch c.op {
	case "=":
		return has(func(v string) bool { return v == c.value })
	case "!=":
		return !has(func(v string) bool { return v == c.value })
	case ":":
		if c.value == "*" {
			return present
		}
		return has(func(v string) bool { return v == c.value })
	case "<", ">", "<=", ">=":
		return has(func(v string) bool {
			switch d := compareValues(v, c.value); c.op {
			case "<":
				return d < 0
			case ">":
				return d > 0
			case "<=":
				return d <= 0
			default:
				return d >= 0
			}
		})
	case "eq":
		return has(c.re.MatchString)
	case "ne":
		return !has(c.re.MatchString)
	}
	return false
}

func compareValues(a, b string) int {
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}

// lookup walks a dotted path through a JSON object and returns the scalar
// values found (repeated fields flattened) and whether the path exists.
func lookup(v any, path []string) ([]string, bool) {
	if len(path) == 0 {
		switch x := v.(type) {
		case nil:
			return nil, false
		case string:
			return []string{x}, true
		case bool:
			return []string{strconv.FormatBool(x)}, true
		case float64:
			return []string{strconv.FormatFloat(x, 'f', -1, 64)}, true
		case []any:
			var out []string
			for _, e := range x {
				vs, _ := lookup(e, nil)
				out = append(out, vs...)
			}
			return out, true
		default:
			return nil, true
		}
	}
	switch x := v.(type) {
	case map[string]any:
		child, ok := x[path[0]]
		if !ok {
			return nil, false
		}
		return lookup(child, path[1:])
	case []any:
		var out []string
		found := false
		for _, e := range x {
			vs, ok := lookup(e, path)
			out = append(out, vs...)
			found = found || ok
		}
		return out, found
	}
	return nil, false
}

type token struct {
	kind string // "(", ")", "op", "word", "string"
	text string
}

func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')':
			toks = append(toks, token{kind: string(c)})
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, token{kind: "string", text: b.String()})
			i = j + 1
		case strings.HasPrefix(s[i:], "!=") || strings.HasPrefix(s[i:], "<=") || strings.HasPrefix(s[i:], ">="):
			toks = append(toks, token{kind: "op", text: s[i : i+2]})
			i += 2
		case c == '=' || c == ':' || c == '<' || c == '>':
			toks = append(toks, token{kind: "op", text: string(c)})
			i++
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n()\"'=!:<>", rune(s[j])) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			toks = append(toks, token{kind: "word", text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}

type filterParser struct {
	toks []token
	pos  int
}

func (p *filterParser) peek() (token, bool) {
	if p.pos >= len(p.toks) {
		return token{}, false
	}
	return p.toks[p.pos], true
}

func (p *filterParser) isKeyword(kw string) bool {
	t, ok := p.peek()
	return ok && t.kind == "word" && t.text == kw
}

func (p *filterParser) parseAnd() (filterExpr, error) {
	var terms andExpr
	for {
		t, ok := p.peek()
		if !ok || t.kind == ")" {
			break
		}
		if len(terms) > 0 && p.isKeyword("AND") {
			p.pos++
		}
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		terms = append(terms, e)
	}
	if len(terms) == 0 {
		return nil, fmt.Errorf("empty expression")
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return terms, nil
}

func (p *filterParser) parseOr() (filterExpr, error) {
	first, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	terms := orExpr{first}
	for p.isKeyword("OR") {
		p.pos++
		e, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		terms = append(terms, e)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return terms, nil
}

func (p *filterParser) parseUnary() (filterExpr, error) {
	t, ok := p.peek()
	if !ok {
		return nil, fmt.Errorf("unexpected end of filter")
	}
	switch {
	case t.kind == "word" && t.text == "NOT":
		p.pos++
		e, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notExpr{e}, nil
	case t.kind == "(":
		p.pos++
		e, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		if t, ok := p.peek(); !ok || t.kind != ")" {
			return nil, fmt.Errorf("missing )")
		}
		p.pos++
		return groupExpr{e}, nil
	case t.kind == "word":
		return p.parseComparison()
	}
	return nil, fmt.Errorf("unexpected %q", t.kind+t.text)
}

func (p *filterParser) parseComparison() (filterExpr, error) {
	field := p.toks[p.pos].text
	p.pos++
	t, ok := p.peek()
	if !ok {
		return nil, fmt.Errorf("missing operator after %s", field)
	}
	var op string
	switch {
	case t.kind == "op":
		op = t.text
	case t.kind == "word" && (t.text == "eq" || t.text == "ne"):
		op = t.text
	default:
		return nil, fmt.Errorf("missing operator after %s", field)
	}
	p.pos++
	v, ok := p.peek()
	if !ok || (v.kind != "word" && v.kind != "string") {
		return nil, fmt.Errorf("missing value after %s %s", field, op)
	}
	p.pos++
	c := cmpExpr{path: strings.Split(field, "."), op: op, value: v.text}
	if op == "eq" || op == "ne" {
		re, err := regexp.Compile("^(?:" + v.text + ")$")
		if err != nil {
			return nil, err
		}
		c.re = re
	}
	return c, nil
}

func parseFilter(s string) (filterExpr, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	p := &filterParser{toks: toks}
	e, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.pos].kind+p.toks[p.pos].text)
	}
	return e, nil
}

// listFilter is a list call's filter, parsed and checked, with the fields
// its items are viewed with (filterFields, plus name and creationTimestamp
// for ordering).
type listFilter struct {
	expr filterExpr
	only map[string]bool // read only: shared by every call with the filter
	err  error
}

// listFilters caches listFilterOf by filter text: a reconcile pass sends
// the same few filters again and again, and parsing one compiles regular
// expressions. Expressions are immutable once parsed. At most
// maxListFilters are kept; past that, filters are parsed per call.
var listFilters struct {
	sync.Mutex
	m map[string]*listFilter
}

const maxListFilters = 512

func listFilterOf(s string) *listFilter {
	listFilters.Lock()
	lf := listFilters.m[s]
	listFilters.Unlock()
	if lf != nil {
		return lf
	}
	lf = &listFilter{}
	lf.expr, lf.err = parseFilter(s)
	if lf.err == nil {
		lf.err = checkFilterRules(lf.expr)
	}
	if lf.err != nil {
		lf.expr = nil
	} else if lf.expr != nil {
		lf.only = filterFields(lf.expr, "name", "creationTimestamp")
	} else {
		lf.only = map[string]bool{"name": true, "creationTimestamp": true}
	}
	listFilters.Lock()
	if listFilters.m == nil {
		listFilters.m = map[string]*listFilter{}
	}
	if len(listFilters.m) < maxListFilters {
		listFilters.m[s] = lf
	}
	listFilters.Unlock()
	return lf
}

// listItem is one candidate of a list call.
type listItem struct {
	msg     proto.Message
	name    string
	created string
	obj     map[string]any
}

// maxPageSize is the API's limit and default for maxResults.
const maxPageSize = 500

// pageToken is the opaque continuation token: the sort key of the last item
// returned.
type pageToken struct {
	Name    string `json:"n"`
	Created string `json:"c,omitempty"`
}

// paginate applies filter, orderBy, pageToken and maxResults from the query
// to msgs. It returns the page and the next page token ("" on the last page).
// Default order is by name; "creationTimestamp desc" is also accepted, as by
// the API.
func paginate[T proto.Message](msgs []T, q map[string][]string, paged bool) ([]T, string, *apiError) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	lf := listFilterOfQuery(q)
	if lf.err != nil {
		return nil, "", errInvalidField("filter", get("filter"), "Invalid list filter expression: "+lf.err.Error()+".")
	}
	filter, only := lf.expr, lf.only
	var items []listItem
	for _, m := range msgs {
		obj, ok := typedView(m, only)
		if !ok {
			var err error
			if obj, err = jsonView(m, only); err != nil {
				return nil, "", &apiError{code: 500, reason: "internalError", message: err.Error()}
			}
		}
		if filter != nil && !filter.eval(obj) {
			continue
		}
		name, _ := obj["name"].(string)
		created, _ := obj["creationTimestamp"].(string)
		items = append(items, listItem{msg: m, name: name, created: created, obj: obj})
	}
	var less func(a, b pageToken) bool
	switch strings.Join(strings.Fields(get("orderBy")), " ") {
	case "", "name":
		less = func(a, b pageToken) bool { return a.Name < b.Name }
	case "creationTimestamp desc":
		less = func(a, b pageToken) bool {
			if a.Created != b.Created {
				return a.Created > b.Created
			}
			return a.Name < b.Name
		}
	default:
		return nil, "", errInvalidField("orderBy", get("orderBy"), "Only sorting by name or creationTimestamp desc is supported.")
	}
	key := func(it listItem) pageToken { return pageToken{Name: it.name, Created: it.created} }
	slices.SortStableFunc(items, func(a, b listItem) int {
		switch {
		case less(key(a), key(b)):
			return -1
		case less(key(b), key(a)):
			return 1
		}
		return 0
	})
	if !paged {
		out := make([]T, 0, len(items))
		for _, it := range items {
			out = append(out, it.msg.(T))
		}
		return out, "", nil
	}
	start, end, next, aerr := pageWindow(items, key, less, get)
	if aerr != nil {
		return nil, "", aerr
	}
	out := make([]T, 0, end-start)
	for _, it := range items[start:end] {
		out = append(out, it.msg.(T))
	}
	return out, next, nil
}

// pageWindow reads a list call's maxResults and pageToken and returns the
// window [start, end) of items (sorted by key under less) that the page
// holds, and the next page's token ("" on the last page). A token is the
// JSON of the last key of the previous page, so a page resumes after it
// even when items came or went in between.
func pageWindow[E, K any](items []E, key func(E) K, less func(a, b K) bool, get func(string) string) (start, end int, next string, aerr *apiError) {
	size := maxPageSize
	if v := get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxPageSize {
			return 0, 0, "", errInvalidField("maxResults", v, "Must be between 0 and 500, inclusive.")
		}
		if n > 0 {
			size = n
		}
	}
	if tok := get("pageToken"); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		var after K
		if err == nil {
			err = json.Unmarshal(raw, &after)
		}
		if err != nil {
			return 0, 0, "", errInvalidField("pageToken", tok, "Invalid page token.")
		}
		start = len(items)
		for i, it := range items {
			if less(after, key(it)) {
				start = i
				break
			}
		}
	}
	end = min(start+size, len(items))
	if end < len(items) {
		b, _ := json.Marshal(key(items[end-1]))
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	return start, end, next, nil
}

// ignoreLabelsParam is the query key serveLocked adds to a list call's
// query when Readings.IgnoreLabelFilter is on. No client can send it: the
// contract check refuses unknown query parameters before it is added.
const ignoreLabelsParam = "\x00ignoreLabelFilter"

// listFilterOfQuery is listFilterOf for a list call's query: the filter as
// sent, or, under Readings.IgnoreLabelFilter, that filter with its label
// comparisons dropped (withoutLabels).
func listFilterOfQuery(q map[string][]string) *listFilter {
	var s string
	if v := q["filter"]; len(v) > 0 {
		s = v[0]
	}
	if len(q[ignoreLabelsParam]) == 0 {
		return listFilterOf(s)
	}
	listFilters.Lock()
	lf := listFilters.m[ignoreLabelsParam+s]
	listFilters.Unlock()
	if lf != nil {
		return lf
	}
	orig := listFilterOf(s)
	lf = &listFilter{err: orig.err}
	if orig.err == nil {
		lf.expr = withoutLabels(orig.expr)
		if lf.expr != nil {
			lf.only = filterFields(lf.expr, "name", "creationTimestamp")
		} else {
			lf.only = map[string]bool{"name": true, "creationTimestamp": true}
		}
	}
	listFilters.Lock()
	if listFilters.m == nil {
		listFilters.m = map[string]*listFilter{}
	}
	if len(listFilters.m) < maxListFilters {
		listFilters.m[ignoreLabelsParam+s] = lf
	}
	listFilters.Unlock()
	return lf
}

// withoutLabels is e as a server that ignores label filters applies it:
// every comparison on labels.* matches every resource, so it is dropped,
// and with it any OR, NOT or group it is part of (an OR with a term that
// matches everything matches everything; a NOT of an ignored term is
// ignored too). nil means no filter is left.
func withoutLabels(e filterExpr) filterExpr {
	switch x := e.(type) {
	case cmpExpr:
		if len(x.path) > 0 && x.path[0] == "labels" {
			return nil
		}
		return x
	case andExpr:
		var kept andExpr
		for _, c := range x {
			if c = withoutLabels(c); c != nil {
				kept = append(kept, c)
			}
		}
		switch len(kept) {
		case 0:
			return nil
		case 1:
			return kept[0]
		}
		return kept
	case orExpr:
		for _, c := range x {
			if withoutLabels(c) == nil {
				return nil
			}
		}
		return x
	case groupExpr:
		if inner := withoutLabels(x.e); inner != nil {
			return groupExpr{inner}
		}
		return nil
	case notExpr:
		if inner := withoutLabels(x.e); inner != nil {
			return notExpr{inner}
		}
		return nil
	}
	return e
}
