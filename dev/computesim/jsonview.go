package computesim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// jsonView returns the JSON object of m as a list filter sees it: what
// json.Unmarshal into a map[string]any gives for protojson.Marshal(m), built
// straight from the message. Filtering a list evaluates every resource, so
// skipping the text in between matters (docs/chaos.md); jsonview_test.go
// checks the two agree.
//
// The mapping is protojson's (the proto3 JSON mapping): populated fields
// only, under their JSON names; 64-bit integers as decimal strings, other
// numbers as float64 (a float with its shortest 32-bit form); bytes in
// standard base64; enums by name (by number when unknown); maps as objects
// with string keys. Well-known types (google.protobuf.*), which have their
// own JSON forms, go through protojson.
//
// With only non-nil, the object holds only the top-level fields it names
// (by JSON name): a filter looks nothing else up (filterFields).
func jsonView(m proto.Message, only map[string]bool) (map[string]any, error) {
	v, err := jsonMessage(m.ProtoReflect(), only)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a JSON object", m.ProtoReflect().Descriptor().FullName())
	}
	return obj, nil
}

func jsonMessage(m protoreflect.Message, only map[string]bool) (any, error) {
	if strings.HasPrefix(string(m.Descriptor().FullName()), "google.protobuf.") {
		b, err := protojson.Marshal(m.Interface())
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	obj := map[string]any{}
	var err error
	field := func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		var jv any
		switch {
		case fd.IsList():
			l := v.List()
			arr := make([]any, 0, l.Len())
			for i := 0; i < l.Len() && err == nil; i++ {
				var e any
				e, err = jsonSingular(fd, l.Get(i))
				arr = append(arr, e)
			}
			jv = arr
		case fd.IsMap():
			mo := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				var e any
				e, err = jsonSingular(fd.MapValue(), mv)
				mo[k.String()] = e
				return err == nil
			})
			jv = mo
		default:
			jv, err = jsonSingular(fd, v)
		}
		obj[fd.JSONName()] = jv
		return err == nil
	}
	if only == nil {
		m.Range(field)
	} else {
		// Look up only the named fields, rather than ranging over every
		// populated one: a filter names one or two of a VM's dozens.
		// On errors, the lowest-numbered field's is the one reported,
		// whatever the map's order.
		fds := m.Descriptor().Fields()
		var first error
		var firstNum protoreflect.FieldNumber
		for name := range only {
			fd := fds.ByJSONName(name)
			if fd == nil || !m.Has(fd) {
				continue
			}
			if err = nil; !field(fd, m.Get(fd)) && (first == nil || fd.Number() < firstNum) {
				first, firstNum = err, fd.Number()
			}
		}
		err = first
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

func jsonSingular(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.StringKind:
		s := v.String()
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("field %s contains invalid UTF-8", fd.FullName())
		}
		return s, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return float64(v.Int()), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return float64(v.Uint()), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10), nil
	case protoreflect.FloatKind:
		return jsonFloat(v.Float(), 32), nil
	case protoreflect.DoubleKind:
		return jsonFloat(v.Float(), 64), nil
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes()), nil
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return nil, nil
		}
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), nil
		}
		return float64(v.Enum()), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return jsonMessage(v.Message(), nil)
	}
	return nil, fmt.Errorf("field %s: unsupported kind %s", fd.FullName(), fd.Kind())
}

// jsonFloat is a float as protojson writes it and encoding/json reads it
// back: NaN and infinities as strings, others from their shortest form.
func jsonFloat(f float64, bits int) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	g, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, bits), 64)
	return g
}

// filterFields returns the top-level fields (JSON names) e looks up, plus
// extra: a jsonView of those alone evaluates e as the whole object does,
// since lookup of any other path is not reached.
func filterFields(e filterExpr, extra ...string) map[string]bool {
	out, all := map[string]bool{}, false
	for _, f := range extra {
		out[f] = true
	}
	var walk func(filterExpr)
	walk = func(e filterExpr) {
		switch x := e.(type) {
		case andExpr:
			for _, c := range x {
				walk(c)
			}
		case orExpr:
			for _, c := range x {
				walk(c)
			}
		case groupExpr:
			walk(x.e)
		case notExpr:
			walk(x.e)
		case cmpExpr:
			if len(x.path) > 0 {
				out[x.path[0]] = true
			}
		default:
			// An expression this walk does not know: view everything.
			all = true
		}
	}
	walk(e)
	if all {
		return nil
	}
	return out
}

// typedView is jsonView for the fields the simulator's own list calls
// look up — a VM's, MIG's or resize request's name and creationTimestamp
// (every list orders by them) and a VM's labels (flexslurm lists VMs by
// label) — read from the generated struct instead of by reflection. ok is
// false for any other message or field, and for a value jsonView would
// refuse (invalid UTF-8): the caller asks jsonView then, which answers or
// reports the error. TestTypedViewMatchesJSONView checks the two agree.
func typedView(m proto.Message, only map[string]bool) (obj map[string]any, ok bool) {
	var name, created *string
	var labels map[string]string
	isVM := false
	switch x := m.(type) {
	case *computepb.Instance:
		name, created, labels, isVM = x.Name, x.CreationTimestamp, x.Labels, true
	case *computepb.InstanceGroupManager:
		name, created = x.Name, x.CreationTimestamp
	case *computepb.InstanceGroupManagerResizeRequest:
		name, created = x.Name, x.CreationTimestamp
	default:
		return nil, false
	}
	if only == nil {
		return nil, false
	}
	obj = make(map[string]any, len(only))
	str := func(key string, v *string) bool {
		if v == nil { // not populated: protojson leaves it out
			return true
		}
		if !utf8.ValidString(*v) {
			return false
		}
		obj[key] = *v
		return true
	}
	for f := range only {
		switch f {
		case "name":
			ok = str(f, name)
		case "creationTimestamp":
			ok = str(f, created)
		case "labels":
			if ok = isVM; ok && len(labels) > 0 {
				mo := make(map[string]any, len(labels))
				for k, v := range labels {
					if !utf8.ValidString(v) {
						return nil, false
					}
					mo[k] = v
				}
				obj[f] = mo
			}
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	return obj, true
}
