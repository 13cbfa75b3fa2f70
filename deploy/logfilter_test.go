package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/flexslurm/flexslurm/shared/event"
)

// This file evaluates the expiry sink's filter, as Terraform would send it
// to Cloud Logging, against the recorded audit-log entries that
// shared/event's decoder is tested on (shared/event/testdata/audit), so the
// sink and the decoder cannot drift apart.
//
// The evaluator implements the part of the Logging query language the
// filter uses (https://cloud.google.com/logging/docs/view/logging-query-language):
// comparisons `path = "v"`, `path != "v"`, `path : "v"` (has: a
// case-insensitive substring), `path =~ "re"` and `path !~ "re"` (RE2,
// matched anywhere in the value), NOT, AND (also implicit, by juxtaposition),
// OR, and parentheses. Anything else is a parse error, so a filter that
// moves beyond this subset fails the test instead of being misread.

type filterExpr interface {
	eval(entry map[string]any) bool
}

type orExpr []filterExpr
type andExpr []filterExpr
type notExpr struct{ x filterExpr }
type cmpExpr struct {
	path []string
	op   string
	val  string
	re   *regexp.Regexp
}

func (o orExpr) eval(e map[string]any) bool {
	for _, x := range o {
		if x.eval(e) {
			return true
		}
	}
	return false
}

func (a andExpr) eval(e map[string]any) bool {
	for _, x := range a {
		if !x.eval(e) {
			return false
		}
	}
	return true
}

func (n notExpr) eval(e map[string]any) bool { return !n.x.eval(e) }

func (c cmpExpr) eval(e map[string]any) bool {
	var v any = e
	for _, p := range c.path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[p]; !ok {
			// A missing field matches no comparison (and so NOT … matches).
			return false
		}
	}
	s := fmt.Sprint(v)
	switch c.op {
	case "=":
		return s == c.val
	case "!=":
		return s != c.val
	case ":":
		return strings.Contains(strings.ToLower(s), strings.ToLower(c.val))
	case "=~":
		return c.re.MatchString(s)
	case "!~":
		return !c.re.MatchString(s)
	}
	panic("unreachable")
}

type filterParser struct {
	toks []string
	i    int
}

func tokenizeFilter(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '(' || c == ')':
			toks = append(toks, string(c))
			i++
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			toks = append(toks, "\""+b.String())
			i = j + 1
		case strings.HasPrefix(s[i:], "=~"), strings.HasPrefix(s[i:], "!~"), strings.HasPrefix(s[i:], "!="):
			toks = append(toks, s[i:i+2])
			i += 2
		case c == '=' || c == ':':
			toks = append(toks, string(c))
			i++
		default:
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || strings.ContainsRune("._@", rune(s[j]))) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("unexpected %q at offset %d", s[i], i)
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

func parseFilter(s string) (filterExpr, error) {
	toks, err := tokenizeFilter(s)
	if err != nil {
		return nil, err
	}
	p := &filterParser{toks: toks}
	x, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.i])
	}
	return x, nil
}

func (p *filterParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *filterParser) or() (filterExpr, error) {
	x, err := p.and()
	if err != nil {
		return nil, err
	}
	xs := orExpr{x}
	for p.peek() == "OR" {
		p.i++
		y, err := p.and()
		if err != nil {
			return nil, err
		}
		xs = append(xs, y)
	}
	if len(xs) == 1 {
		return x, nil
	}
	return xs, nil
}

func (p *filterParser) and() (filterExpr, error) {
	x, err := p.factor()
	if err != nil {
		return nil, err
	}
	xs := andExpr{x}
	for {
		switch t := p.peek(); {
		case t == "AND":
			p.i++
		case t == "" || t == ")" || t == "OR":
			if len(xs) == 1 {
				return x, nil
			}
			return xs, nil
		}
		y, err := p.factor()
		if err != nil {
			return nil, err
		}
		xs = append(xs, y)
	}
}

func (p *filterParser) factor() (filterExpr, error) {
	switch t := p.peek(); t {
	case "NOT":
		p.i++
		x, err := p.factor()
		return notExpr{x}, err
	case "(":
		p.i++
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, fmt.Errorf("missing ) before %q", p.peek())
		}
		p.i++
		return x, nil
	case "":
		return nil, fmt.Errorf("unexpected end of filter")
	}
	path := p.peek()
	if strings.HasPrefix(path, "\"") || !regexp.MustCompile(`^[A-Za-z_@][A-Za-z0-9_@]*(\.[A-Za-z_@][A-Za-z0-9_@]*)*$`).MatchString(path) {
		return nil, fmt.Errorf("want a field path, have %q", path)
	}
	p.i++
	op := p.peek()
	switch op {
	case "=", "!=", ":", "=~", "!~":
	default:
		return nil, fmt.Errorf("after %s: want a comparison operator, have %q", path, op)
	}
	p.i++
	v := p.peek()
	if !strings.HasPrefix(v, "\"") {
		return nil, fmt.Errorf("%s %s: want a quoted value, have %q", path, op, v)
	}
	p.i++
	c := cmpExpr{path: strings.Split(path, "."), op: op, val: v[1:]}
	if op == "=~" || op == "!~" {
		re, err := regexp.Compile(c.val)
		if err != nil {
			return nil, fmt.Errorf("%s %s %q: %w", path, op, c.val, err)
		}
		c.re = re
	}
	return c, nil
}

func TestFilterEvaluator(t *testing.T) {
	entry := map[string]any{"a": map[string]any{"b": "Hello.World"}, "n": 3.0}
	for filter, want := range map[string]bool{
		`a.b="Hello.World"`:                    true,
		`a.b="hello.world"`:                    false,
		`a.b:"world"`:                          true,
		`a.b=~"^Hello[.]"`:                     true,
		`a.b!~"^Hello[.]"`:                     false,
		`a.c="x"`:                              false,
		`NOT a.c="x"`:                          true,
		`a.b:"x" OR (a.b:"hello" AND n="3")`:   true,
		`a.b:"hello" n="4"`:                    false,
		`(a.b:"x" OR a.b:"y") AND a.b:"hello"`: false,
	} {
		x, err := parseFilter(filter)
		if err != nil {
			t.Errorf("%s: %v", filter, err)
			continue
		}
		if got := x.eval(entry); got != want {
			t.Errorf("%s: got %v, want %v", filter, got, want)
		}
	}
	for _, bad := range []string{`a.b`, `a.b = x`, `(a.b="x"`, `a.b > "x"`, `a.b="x" OR`} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}

// TestLogSinkRoutesRecordedEntries runs the sink's filter over every
// recorded audit entry: it routes exactly the entries cases.json says, and
// every entry the decoder reads as the end of a VM reaches Expiry.
func TestLogSinkRoutesRecordedEntries(t *testing.T) {
	m := loadModule(t)
	sinks := m.blocksOf("google_logging_project_sink")
	if len(sinks) != 1 || len(sinks[0].instances) != 1 {
		t.Fatalf("want one google_logging_project_sink, have %d", len(sinks))
	}
	filter, _ := str(get(sinks[0].instances[0].value, "filter"))
	if want := `protoPayload.methodName=~"` + event.DeleteMethodPattern + `"`; !strings.Contains(filter, want) {
		t.Errorf("the filter does not use the decoder's delete pattern %s:\n%s", want, filter)
	}
	x, err := parseFilter(filter)
	if err != nil {
		t.Fatalf("parsing the sink filter: %v\n%s", err, filter)
	}
	dir := filepath.Join("..", "shared", "event", "testdata", "audit")
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs struct {
		Project string
		Cases   []struct {
			File   string
			Routed bool
		}
	}
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	if cs.Project != "my-proj" {
		t.Fatalf("the recorded entries are of project %q, the module is evaluated for my-proj", cs.Project)
	}
	for _, c := range cs.Cases {
		data, err := os.ReadFile(filepath.Join(dir, c.File))
		if err != nil {
			t.Fatal(err)
		}
		var entry map[string]any
		if err := json.Unmarshal(data, &entry); err != nil {
			t.Fatalf("%s: %v", c.File, err)
		}
		routed := x.eval(entry)
		if routed != c.Routed {
			t.Errorf("%s: the sink routes it: %v, want %v", c.File, routed, c.Routed)
		}
		if a, err := event.DecodeAudit(data); err == nil && a.Kind != event.AuditOther && !routed {
			t.Errorf("%s: the decoder reads %s (%s), but the sink drops it", c.File, a.Kind, a.Method)
		}
	}
}
