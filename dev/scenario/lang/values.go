package lang

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/flexslurm/flexslurm/shared/plan"
)

// leaf marks the types that decode themselves from a YAML node; the strict
// key check (strict.go) does not look inside them.
type leaf interface{ yamlLeaf() }

// Never is the duration written "never": a hundred years, longer than any
// scenario, short enough not to overflow a time.Time.
const Never = 100 * 365 * 24 * time.Hour

// Duration is a length of simulated time. In YAML it is a Go duration
// ("90s", "2h30m"), optionally led by a number of days ("7d", "1d12h"), or
// "never" (Never). A bare 0 is zero.
type Duration time.Duration

func (Duration) yamlLeaf() {}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

var daysPrefix = regexp.MustCompile(`^(\d+)d(.*)$`)

// ParseDuration parses the Duration syntax. Negative durations are rejected.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return 0, fmt.Errorf("empty duration")
	case "0":
		return 0, nil
	case "never":
		return Never, nil
	}
	var days time.Duration
	if m := daysPrefix.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 36500 {
			return 0, fmt.Errorf("duration %q: bad day count", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = m[2]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a Go duration such as 90s, 2h30m or 1d12h: %w", s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return days + d, nil
}

// FormatDuration writes d in the Duration syntax, shortest form first
// ("2d", "1d2h", "1h30m", "45s").
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d >= Never {
		return "never"
	}
	var b strings.Builder
	if days := d / (24 * time.Hour); days > 0 {
		fmt.Fprintf(&b, "%dd", days)
		d -= days * 24 * time.Hour
		if d == 0 {
			return b.String()
		}
	}
	s := d.String()
	// time.Duration prints 1h0m0s: drop the zero units.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	b.WriteString(s)
	return b.String()
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 10m, got a %s", n.Line, kindName(n))
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return FormatDuration(time.Duration(d)), nil }

// At is a step's time: an offset from the scenario start ("2h30m"), or, with
// a leading "+", an offset from the previous step's time ("+10m").
type At struct {
	Offset   time.Duration
	Relative bool
}

func (At) yamlLeaf() {}

// UnmarshalYAML implements yaml.Unmarshaler.
func (a *At) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a time such as 2h or +10m, got a %s", n.Line, kindName(n))
	}
	s := strings.TrimSpace(n.Value)
	rel := strings.HasPrefix(s, "+")
	d, err := ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*a = At{Offset: d, Relative: rel}
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (a At) MarshalYAML() (any, error) {
	if a.Relative {
		return "+" + FormatDuration(a.Offset), nil
	}
	return FormatDuration(a.Offset), nil
}

// StringList is a list of strings written either as a YAML sequence or, for
// one value, as a scalar.
type StringList []string

func (StringList) yamlLeaf() {}

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: want a string, got a %s", c.Line, kindName(c))
			}
			out = append(out, c.Value)
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: want a string or a list of strings, got a %s", n.Line, kindName(n))
}

// ClusterRef is the cluster spec of a scenario: a path to a
// cluster_config.json (relative to the scenario file), or the spec inline as
// a YAML mapping (any JSON is valid YAML, so a cluster_config.json can be
// pasted as is).
type ClusterRef struct {
	// Path is the spec file, relative to the scenario file's directory.
	Path string
	// Inline is the spec as JSON.
	Inline json.RawMessage
}

func (ClusterRef) yamlLeaf() {}

// IsZero reports whether no spec is given.
func (c ClusterRef) IsZero() bool { return c.Path == "" && len(c.Inline) == 0 }

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *ClusterRef) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*c = ClusterRef{Path: n.Value}
		return nil
	case yaml.MappingNode:
		data, err := nodeJSON(n)
		if err != nil {
			return err
		}
		*c = ClusterRef{Inline: data}
		return nil
	}
	return fmt.Errorf("line %d: cluster: want a path or an inline spec mapping, got a %s", n.Line, kindName(n))
}

// MarshalYAML implements yaml.Marshaler: a path as a string, an inline spec
// as a mapping.
func (c ClusterRef) MarshalYAML() (any, error) {
	if len(c.Inline) == 0 {
		return c.Path, nil
	}
	var n yaml.Node
	if err := yaml.Unmarshal(c.Inline, &n); err != nil {
		return nil, fmt.Errorf("inline cluster spec: %w", err)
	}
	if len(n.Content) == 0 {
		return nil, fmt.Errorf("inline cluster spec is empty")
	}
	setBlockStyle(n.Content[0])
	return n.Content[0], nil
}

// setBlockStyle clears the flow and quoting styles JSON input gives a node
// (the encoder still quotes strings that would read back as another type).
func setBlockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		setBlockStyle(c)
	}
}

// Records is a list of stored records (node or job documents) written as
// YAML mappings with the records' JSON field names (model.Node, model.Job).
type Records []json.RawMessage

func (Records) yamlLeaf() {}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Records) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: want a list of records, got a %s", n.Line, kindName(n))
	}
	var out Records
	for _, c := range n.Content {
		if c.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: want a record mapping, got a %s", c.Line, kindName(c))
		}
		data, err := nodeJSON(c)
		if err != nil {
			return err
		}
		out = append(out, data)
	}
	*r = out
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (r Records) MarshalYAML() (any, error) {
	var out []any
	for _, raw := range r {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// nodeJSON converts a YAML node to JSON.
func nodeJSON(n *yaml.Node) ([]byte, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("line %d: %w", n.Line, err)
	}
	v, err := jsonCompatible(v)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", n.Line, err)
	}
	return json.Marshal(v)
}

// jsonCompatible turns the map[any]any and map[string]any values yaml.v3
// decodes into values encoding/json accepts.
func jsonCompatible(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
		return t, nil
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("mapping key %v is not a string", k)
			}
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		for i, e := range t {
			c, err := jsonCompatible(e)
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
		return t, nil
	case time.Time:
		return t.Format(time.RFC3339Nano), nil
	}
	return v, nil
}

// Policy sets plan.Policy knobs by their snake_case field names
// (request_grace, orphan_grace, miss_threshold, …): durations for
// time.Duration fields, integers for int fields. Any field plan.Policy has
// can be set; an unknown key is an error that lists the known ones.
type Policy map[string]string

func (Policy) yamlLeaf() {}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Policy) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: policy: want a mapping, got a %s", n.Line, kindName(n))
	}
	out := Policy{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: policy.%s: want a scalar", v.Line, k.Value)
		}
		out[k.Value] = v.Value
		var pol plan.Policy
		if err := (Policy{k.Value: v.Value}).ApplyTo(&pol); err != nil {
			return fmt.Errorf("line %d: %w", k.Line, err)
		}
	}
	*p = out
	return nil
}

// ApplyTo sets the knobs on pol.
func (p Policy) ApplyTo(pol *plan.Policy) error {
	v := reflect.ValueOf(pol).Elem()
	fields := map[string]int{}
	for i := 0; i < v.NumField(); i++ {
		if v.Type().Field(i).IsExported() {
			fields[snake(v.Type().Field(i).Name)] = i
		}
	}
	for _, k := range sortedKeys(p) {
		i, ok := fields[k]
		if !ok {
			return fmt.Errorf("policy.%s: unknown knob; plan.Policy has %s", k, strings.Join(sortedKeys(fields), ", "))
		}
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeOf(time.Duration(0)):
			d, err := ParseDuration(p[k])
			if err != nil {
				return fmt.Errorf("policy.%s: %w", k, err)
			}
			f.SetInt(int64(d))
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			n, err := strconv.ParseInt(p[k], 10, 64)
			if err != nil {
				return fmt.Errorf("policy.%s: want an integer: %w", k, err)
			}
			f.SetInt(n)
		case f.Kind() == reflect.Float64:
			x, err := strconv.ParseFloat(p[k], 64)
			if err != nil {
				return fmt.Errorf("policy.%s: want a number: %w", k, err)
			}
			f.SetFloat(x)
		case f.Kind() == reflect.Bool:
			b, err := strconv.ParseBool(p[k])
			if err != nil {
				return fmt.Errorf("policy.%s: want true or false: %w", k, err)
			}
			f.SetBool(b)
		default:
			return fmt.Errorf("policy.%s: field of type %s cannot be set from a scenario", k, f.Type())
		}
	}
	return nil
}

// snake turns a Go field name into snake_case, keeping acronyms together
// (RequestGrace → request_grace, SnapshotMaxAge → snapshot_max_age,
// DeleteVMs → delete_vms).
func snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1]) && !(r[i+1] == 's' && i+2 == len(r))
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return "scalar"
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}
