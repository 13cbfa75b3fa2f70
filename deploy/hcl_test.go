package deploy

// A small, partial Terraform evaluator for the checks in deploy_test.go: it
// parses *.tf with hcl/v2, evaluates variables (defaults or given values),
// locals and every resource and data instance (for_each expanded) with the
// handful of Terraform functions this configuration uses. Attributes only
// known after apply (ids, emails, writer identities, …) evaluate to markers,
// "⟨ADDRESS.ATTR⟩", that the checks resolve back to the resource instance
// they name, so "this function reads that topic" is a fact the test can
// check without a provider.

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// module is one evaluated Terraform configuration directory.
type module struct {
	dir       string
	vars      map[string]cty.Value
	localExpr map[string]hcl.Expression
	locals    map[string]cty.Value
	blocks    []*block // resources and data sources, in file order
	outputs   map[string]hcl.Expression
	computed  map[string]bool // attribute names that get markers when not set
	markers   map[string]ref
	funcs     map[string]function.Function
}

// block is a resource or data block.
type block struct {
	mode      string // "resource" or "data"
	typ, name string
	body      *hclsyntax.Body
	rng       hcl.Range
	forEach   bool
	instances []*instance // nil while for_each is unknown
}

func (b *block) addr() string {
	if b.mode == "data" {
		return "data." + b.typ + "." + b.name
	}
	return b.typ + "." + b.name
}

// instance is one expanded instance of a block.
type instance struct {
	key   string // for_each key; "" without for_each
	value cty.Value
}

func (b *block) instAddr(key string) string {
	if !b.forEach {
		return b.addr()
	}
	return fmt.Sprintf("%s[%q]", b.addr(), key)
}

// ref is what a marker stands for: attribute attr (a path such as "id" or
// "event_trigger[0].trigger") of instance key of block b.
type ref struct {
	b    *block
	key  string
	attr string
}

// metaArgs are block arguments that are not resource attributes.
var metaArgs = map[string]bool{"for_each": true, "count": true, "depends_on": true, "provider": true}

// alwaysComputed are attributes only the provider knows, given markers even
// when no expression of the configuration names them.
var alwaysComputed = []string{"id", "name", "email", "member", "number", "project_id",
	"writer_identity", "output_path", "output_sha256", "trigger", "service", "uri", "location"}

// load parses every *.tf of dir and evaluates it with the given variable
// values (which override defaults; variables without default must be given).
func load(dir string, given map[string]cty.Value) (*module, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no *.tf in %s (%v)", dir, err)
	}
	sort.Strings(paths)
	m := &module{
		dir: dir, vars: map[string]cty.Value{}, localExpr: map[string]hcl.Expression{},
		locals: map[string]cty.Value{}, outputs: map[string]hcl.Expression{},
		computed: map[string]bool{}, markers: map[string]ref{},
	}
	m.funcs = m.functions()
	for _, a := range alwaysComputed {
		m.computed[a] = true
	}
	p := hclparse.NewParser()
	var defaults = map[string]hcl.Expression{}
	var declared []string
	for _, path := range paths {
		f, diags := p.ParseHCLFile(path)
		if diags.HasErrors() {
			return nil, fmt.Errorf("parsing %s: %s", path, diags.Error())
		}
		body := f.Body.(*hclsyntax.Body)
		for _, blk := range body.Blocks {
			switch blk.Type {
			case "variable":
				declared = append(declared, blk.Labels[0])
				if a, ok := blk.Body.Attributes["default"]; ok {
					defaults[blk.Labels[0]] = a.Expr
				}
			case "locals":
				for name, a := range blk.Body.Attributes {
					m.localExpr[name] = a.Expr
				}
			case "resource", "data":
				b := &block{mode: blk.Type, typ: blk.Labels[0], name: blk.Labels[1], body: blk.Body, rng: blk.DefRange()}
				_, b.forEach = blk.Body.Attributes["for_each"]
				m.blocks = append(m.blocks, b)
			case "output":
				if a, ok := blk.Body.Attributes["value"]; ok {
					m.outputs[blk.Labels[0]] = a.Expr
				}
			}
		}
		// Every attribute named after a traversal step may be computed.
		hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			var steps hcl.Traversal
			switch e := n.(type) {
			case *hclsyntax.ScopeTraversalExpr:
				steps = e.Traversal
			case *hclsyntax.RelativeTraversalExpr:
				steps = e.Traversal
			}
			for _, s := range steps {
				if a, ok := s.(hcl.TraverseAttr); ok {
					m.computed[a.Name] = true
				}
			}
			return nil
		})
	}
	for _, name := range declared {
		if v, ok := given[name]; ok {
			m.vars[name] = v
			continue
		}
		e, ok := defaults[name]
		if !ok {
			return nil, fmt.Errorf("variable %q has no default and no value was given", name)
		}
		v, diags := e.Value(nil)
		if diags.HasErrors() {
			return nil, fmt.Errorf("default of variable %q: %s", name, diags.Error())
		}
		m.vars[name] = v
	}
	for name := range given {
		if _, ok := m.vars[name]; !ok {
			return nil, fmt.Errorf("value given for undeclared variable %q", name)
		}
	}
	// Locals and resources refer to each other; a few passes reach the
	// fixed point of this configuration's shallow graph.
	for range 8 {
		ctx := m.ctx(cty.NilVal)
		for name, e := range m.localExpr {
			v, diags := e.Value(ctx)
			if diags.HasErrors() {
				v = cty.DynamicVal
			}
			m.locals[name] = v
		}
		for _, b := range m.blocks {
			m.expand(b)
		}
	}
	return m, nil
}

// ctx is the evaluation context: var, local, path, data, every resource
// type, each (when not NilVal) and the functions.
func (m *module) ctx(each cty.Value) *hcl.EvalContext {
	vars := map[string]cty.Value{
		"var":   objectOrEmpty(m.vars),
		"local": objectOrEmpty(m.locals),
		"path":  cty.ObjectVal(map[string]cty.Value{"module": cty.StringVal("."), "root": cty.StringVal("."), "cwd": cty.StringVal(".")}),
	}
	byType := map[string]map[string]cty.Value{}
	data := map[string]map[string]cty.Value{}
	for _, b := range m.blocks {
		target := byType
		if b.mode == "data" {
			target = data
		}
		if target[b.typ] == nil {
			target[b.typ] = map[string]cty.Value{}
		}
		target[b.typ][b.name] = b.value()
	}
	for typ, names := range byType {
		vars[typ] = cty.ObjectVal(names)
	}
	dv := map[string]cty.Value{}
	for typ, names := range data {
		dv[typ] = cty.ObjectVal(names)
	}
	vars["data"] = objectOrEmpty(dv)
	if each != cty.NilVal {
		vars["each"] = each
	}
	return &hcl.EvalContext{Variables: vars, Functions: m.funcs}
}

func objectOrEmpty(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// value is the block as a reference sees it: the instance object, or an
// object of instances by key; unknown while for_each is.
func (b *block) value() cty.Value {
	if b.instances == nil {
		return cty.DynamicVal
	}
	if !b.forEach {
		return b.instances[0].value
	}
	vals := map[string]cty.Value{}
	for _, in := range b.instances {
		vals[in.key] = in.value
	}
	return objectOrEmpty(vals)
}

// expand evaluates for_each and every instance's attributes.
func (m *module) expand(b *block) {
	if !b.forEach {
		b.instances = []*instance{{value: m.object(b, "", b.body, m.ctx(cty.NilVal), "")}}
		return
	}
	fe, diags := b.body.Attributes["for_each"].Expr.Value(m.ctx(cty.NilVal))
	if diags.HasErrors() || !fe.IsWhollyKnown() || fe.IsNull() {
		b.instances = nil
		return
	}
	ins := []*instance{} // an empty for_each is known: no instances, not nil
	for it := fe.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if fe.Type().IsSetType() || fe.Type().IsListType() || fe.Type().IsTupleType() {
			k = v
		}
		if k.Type() != cty.String {
			b.instances = nil
			return
		}
		key := k.AsString()
		each := cty.ObjectVal(map[string]cty.Value{"key": k, "value": v})
		ins = append(ins, &instance{key: key, value: m.object(b, key, b.body, m.ctx(each), "")})
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].key < ins[j].key })
	b.instances = ins
}

// object evaluates body (the block's or a nested block's, at path prefix)
// into an object: its attributes, its nested blocks as tuples, and markers
// for the computed attributes it does not set.
func (m *module) object(b *block, key string, body *hclsyntax.Body, ctx *hcl.EvalContext, prefix string) cty.Value {
	attrs := map[string]cty.Value{}
	for name, a := range body.Attributes {
		if prefix == "" && metaArgs[name] {
			continue
		}
		v, diags := a.Expr.Value(ctx)
		if diags.HasErrors() {
			v = cty.DynamicVal
		}
		attrs[name] = v
	}
	nested := map[string][]cty.Value{}
	for _, nb := range body.Blocks {
		p := fmt.Sprintf("%s%s[%d]", prefix, nb.Type, len(nested[nb.Type]))
		nested[nb.Type] = append(nested[nb.Type], m.object(b, key, nb.Body, ctx, p+"."))
	}
	for typ, vs := range nested {
		attrs[typ] = cty.TupleVal(vs)
	}
	for name := range m.computed {
		if _, ok := attrs[name]; ok {
			continue
		}
		mk := "⟨" + b.instAddr(key) + "." + prefix + name + "⟩"
		m.markers[mk] = ref{b: b, key: key, attr: prefix + name}
		attrs[name] = cty.StringVal(mk)
	}
	return cty.ObjectVal(attrs)
}

var markerRe = regexp.MustCompile(`⟨[^⟩]*⟩`)

// refs returns what the markers in s stand for.
func (m *module) refs(s string) []ref {
	var out []ref
	for _, mk := range markerRe.FindAllString(s, -1) {
		if r, ok := m.markers[mk]; ok {
			out = append(out, r)
		}
	}
	return out
}

// ref1 returns the one marker s consists of.
func (m *module) ref1(v cty.Value) (ref, bool) {
	s, ok := str(v)
	if !ok {
		return ref{}, false
	}
	r, ok := m.markers[s]
	return r, ok
}

// blocksOf returns the blocks of a resource (or "data.TYPE") type.
func (m *module) blocksOf(typ string) []*block {
	var out []*block
	for _, b := range m.blocks {
		if b.typ == typ && b.mode == "resource" || "data."+b.typ == typ && b.mode == "data" {
			out = append(out, b)
		}
	}
	return out
}

// instanceOf returns the instance a ref names.
func (r ref) instance() *instance {
	for _, in := range r.b.instances {
		if in.key == r.key {
			return in
		}
	}
	return nil
}

// get walks an object by attribute names (string) and tuple indexes (int);
// cty.NilVal when a step is missing.
func get(v cty.Value, path ...any) cty.Value {
	for _, p := range path {
		if v == cty.NilVal || v.IsNull() || !v.IsKnown() {
			return cty.NilVal
		}
		switch s := p.(type) {
		case string:
			if !(v.Type().IsObjectType() && v.Type().HasAttribute(s)) {
				return cty.NilVal
			}
			v = v.GetAttr(s)
		case int:
			if !(v.Type().IsTupleType() || v.Type().IsListType()) || v.LengthInt() <= s {
				return cty.NilVal
			}
			v = v.Index(cty.NumberIntVal(int64(s)))
		}
	}
	return v
}

// str returns v as a known string.
func str(v cty.Value) (string, bool) {
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

// strs returns the known strings of a list, set or tuple.
func strs(v cty.Value) []string {
	if v == cty.NilVal || v.IsNull() || !v.IsWhollyKnown() || !v.CanIterateElements() {
		return nil
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if s, ok := str(e); ok {
			out = append(out, s)
		}
	}
	return out
}

// functions are the Terraform functions this configuration uses.
func (m *module) functions() map[string]function.Function {
	str1 := func(impl func(string) (cty.Value, error)) function.Function {
		return function.New(&function.Spec{
			Params: []function.Parameter{{Name: "s", Type: cty.String}},
			Type:   function.StaticReturnType(cty.String),
			Impl:   func(args []cty.Value, _ cty.Type) (cty.Value, error) { return impl(args[0].AsString()) },
		})
	}
	return map[string]function.Function{
		"file": str1(func(p string) (cty.Value, error) {
			if !filepath.IsAbs(p) {
				p = filepath.Join(m.dir, p)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(string(b)), nil
		}),
		"base64encode": str1(func(s string) (cty.Value, error) {
			return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(s))), nil
		}),
		"strcontains": function.New(&function.Spec{
			Params: []function.Parameter{{Name: "s", Type: cty.String}, {Name: "sub", Type: cty.String}},
			Type:   function.StaticReturnType(cty.Bool),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return cty.BoolVal(strings.Contains(args[0].AsString(), args[1].AsString())), nil
			},
		}),
		"toset":      stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tolist":     stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"concat":     stdlib.ConcatFunc,
		"contains":   stdlib.ContainsFunc,
		"distinct":   stdlib.DistinctFunc,
		"flatten":    stdlib.FlattenFunc,
		"format":     stdlib.FormatFunc,
		"join":       stdlib.JoinFunc,
		"jsondecode": stdlib.JSONDecodeFunc,
		"jsonencode": stdlib.JSONEncodeFunc,
		"keys":       stdlib.KeysFunc,
		"length":     stdlib.LengthFunc,
		"lookup":     stdlib.LookupFunc,
		"lower":      stdlib.LowerFunc,
		"merge":      stdlib.MergeFunc,
		"replace":    stdlib.ReplaceFunc,
		"split":      stdlib.SplitFunc,
		"substr":     stdlib.SubstrFunc,
		"trimprefix": stdlib.TrimPrefixFunc,
		"trimspace":  stdlib.TrimSpaceFunc,
		"trimsuffix": stdlib.TrimSuffixFunc,
		"values":     stdlib.ValuesFunc,
		"can":        tryfunc.CanFunc,
		"regex":      stdlib.RegexFunc,
	}
}
