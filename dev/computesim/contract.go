package computesim

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/flexslurm/flexslurm/dev/computesim/internal/contract"
)

// The contract every request is checked against: the served methods of the
// Compute v1 discovery document and the schemas they reach, extracted from
// the google.golang.org/api module that go.mod requires (see
// docs/compute-contract.md). TestContractUpToDate fails when contract.json
// differs from what that module's document gives.
//
//go:generate go run ./internal/contractgen -o contract.json
//go:embed contract.json
var contractJSON []byte

var apiContract = sync.OnceValue(func() *contract.Contract {
	var c contract.Contract
	if err := json.Unmarshal(contractJSON, &c); err != nil {
		panic("computesim: embedded contract.json: " + err.Error())
	}
	return &c
})

// patterns caches compiled discovery-document patterns. The document's
// patterns are RE2 expressions that must match the whole value.
var patterns sync.Map // string → *regexp.Regexp

func patternOf(p string) *regexp.Regexp {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(`^(?:` + p + `)$`)
	patterns.Store(p, re)
	return re
}

// checkContract checks a routed request against the method's contract:
// path parameters against their patterns, every query parameter against the
// method's and the API's common parameters (unknown ones are rejected), and
// the body against the request schema (unknown fields, JSON types, enum
// values, patterns and the fields the document marks as required by the
// method). Rules the schema cannot express are in rules.go.
func checkContract(req *request) *apiError {
	c := apiContract()
	m := c.Methods[req.method]
	if m == nil {
		return &apiError{code: 500, reason: "internalError", status: "INTERNAL",
			message: "computesim has no contract for " + req.method + "; add it to internal/contract.Served and run go generate"}
	}
	for _, name := range m.ParameterOrder {
		p := m.Parameters[name]
		if p == nil || p.Location != "path" {
			continue
		}
		v := pathValue(req, name)
		if p.Pattern != "" && !patternOf(p.Pattern).MatchString(v) {
			return errInvalidField(name, v, "Must be a match of regex '"+p.Pattern+"'")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(req.query)) {
		p := m.Parameters[name]
		if p == nil {
			p = c.Parameters[name]
		}
		if p == nil && name == "returnPartialSuccess" && strings.HasSuffix(req.method, ".aggregatedList") {
			p = &returnPartialSuccess
		}
		if p == nil || p.Location != "query" {
			return errUnknownQuery(name)
		}
		vals := req.query[name]
		if len(vals) > 1 && !p.Repeated {
			return errInvalidField(name, strings.Join(vals, ","), "The parameter is not repeated; give it once.")
		}
		for _, v := range vals {
			if aerr := checkParamValue(name, v, p); aerr != nil {
				return aerr
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Parameters)) {
		if p := m.Parameters[name]; p.Required && p.Location == "query" && req.query.Get(name) == "" {
			return errRequired(name)
		}
	}
	if m.Request == "" {
		return nil
	}
	if len(bytes.TrimSpace(req.body)) == 0 {
		return errRequired("resource")
	}
	dec := json.NewDecoder(bytes.NewReader(req.body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return errParse(err)
	}
	if dec.More() {
		return errParse(fmt.Errorf("unexpected data after the JSON object"))
	}
	ck := &bodyChecker{c: c, method: "compute." + req.method}
	return ck.check("resource", &contract.Schema{Ref: m.Request}, v)
}

// pathValue is the value of the path parameter name as routed.
func pathValue(req *request, name string) string {
	switch name {
	case "project":
		return req.project
	case "zone":
		return req.zone
	case "region":
		if req.region != "" {
			return req.region // a resource policy's region (policies.go)
		}
		if isRegional(req.method) {
			return req.zone // regional.go: a regional call's region
		}
	case "resizeRequest":
		return req.rr
	}
	return req.name
}

// returnPartialSuccess is the aggregatedList parameter the discovery
// document the contract is made from leaves out, but Compute's REST
// reference documents ("Opt-in for partial success behavior which provides
// partial results in case of failure",
// https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/aggregatedList)
// and the gcloud CLI sends on every aggregated list
// (`gcloud compute instance-groups managed list` with no zone), so the
// simulator must take it too.
var returnPartialSuccess = contract.Param{Location: "query", Type: "boolean"}

func errUnknownQuery(name string) *apiError {
	// The front end's wording for a query parameter the method does not
	// have.
	return &apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT",
		message: fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot bind query parameter. Field '%s' could not be found in request message.", name, name)}
}

func errJSONType(field, want string, v any) *apiError {
	b, _ := json.Marshal(v)
	return &apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT",
		message: fmt.Sprintf("Invalid JSON payload received. Invalid value at '%s' (%s), %s", field, want, b)}
}

func checkParamValue(name, v string, p *contract.Param) *apiError {
	switch p.Type {
	case "integer":
		if aerr := checkIntString(name, v, p.Format, p.Minimum, p.Maximum); aerr != nil {
			return aerr
		}
	case "boolean":
		// Case-insensitive: the gcloud CLI sends includeAllScopes=True and
		// returnPartialSuccess=True on aggregated lists.
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return errInvalidField(name, v, "Must be true or false.")
		}
	case "string":
		if p.Format == "int64" || p.Format == "uint64" {
			if aerr := checkIntString(name, v, p.Format, p.Minimum, p.Maximum); aerr != nil {
				return aerr
			}
		}
	}
	if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
		return errInvalidField(name, v, "Must be one of "+strings.Join(p.Enum, ", ")+".")
	}
	if p.Pattern != "" && !patternOf(p.Pattern).MatchString(v) {
		return errInvalidField(name, v, "Must be a match of regex '"+p.Pattern+"'")
	}
	return nil
}

// intRange is the range of an integer format.
func intRange(format string) (lo, hi float64) {
	switch format {
	case "int32":
		return math.MinInt32, math.MaxInt32
	case "uint32":
		return 0, math.MaxUint32
	case "uint64":
		return 0, math.MaxUint64
	}
	return math.MinInt64, math.MaxInt64
}

func checkIntString(field, v, format, minimum, maximum string) *apiError {
	var ok bool
	var f float64
	if strings.HasPrefix(format, "uint") {
		u, err := strconv.ParseUint(v, 10, 64)
		ok, f = err == nil, float64(u)
	} else {
		i, err := strconv.ParseInt(v, 10, 64)
		ok, f = err == nil, float64(i)
	}
	lo, hi := intRange(format)
	if !ok || f < lo || f > hi {
		return errInvalidField(field, v, "Must be an integer of format "+cmpOr(format, "int64")+".")
	}
	if minimum != "" {
		if mn, err := strconv.ParseFloat(minimum, 64); err == nil && f < mn {
			return errInvalidField(field, v, "Must be at least "+minimum+".")
		}
	}
	if maximum != "" {
		if mx, err := strconv.ParseFloat(maximum, 64); err == nil && f > mx {
			return errInvalidField(field, v, "Must be at most "+maximum+".")
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// bodyChecker walks a JSON value against a schema.
type bodyChecker struct {
	c      *contract.Contract
	method string // discovery method id, for annotations.required
	// response checks a response body: 64-bit integers must be strings and
	// read-only fields are expected. Requests may carry read-only fields
	// (the API ignores them) and integers in either form, as proto JSON
	// allows.
	response bool
}

func (b *bodyChecker) check(field string, s *contract.Schema, v any) *apiError {
	if v == nil {
		return nil // JSON null leaves a field unset
	}
	if s.Ref != "" {
		rs := b.c.Schemas[s.Ref]
		if rs == nil {
			return &apiError{code: 500, reason: "internalError", message: "computesim contract lacks schema " + s.Ref}
		}
		s = rs
	}
	switch s.Type {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return errJSONType(field, "TYPE_MESSAGE", v)
		}
		if s.Properties != nil {
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				name := k
				ps := s.Properties[k]
				if ps == nil && !b.response {
					// Proto JSON parsers also accept the proto field name.
					name = snakeToCamel(k)
					ps = s.Properties[name]
				}
				if ps == nil {
					return &apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT",
						message: fmt.Sprintf("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k, field)}
				}
				if aerr := b.check(field+"."+name, ps, obj[k]); aerr != nil {
					return aerr
				}
			}
			if !b.response {
				var missing []string
				for name, ps := range s.Properties {
					if len(ps.RequiredBy) > 0 && slices.Contains(ps.RequiredBy, b.method) && obj[name] == nil && obj[camelToSnake(name)] == nil {
						missing = append(missing, name)
					}
				}
				if len(missing) > 0 {
					return errRequired(field + "." + slices.Min(missing))
				}
			}
		}
		if ap := s.AdditionalProperties; ap != nil {
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				if aerr := b.check(field+"."+k, ap, obj[k]); aerr != nil {
					return aerr
				}
			}
		}
		return nil
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return errJSONType(field, "TYPE_ARRAY", v)
		}
		for i, e := range arr {
			if aerr := b.check(fmt.Sprintf("%s[%d]", field, i), s.Items, e); aerr != nil {
				return aerr
			}
		}
		return nil
	case "boolean":
		if _, ok := v.(bool); !ok {
			return errJSONType(field, "TYPE_BOOL", v)
		}
		return nil
	case "integer":
		return b.checkInt(field, s, v, false)
	case "number":
		switch x := v.(type) {
		case json.Number:
			return nil
		case string:
			if _, err := strconv.ParseFloat(x, 64); err == nil || x == "NaN" || x == "Infinity" || x == "-Infinity" {
				return nil
			}
		}
		return errJSONType(field, "TYPE_DOUBLE", v)
	case "string":
		if s.Format == "int64" || s.Format == "uint64" {
			return b.checkInt(field, s, v, true)
		}
		str, ok := v.(string)
		if !ok {
			return errJSONType(field, "TYPE_STRING", v)
		}
		if s.Format == "byte" {
			if _, err := base64.StdEncoding.DecodeString(str); err != nil {
				if _, err := base64.URLEncoding.DecodeString(str); err != nil {
					return errJSONType(field, "TYPE_BYTES", v)
				}
			}
		}
		if len(s.Enum) > 0 && !slices.Contains(s.Enum, str) {
			return errInvalidField(field, str, "Must be one of "+strings.Join(s.Enum, ", ")+".")
		}
		if s.Pattern != "" && !patternOf(s.Pattern).MatchString(str) {
			return errInvalidField(field, str, "Must be a match of regex '"+s.Pattern+"'")
		}
		return nil
	}
	return nil
}

// checkInt accepts a JSON number or, as proto JSON does, a decimal string;
// 64-bit integers (wire type string) in a response must be strings.
func (b *bodyChecker) checkInt(field string, s *contract.Schema, v any, wide bool) *apiError {
	want := "TYPE_INT32"
	if wide {
		want = "TYPE_INT64"
	}
	var str string
	switch x := v.(type) {
	case json.Number:
		if b.response && wide {
			return errJSONType(field, want+" as a string", v)
		}
		str = x.String()
	case string:
		if b.response && !wide {
			return errJSONType(field, want+" as a number", v)
		}
		str = x
	default:
		return errJSONType(field, want, v)
	}
	if aerr := checkIntString(field, str, cmpOr(s.Format, "int32"), s.Minimum, s.Maximum); aerr != nil {
		return errJSONType(field, want, v)
	}
	return nil
}

func snakeToCamel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var out strings.Builder
	up := false
	for _, r := range s {
		switch {
		case r == '_':
			up = true
		case up:
			out.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			out.WriteRune(r)
		}
	}
	return out.String()
}

func camelToSnake(s string) string {
	var out strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			out.WriteByte('_')
			r += 'a' - 'A'
		}
		out.WriteRune(r)
	}
	return out.String()
}
