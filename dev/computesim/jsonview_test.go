package computesim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// fill sets random values in a random subset of m's fields, recursively
// down to depth.
func fill(rng *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if rng.IntN(3) == 0 || (fd.Kind() == protoreflect.MessageKind && depth == 0) {
			continue
		}
		if md := fd.Message(); md != nil && md.FullName() == "google.protobuf.Any" {
			continue // a random Any does not resolve; Struct below covers google.protobuf.*
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j, n := 0, 1+rng.IntN(3); j < n; j++ {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(rng, e.Message(), depth-1)
					l.Append(e)
				} else {
					l.Append(randomScalar(rng, fd))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j, n := 0, 1+rng.IntN(3); j < n; j++ {
				k := randomScalar(rng, fd.MapKey()).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v := mp.NewValue()
					fill(rng, v.Message(), depth-1)
					mp.Set(k, v)
				} else {
					mp.Set(k, randomScalar(rng, fd.MapValue()))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			fill(rng, m.Mutable(fd).Message(), depth-1)
		default:
			m.Set(fd, randomScalar(rng, fd))
		}
	}
}

func randomScalar(rng *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	strs := []string{"", "a3u-0", "RUNNING", "x y\"z\\", "ünï", "projects/p/zones/z/instances/i"}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rng.IntN(2) == 0)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(strs[rng.IntN(len(strs))])
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(rng.Int64N(1<<32) - 1<<31))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(rng.Uint32())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(rng.Uint64()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(rng.Uint64())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32([]float32{0.1, 1e-7, 3.4e38, float32(math.Inf(1)), float32(rng.NormFloat64())}[rng.IntN(5)])
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0.1, 1e300, math.NaN(), math.Inf(-1), rng.NormFloat64()}[rng.IntN(5)])
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(rng.IntN(256)), 0, 255})
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		if rng.IntN(4) == 0 {
			return protoreflect.ValueOfEnum(9999) // unknown: by number
		}
		return protoreflect.ValueOfEnum(vals.Get(rng.IntN(vals.Len())).Number())
	}
	panic("no scalar of kind " + fd.Kind().String())
}

// TestJSONViewMatchesProtojson: the object a list filter evaluates is what
// protojson.Marshal and json.Unmarshal give, for every kind of field in the
// resources the simulator lists (and a well-known type).
func TestJSONViewMatchesProtojson(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []proto.Message{&computepb.Instance{}, &computepb.InstanceGroupManager{}, &computepb.InstanceGroupManagerResizeRequest{},
		&computepb.InstanceTemplate{}, &computepb.Operation{}, &computepb.ManagedInstance{}, &computepb.Image{}, &structpb.Struct{}}
	seen := map[protoreflect.Kind]bool{}
	for _, kind := range kinds {
		for i := 0; i < 50; i++ {
			m := kind.ProtoReflect().New()
			fill(rng, m, 4)
			if _, ok := kind.(*structpb.Struct); ok {
				m = (&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewStringValue("b"), "n": structpb.NewNumberValue(1.5)}}).ProtoReflect()
			}
			var walk func(protoreflect.Message)
			walk = func(m protoreflect.Message) {
				m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
					seen[fd.Kind()] = true
					if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
						walk(v.Message())
					}
					return true
				})
			}
			walk(m)
			b, err := protojson.Marshal(m.Interface())
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			got, err := jsonView(m.Interface(), nil)
			if err != nil {
				t.Fatalf("%s: %v", m.Descriptor().FullName(), err)
			}
			if d := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) })); d != "" {
				t.Fatalf("%s: jsonView differs from protojson (-protojson +jsonView):\n%s\n%s", m.Descriptor().FullName(), d, b)
			}
		}
	}
	for _, k := range []protoreflect.Kind{protoreflect.BoolKind, protoreflect.StringKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Uint64Kind, protoreflect.MessageKind} {
		if !seen[k] {
			t.Errorf("no field of kind %s was exercised", k)
		}
	}
	if _, err := jsonView(&computepb.Instance{Name: proto.String("\xff")}, nil); err == nil {
		t.Error("invalid UTF-8 was accepted (protojson rejects it)")
	}
}

// TestFilterOnFieldsItNames: a filter evaluated on the view of the fields
// it names agrees with its evaluation on the whole object.
func TestFilterOnFieldsItNames(t *testing.T) {
	filters := []string{`labels.RUNNING = "a3u-0"`, `(labels.RUNNING = "a3u-0") (status != RUNNING)`, `name eq "a3u-.*"`,
		`NOT name:*`, `(scheduling.provisioningModel = "x y\"z\\") OR (status != RUNNING)`, `id > 5`, `disks.boot = true`}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, text := range filters {
		f, err := parseFilter(text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		only := filterFields(f)
		if len(only) == 0 {
			t.Fatalf("%s: no fields named", text)
		}
		matched := 0
		for i := 0; i < 200; i++ {
			m := (&computepb.Instance{}).ProtoReflect()
			fill(rng, m, 3)
			full, err := jsonView(m.Interface(), nil)
			if err != nil {
				t.Fatal(err)
			}
			part, err := jsonView(m.Interface(), only)
			if err != nil {
				t.Fatal(err)
			}
			if len(part) >= len(full) && len(full) > len(only) {
				t.Fatalf("%s: the view of %v keeps %d of %d fields", text, only, len(part), len(full))
			}
			if a, b := f.eval(full), f.eval(part); a != b {
				t.Fatalf("%s: %t on the whole object, %t on the fields it names", text, a, b)
			} else if a {
				matched++
			}
		}
		t.Logf("%s: %d of 200 matched", text, matched)
	}
}

// TestTypedViewMatchesJSONView: where typedView answers, it gives what
// jsonView gives, for random VMs, MIGs and resize requests and every set
// of the fields it reads; it declines other fields and messages and
// values jsonView refuses, and answers the list calls flexslurm makes.
func TestTypedViewMatchesJSONView(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	kinds := []proto.Message{&computepb.Instance{}, &computepb.InstanceGroupManager{}, &computepb.InstanceGroupManagerResizeRequest{}}
	sets := []map[string]bool{
		{"name": true, "creationTimestamp": true},
		{"name": true, "creationTimestamp": true, "labels": true},
		{"labels": true}, {"name": true}, {},
	}
	answered := 0
	for _, kind := range kinds {
		for i := 0; i < 100; i++ {
			m := kind.ProtoReflect().New()
			fill(rng, m, 2)
			if i%10 == 0 { // a value protojson refuses
				if in, ok := m.Interface().(*computepb.Instance); ok && len(in.Labels) > 0 {
					for k := range in.Labels {
						in.Labels[k] = "\xff"
					}
				} else {
					m.Set(m.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString("a\xff"))
				}
			}
			for _, only := range sets {
				got, ok := typedView(m.Interface(), only)
				want, err := jsonView(m.Interface(), only)
				_, vm := kind.(*computepb.Instance)
				switch {
				case !ok && err == nil && (vm || !only["labels"]):
					t.Fatalf("%s %v: typedView declined a view jsonView gives: %v", m.Descriptor().FullName(), only, want)
				case !ok:
					continue
				case err != nil:
					t.Fatalf("%s %v: typedView gave %v where jsonView fails: %v", m.Descriptor().FullName(), only, got, err)
				}
				answered++
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("%s %v: typedView differs from jsonView (-jsonView +typedView):\n%s", m.Descriptor().FullName(), only, d)
				}
			}
		}
	}
	if answered < 1000 {
		t.Errorf("typedView answered %d views, want most of 1500", answered)
	}
	for _, c := range []struct {
		m    proto.Message
		only map[string]bool
	}{
		{&computepb.InstanceGroupManager{Name: proto.String("m")}, map[string]bool{"labels": true}},
		{&computepb.Instance{Name: proto.String("i")}, map[string]bool{"status": true}},
		{&computepb.Instance{Name: proto.String("i")}, nil},
		{&computepb.InstanceTemplate{Name: proto.String("t")}, map[string]bool{"name": true}},
	} {
		if v, ok := typedView(c.m, c.only); ok {
			t.Errorf("typedView(%v, %v) = %v, want it left to jsonView", c.m, c.only, v)
		}
	}
}
