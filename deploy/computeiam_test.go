package deploy

// The Compute permissions of the function accounts, derived from the code.
//
// The functions' binary is the repository root package (../functions.go).
// computeCalls type-checks every flexslurm package it links, from source,
// and follows every function and method a body names, from each entry
// point that functions.go registers, through interface methods to every
// flexslurm type implementing them (conservative: a call reachable in the
// code counts, whatever the data). What it reaches of the
// cloud.google.com/go/compute/apiv1 clients is the set of Compute RPCs that
// entry point may make; computeRPCPermissions maps each RPC to the IAM
// permissions Compute's REST reference names for it ("Authorization
// requires the following IAM permission", on each method's page under
// https://cloud.google.com/compute/docs/reference/rest/v1/). The
// operator's tools (flexslurm apply, preflight, teardown, status) are other
// packages of cmd/ and shared/ that the root package does not link, and run
// as the operator's identity: they are not counted.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/flexslurm/flexslurm/shared/model"
	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/spec"
)

const (
	computeClients  = "cloud.google.com/go/compute/apiv1"
	typeInstance    = "compute.googleapis.com/Instance"
	typeTemplate    = "compute.googleapis.com/InstanceTemplate"
	computeRefV1URL = "https://cloud.google.com/compute/docs/reference/rest/v1/"
)

// computeRPCPermissions maps each Compute RPC (client type and method of
// cloud.google.com/go/compute/apiv1) that flexslurm's functions may make to
// the IAM permissions its REST reference page requires
// (computeRefV1URL + resource/method). A function reaching an RPC missing
// here fails TestComputePermissionsFollowTheCode until the RPC's permission
// is looked up and added.
var computeRPCPermissions = map[string][]string{
	// instanceTemplates/insert. The node account the template carries needs
	// iam.serviceAccounts.actAs, granted on that account only (node.tf).
	"InstanceTemplatesClient.Insert": {"compute.instanceTemplates.create"},
	// instanceGroupManagers/insert and /setInstanceTemplate read the
	// template they name (compute.instanceTemplates.useReadOnly).
	//
	// A MIG that references a workload policy (resourcePolicies.workloadPolicy,
	// compact placement: docs/design/placement.md) uses that policy: compute.resourcePolicies.use, the
	// permission Compute checks to attach a resource policy to a resource.
	"InstanceGroupManagersClient.Insert":              {"compute.instanceGroupManagers.create", "compute.instanceTemplates.useReadOnly", "compute.resourcePolicies.use"},
	"InstanceGroupManagersClient.Get":                 {"compute.instanceGroupManagers.get"},
	"InstanceGroupManagersClient.SetInstanceTemplate": {"compute.instanceGroupManagers.update", "compute.instanceTemplates.useReadOnly"},
	"InstanceGroupManagersClient.Delete":              {"compute.instanceGroupManagers.delete"},
	"InstanceGroupManagersClient.List":                {"compute.instanceGroupManagers.list"},
	// instanceGroupManagers/deleteInstances: "on the specified resource
	// instanceGroupManager: compute.instanceGroupManagers.update". The
	// group deletes its VMs as the Google APIs service agent
	// (https://cloud.google.com/compute/docs/access/service-accounts), not
	// as the caller.
	"InstanceGroupManagersClient.DeleteInstances": {"compute.instanceGroupManagers.update"},
	// instanceGroupManagerResizeRequests/*: a permission on the MIG
	// ("on the specified resource instanceGroupManager"); the VMs a request
	// creates are created by the Google APIs service agent.
	"InstanceGroupManagerResizeRequestsClient.Insert": {"compute.instanceGroupManagers.update"},
	"InstanceGroupManagerResizeRequestsClient.Get":    {"compute.instanceGroupManagers.get"},
	"InstanceGroupManagerResizeRequestsClient.List":   {"compute.instanceGroupManagers.get"},
	"InstanceGroupManagerResizeRequestsClient.Cancel": {"compute.instanceGroupManagers.update"},
	"InstanceGroupManagerResizeRequestsClient.Delete": {"compute.instanceGroupManagers.update"},
	// regionInstanceGroupManagers/* and regionInstanceGroupManagerResizeRequests/*
	// (a multi-zone pool's regional request MIGs: docs/design/zones.md): Compute
	// checks the same compute.instanceGroupManagers.* permissions on a
	// regional MIG as on a zonal one (each method's "IAM Permissions" in
	// https://cloud.google.com/compute/docs/reference/rest/v1/regionInstanceGroupManagers).
	"RegionInstanceGroupManagersClient.Insert":               {"compute.instanceGroupManagers.create", "compute.instanceTemplates.useReadOnly", "compute.resourcePolicies.use"},
	"RegionInstanceGroupManagersClient.Get":                  {"compute.instanceGroupManagers.get"},
	"RegionInstanceGroupManagersClient.Delete":               {"compute.instanceGroupManagers.delete"},
	"RegionInstanceGroupManagersClient.List":                 {"compute.instanceGroupManagers.list"},
	"RegionInstanceGroupManagersClient.ListManagedInstances": {"compute.instanceGroupManagers.get"},
	"RegionInstanceGroupManagersClient.DeleteInstances":      {"compute.instanceGroupManagers.update"},
	"RegionInstanceGroupManagerResizeRequestsClient.Insert":  {"compute.instanceGroupManagers.update"},
	"RegionInstanceGroupManagerResizeRequestsClient.Get":     {"compute.instanceGroupManagers.get"},
	"RegionInstanceGroupManagerResizeRequestsClient.List":    {"compute.instanceGroupManagers.get"},
	"RegionInstanceGroupManagerResizeRequestsClient.Cancel":  {"compute.instanceGroupManagers.update"},
	"RegionInstanceGroupManagerResizeRequestsClient.Delete":  {"compute.instanceGroupManagers.update"},
	"InstancesClient.List":                                   {"compute.instances.list"},
	"InstancesClient.Get":                                    {"compute.instances.get"},
	"InstancesClient.ReportHostAsFaulty":                     {"compute.instances.reportHostAsFaulty"},
	"InstancesClient.Start":                                  {"compute.instances.start"},
	// resourcePolicies/insert and /get: a pool's workload policy, made sure
	// of before a request MIG references it
	// (https://cloud.google.com/compute/docs/instance-groups/create-workload-policies:
	// "To create a workload policy: compute.resourcePolicies.create on the
	// project").
	"ResourcePoliciesClient.Insert": {"compute.resourcePolicies.create"},
	"ResourcePoliciesClient.Get":    {"compute.resourcePolicies.get"},
	// What the API function's image resolution calls.
	"ImagesClient.Get":           {"compute.images.get"},
	"ImagesClient.GetFromFamily": {"compute.images.getFromFamily"},
}

// computeOperationScope is where (*compute.Operation).Wait polls the
// operation a client's mutation returns: global resources through
// globalOperations.get, zonal ones through zoneOperations.get
// (cloud.google.com/go/compute/apiv1 operations.go).
var computeOperationScope = map[string]string{
	"InstanceTemplatesClient":                        "compute.globalOperations.get",
	"InstanceGroupManagersClient":                    "compute.zoneOperations.get",
	"InstanceGroupManagerResizeRequestsClient":       "compute.zoneOperations.get",
	"InstancesClient":                                "compute.zoneOperations.get",
	"ResourcePoliciesClient":                         "compute.regionOperations.get",
	"RegionInstanceGroupManagersClient":              "compute.regionOperations.get",
	"RegionInstanceGroupManagerResizeRequestsClient": "compute.regionOperations.get",
}

// conditionType is the resource type on which Compute checks a permission,
// for the permissions checked on a resource type that accepts IAM
// Conditions on its name: instances and instance templates are among the
// Compute resource types that do ("Resource types that accept conditional
// role bindings", https://cloud.google.com/iam/help/conditions/resource-policies,
// and "Resource attributes for IAM Conditions",
// https://cloud.google.com/iam/docs/conditions-resource-attributes). Every
// other permission is checked on a type neither page lists (managed instance
// groups, which also hold their resize requests; zones' and the global
// operations) or on the project (list, create): it is granted without a
// condition, which could only refuse it.
var conditionType = map[string]string{
	"compute.instances.get":                 typeInstance,
	"compute.instances.start":               typeInstance,
	"compute.instances.reportHostAsFaulty":  typeInstance,
	"compute.instanceTemplates.useReadOnly": typeTemplate,
}

// listedPackage is one package of `go list -json`.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Error      *struct{ Err string }
}

// program is the root package and every flexslurm package it links,
// type-checked from source; other packages come from their export data.
type program struct {
	fset  *token.FileSet
	pkgs  map[string]*types.Package
	info  map[*types.Package]*types.Info
	files map[*types.Package][]*ast.File
	decls map[*types.Func]*ast.FuncDecl
	infos map[*ast.FuncDecl]*types.Info
	named []*types.TypeName // flexslurm's non-interface named types
	root  *types.Package
}

var (
	progOnce sync.Once
	prog     *program
	progErr  error
)

// loadProgram loads the functions' program once per test binary.
func loadProgram(t *testing.T) *program {
	t.Helper()
	progOnce.Do(func() { prog, progErr = loadFunctionsProgram() })
	if progErr != nil {
		t.Fatal(progErr)
	}
	return prog
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// loadFunctionsProgram lists the root package's dependencies with their
// export data and type-checks flexslurm's own from source.
func loadFunctionsProgram() (*program, error) {
	cmd := exec.Command("go", "list", "-e", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Error", ".")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export -deps of the root package: %v\n%s", err, stderr.String())
	}
	var list []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		list = append(list, p)
	}
	exports := map[string]string{}
	for _, p := range list {
		exports[p.ImportPath] = p.Export
	}
	pr := &program{
		fset: token.NewFileSet(), pkgs: map[string]*types.Package{}, info: map[*types.Package]*types.Info{},
		files: map[*types.Package][]*ast.File{}, decls: map[*types.Func]*ast.FuncDecl{}, infos: map[*ast.FuncDecl]*types.Info{},
	}
	gc := importer.ForCompiler(pr.fset, "gc", func(path string) (io.ReadCloser, error) {
		f := exports[path]
		if f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	imp := importerFunc(func(path string) (*types.Package, error) {
		if p, ok := pr.pkgs[path]; ok {
			return p, nil
		}
		if path == modulePath || strings.HasPrefix(path, modulePath+"/") {
			return nil, fmt.Errorf("%s imported before it was checked", path)
		}
		return gc.Import(path)
	})
	// go list -deps lists every package after its dependencies.
	for _, p := range list {
		if p.ImportPath != modulePath && !strings.HasPrefix(p.ImportPath, modulePath+"/") {
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(pr.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}}
		var errs []error
		conf := types.Config{Importer: imp, Error: func(err error) { errs = append(errs, err) }}
		pkg, _ := conf.Check(p.ImportPath, pr.fset, files, info)
		if len(errs) > 0 {
			return nil, fmt.Errorf("type-checking %s: %v", p.ImportPath, errs[0])
		}
		pr.pkgs[p.ImportPath], pr.info[pkg], pr.files[pkg] = pkg, info, files
		for _, f := range files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok {
					if fn, ok := info.Defs[fd.Name].(*types.Func); ok {
						pr.decls[fn], pr.infos[fd] = fd, info
					}
				}
			}
		}
		// Every named type, those declared in function bodies included.
		for _, obj := range info.Defs {
			tn, ok := obj.(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			if n, ok := tn.Type().(*types.Named); ok && !types.IsInterface(n) {
				pr.named = append(pr.named, tn)
			}
		}
	}
	pr.root = pr.pkgs[modulePath]
	if pr.root == nil {
		return nil, fmt.Errorf("the root package %s was not loaded", modulePath)
	}
	return pr, nil
}

// entry is what one registered entry point runs: a function, or the
// skeleton (shared/apply Entry) over a package's Function, whose
// initialiser names what the function runs (its Peek and Route).
type entry struct {
	fn   *types.Func
	init ast.Node // the Function var's initialiser, or nil
	info *types.Info
}

// applyPkg is the package of the skeleton every event-driven function
// runs through.
const applyPkg = modulePath + "/shared/apply"

// entryPoints returns what functions.go registers, by entry point name:
// functions.CloudEvent(NAME, pkg.Func) or, for the skeleton,
// functions.CloudEvent(NAME, apply.Entry(runner, pkg.Function)).
func (pr *program) entryPoints() (map[string]entry, error) {
	info := pr.info[pr.root]
	out := map[string]entry{}
	for _, f := range pr.files[pr.root] {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			fn, ok := info.Uses[sel.Sel].(*types.Func)
			if !ok || fn.Pkg() == nil || fn.Pkg().Path() != "github.com/GoogleCloudPlatform/functions-framework-go/functions" {
				return true
			}
			name := info.Types[call.Args[0]].Value
			if name == nil || name.Kind() != constant.String {
				return true
			}
			var e entry
			switch a := call.Args[1].(type) {
			case *ast.SelectorExpr:
				e.fn, _ = info.Uses[a.Sel].(*types.Func)
			case *ast.Ident:
				e.fn, _ = info.Uses[a].(*types.Func)
			case *ast.CallExpr:
				// apply.Entry(runner, pkg.Function): the skeleton, the
				// runner it is given, and what the Function var names.
				e = pr.skeletonEntry(a, info)
			}
			if e.fn == nil {
				return true
			}
			out[constant.StringVal(name)] = e
			return true
		})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("functions.go registers no entry point")
	}
	return out, nil
}

// skeletonEntry reads apply.Entry(runner, pkg.Function).
func (pr *program) skeletonEntry(call *ast.CallExpr, info *types.Info) entry {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || len(call.Args) != 2 {
		return entry{}
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != applyPkg || fn.Name() != "Entry" {
		return entry{}
	}
	e := entry{fn: fn, init: call.Args[0], info: info}
	arg, ok := call.Args[1].(*ast.SelectorExpr)
	if !ok {
		return entry{}
	}
	v, ok := info.Uses[arg.Sel].(*types.Var)
	if !ok {
		return entry{}
	}
	for _, f := range pr.files[v.Pkg()] {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if pr.info[v.Pkg()].Defs[id] == v && i < len(vs.Values) {
						// The runner argument and the Function's
						// initialiser, visited as one body.
						e.init = &ast.CallExpr{Fun: call.Args[0], Args: []ast.Expr{vs.Values[i]}}
						e.info = mergedInfo(info, pr.info[v.Pkg()])
					}
				}
			}
		}
	}
	return e
}

// mergedInfo is the Uses of two packages' infos (their identifiers are
// distinct nodes).
func mergedInfo(a, b *types.Info) *types.Info {
	m := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	for k, v := range a.Uses {
		m.Uses[k] = v
	}
	for k, v := range b.Uses {
		m.Uses[k] = v
	}
	return m
}

// isFunctionVar reports whether a package-level var is an entry point's
// Function (shared/apply): what its initialiser names runs only in that
// entry point, which entryPoints follows.
func isFunctionVar(info *types.Info, vs *ast.ValueSpec) bool {
	for _, id := range vs.Names {
		v, ok := info.Defs[id].(*types.Var)
		if !ok {
			continue
		}
		if n, ok := v.Type().(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == applyPkg && n.Obj().Name() == "Function" {
			return true
		}
	}
	return false
}

// reach follows the functions a body names.
type reach struct {
	pr    *program
	seen  map[*types.Func]bool
	rpcs  map[string]bool // "InstancesClient.Get"
	waits bool            // (*compute.Operation).Wait or Poll is reached
	impls map[*types.Func][]*types.Func
}

func newReach(pr *program) *reach {
	return &reach{pr: pr, seen: map[*types.Func]bool{}, rpcs: map[string]bool{}, impls: map[*types.Func][]*types.Func{}}
}

func (r *reach) visit(f *types.Func) {
	f = f.Origin()
	if r.seen[f] {
		return
	}
	r.seen[f] = true
	sig, _ := f.Type().(*types.Signature)
	if f.Pkg() != nil && f.Pkg().Path() == computeClients {
		if sig == nil || sig.Recv() == nil {
			return // constructors make no call
		}
		recv := sig.Recv().Type()
		if p, ok := recv.(*types.Pointer); ok {
			recv = p.Elem()
		}
		named, ok := recv.(*types.Named)
		if !ok {
			return
		}
		typ := named.Obj().Name()
		switch {
		case typ == "Operation" && (f.Name() == "Wait" || f.Name() == "Poll"):
			r.waits = true
		case strings.HasSuffix(typ, "Client") && f.Name() != "Close" && f.Name() != "Connection":
			r.rpcs[typ+"."+f.Name()] = true
		}
		return
	}
	if sig != nil && sig.Recv() != nil && types.IsInterface(sig.Recv().Type()) {
		for _, m := range r.implementations(f) {
			r.visit(m)
		}
		return
	}
	decl := r.pr.decls[f]
	if decl == nil || decl.Body == nil {
		return // outside flexslurm
	}
	r.body(decl.Body, r.pr.infos[decl])
}

func (r *reach) body(n ast.Node, info *types.Info) {
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if g, ok := info.Uses[id].(*types.Func); ok {
				r.visit(g)
			}
		}
		return true
	})
}

// implementations returns the methods of flexslurm's types that an
// interface method call may run.
func (r *reach) implementations(f *types.Func) []*types.Func {
	if out, ok := r.impls[f]; ok {
		return out
	}
	iface := f.Type().(*types.Signature).Recv().Type().Underlying().(*types.Interface)
	var out []*types.Func
	for _, tn := range r.pr.named {
		if tn.Type().(*types.Named).TypeParams().Len() > 0 {
			// A generic type: whether an instance implements the
			// interface depends on its type arguments; take its method of
			// that name, if any (over-approximating).
			if m, ok := lookupMethod(types.NewPointer(tn.Type()), f.Pkg(), f.Name()); ok {
				out = append(out, m)
			}
			continue
		}
		for _, t := range []types.Type{tn.Type(), types.NewPointer(tn.Type())} {
			if !types.Implements(t, iface) {
				continue
			}
			if m, ok := lookupMethod(t, f.Pkg(), f.Name()); ok {
				out = append(out, m)
			}
			break
		}
	}
	r.impls[f] = out
	return out
}

func lookupMethod(t types.Type, pkg *types.Package, name string) (*types.Func, bool) {
	obj, _, _ := types.LookupFieldOrMethod(t, true, pkg, name)
	m, ok := obj.(*types.Func)
	return m, ok
}

// startup visits what runs in every deployment before any entry point:
// package initialisers of every flexslurm package but the root, whose
// init only registers the entry points.
func (r *reach) startup() {
	for pkg, files := range r.pr.files {
		if pkg == r.pr.root {
			continue
		}
		info := r.pr.info[pkg]
		for _, f := range files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.Name == "init" && d.Recv == nil && d.Body != nil {
						r.body(d.Body, info)
					}
				case *ast.GenDecl:
					if d.Tok != token.VAR {
						continue
					}
					for _, spec := range d.Specs {
						if vs, ok := spec.(*ast.ValueSpec); ok && !isFunctionVar(info, vs) {
							r.body(vs, info)
						}
					}
				}
			}
		}
	}
}

// permissions maps the RPCs reached to their IAM permissions; unmapped
// lists RPCs computeRPCPermissions does not know.
func (r *reach) permissions() (perms map[string][]string, unmapped []string) {
	perms = map[string][]string{} // permission → the RPCs that need it
	add := func(p, why string) { perms[p] = append(perms[p], why) }
	for rpc := range r.rpcs {
		ps, ok := computeRPCPermissions[rpc]
		if !ok {
			unmapped = append(unmapped, rpc)
			continue
		}
		for _, p := range ps {
			add(p, rpc)
		}
		client, _, _ := strings.Cut(rpc, ".")
		if op, ok := computeOperationScope[client]; ok && r.waits && returnsOperation(r.pr, rpc) {
			add(op, rpc+" (its operation, polled)")
		}
	}
	for _, v := range perms {
		sort.Strings(v)
	}
	sort.Strings(unmapped)
	return perms, unmapped
}

// returnsOperation reports whether a client method returns a
// *compute.Operation (a mutation whose operation Wait polls).
func returnsOperation(pr *program, rpc string) bool {
	client, method, _ := strings.Cut(rpc, ".")
	var pkg *types.Package
	for _, p := range pr.pkgs {
		for _, imp := range p.Imports() {
			if imp.Path() == computeClients {
				pkg = imp
			}
		}
	}
	if pkg == nil {
		return false
	}
	tn, ok := pkg.Scope().Lookup(client).(*types.TypeName)
	if !ok {
		return false
	}
	m, ok := lookupMethod(types.NewPointer(tn.Type()), pkg, method)
	if !ok {
		return false
	}
	res := m.Type().(*types.Signature).Results()
	if res.Len() == 0 {
		return false
	}
	p, ok := res.At(0).Type().(*types.Pointer)
	if !ok {
		return false
	}
	n, ok := p.Elem().(*types.Named)
	return ok && n.Obj().Name() == "Operation" && n.Obj().Pkg().Path() == computeClients
}

// computeCalls returns, for each entry point, the Compute permissions its
// deployment may use (permission → the RPCs that need it).
func computeCalls(t *testing.T) map[string]map[string][]string {
	t.Helper()
	pr := loadProgram(t)
	entries, err := pr.entryPoints()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	for name, e := range entries {
		r := newReach(pr)
		r.startup()
		r.visit(e.fn)
		if e.init != nil {
			r.body(e.init, e.info)
		}
		perms, unmapped := r.permissions()
		for _, rpc := range unmapped {
			t.Errorf("entry point %s may call Compute %s, which computeRPCPermissions does not map: look up the method's IAM permission in Compute's REST reference (%s) and add it", name, rpc, computeRefV1URL)
		}
		out[name] = perms
	}
	return out
}

// identityOf returns, for each entry point, the function identity
// (google_service_account.function key) its deployments run as.
func identityOf(t *testing.T, m *module) map[string]string {
	t.Helper()
	fns := m.locals["functions"]
	if fns == cty.NilVal || !fns.IsWhollyKnown() {
		t.Fatal("local.functions is not known")
	}
	out := map[string]string{}
	for k, f := range fns.AsValueMap() {
		entry, id := str1(get(f, "entry_point")), str1(get(f, "identity"))
		if prev, ok := out[entry]; ok && prev != id {
			t.Fatalf("local.functions[%s]: entry point %s runs as %s and as %s", k, entry, prev, id)
		}
		out[entry] = id
	}
	// The HTTP entry point (deploy/api.tf) runs as function["api"].
	if api := m.blocksOf("google_cloudfunctions2_function"); len(api) > 0 {
		for _, b := range api {
			if b.name != "api" || len(b.instances) != 1 {
				continue
			}
			entry := str1(get(b.instances[0].value, "build_config", 0, "entry_point"))
			if sa, ok := m.ref1(get(b.instances[0].value, "service_config", 0, "service_account_email")); ok && sa.b.typ == "google_service_account" && sa.b.name == "function" {
				out[entry] = sa.key
			}
		}
	}
	return out
}

// computeGrant is one grant of a custom role to a function account.
type computeGrant struct {
	addr        string
	identity    string
	permissions []string
	condition   string // "" when unconditional
}

// functionComputeGrants returns every grant to a function account of a
// role holding Compute permissions, and fails on a predefined Compute role.
func functionComputeGrants(t *testing.T, m *module) []computeGrant {
	t.Helper()
	var out []computeGrant
	for _, b := range m.blocks {
		if _, ok := b.body.Attributes["role"]; !ok || b.instances == nil {
			continue
		}
		for _, in := range b.instances {
			mem, ok := m.ref1(get(in.value, "member"))
			if !ok || mem.b.typ != "google_service_account" || mem.b.name != "function" {
				continue
			}
			addr := b.instAddr(in.key)
			role := get(in.value, "role")
			if r, ok := str(role); ok && strings.HasPrefix(r, "roles/compute.") {
				t.Errorf("%s grants the predefined %s to %s: the function accounts get only custom roles of the permissions their code uses", addr, r, mem.key)
				continue
			}
			cr, ok := m.ref1(role)
			if !ok || cr.b.typ != "google_project_iam_custom_role" || cr.instance() == nil {
				continue
			}
			if b.typ != "google_project_iam_member" {
				t.Errorf("%s grants custom role %s as a %s; want google_project_iam_member", addr, cr.b.instAddr(cr.key), b.typ)
			}
			perms := strs(get(cr.instance().value, "permissions"))
			if len(perms) == 0 {
				t.Errorf("%s: custom role %s has no known permissions", addr, cr.b.instAddr(cr.key))
			}
			if p, _ := str(get(cr.instance().value, "project")); p != "my-proj" {
				t.Errorf("%s: custom role %s is defined in project %q, want the deployment's", addr, cr.b.instAddr(cr.key), p)
			}
			out = append(out, computeGrant{addr: addr, identity: mem.key, permissions: perms,
				condition: str1(get(in.value, "condition", 0, "expression"))})
		}
	}
	return out
}

// TestComputePermissionsFollowTheCode: each function account holds exactly
// the Compute permissions its entry points' code may use, those checked on
// instances and instance templates only under a condition, every other
// one without.
func TestComputePermissionsFollowTheCode(t *testing.T) {
	calls := computeCalls(t)
	m := loadModule(t)
	identity := identityOf(t, m)
	want := map[string]map[string][]string{} // identity → permission → why
	for entry, perms := range calls {
		id, ok := identity[entry]
		if !ok {
			t.Errorf("entry point %s is not deployed (local.functions)", entry)
			continue
		}
		if want[id] == nil {
			want[id] = map[string][]string{}
		}
		for p, why := range perms {
			want[id][p] = append(want[id][p], fmt.Sprintf("%s: %s", entry, strings.Join(why, ", ")))
		}
	}
	have := map[string]map[string][]string{} // identity → permission → grants
	for _, g := range functionComputeGrants(t, m) {
		if have[g.identity] == nil {
			have[g.identity] = map[string][]string{}
		}
		for _, p := range g.permissions {
			have[g.identity][p] = append(have[g.identity][p], g.addr)
			typ, named := conditionType[p]
			switch {
			case named && g.condition == "":
				t.Errorf("%s grants %s without a condition: Compute checks it on a %s, which accepts a condition on its name", g.addr, p, typ)
			case !named && strings.HasPrefix(p, "compute.") && g.condition != "":
				t.Errorf("%s grants %s under a condition on resource names: Compute checks it on a resource that takes no such condition, so the grant would be refused", g.addr, p)
			}
		}
	}
	ids := map[string]bool{}
	for id := range want {
		ids[id] = true
	}
	for id := range have {
		ids[id] = true
	}
	for id := range ids {
		for p, why := range want[id] {
			if _, ok := have[id][p]; !ok {
				t.Errorf("function account %s lacks %s, which its code needs (%s)", id, p, strings.Join(why, "; "))
			}
		}
		for p, where := range have[id] {
			if _, ok := want[id][p]; !ok {
				t.Errorf("function account %s holds %s (%s), which no code of its entry points calls", id, p, strings.Join(where, ", "))
			}
			if len(where) > 1 {
				t.Errorf("function account %s holds %s twice (%s)", id, p, strings.Join(where, ", "))
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("no Compute permission derived from the code")
	}
}

// TestComputeCallsSeenThroughInterfaces guards the derivation itself: the
// reconciler lists VMs only through the executor's Compute port
// (apply.Compute, implemented by *gce.Client), so seeing instances.list
// for Reconcile and not for Repair shows interface calls are followed and
// entry points are told apart.
func TestComputeCallsSeenThroughInterfaces(t *testing.T) {
	calls := computeCalls(t)
	if _, ok := calls["Reconcile"]["compute.instances.list"]; !ok {
		t.Errorf("Reconcile: instances.list not reached (got %v)", keys(calls["Reconcile"]))
	}
	if why, ok := calls["Repair"]["compute.instances.list"]; ok {
		t.Errorf("Repair: instances.list reached (%v), but only the reconciler observes Compute", why)
	}
	if _, ok := calls["Repair"]["compute.instances.reportHostAsFaulty"]; !ok {
		t.Errorf("Repair: instances.reportHostAsFaulty not reached (got %v)", keys(calls["Repair"]))
	}
}

// readmeComputeTable returns README.md's table "Compute permissions of the
// function accounts": permission → condition column and functions column.
func readmeComputeTable(t *testing.T) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## Compute permissions of the function accounts"
	_, sec, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	out := map[string][2]string{}
	re := regexp.MustCompile("^\\| `(compute\\.[A-Za-z.]+)` \\|([^|]*)\\|([^|]*)\\|([^|]*)\\|")
	for _, l := range strings.Split(sec, "\n") {
		if mm := re.FindStringSubmatch(l); mm != nil {
			out[mm[1]] = [2]string{strings.TrimSpace(mm[3]), strings.TrimSpace(mm[4])}
		}
	}
	return out
}

// TestComputePermissionsDocumented: README.md's table lists each permission
// the code needs, whether it is conditional, and which functions hold it.
func TestComputePermissionsDocumented(t *testing.T) {
	calls := computeCalls(t)
	doc := readmeComputeTable(t)
	entries := keys(calls)
	for p := range doc {
		found := false
		for _, e := range entries {
			_, ok := calls[e][p]
			found = found || ok
		}
		if !found {
			t.Errorf("README.md lists %s, which no function's code needs", p)
		}
	}
	for _, e := range entries {
		for p := range calls[e] {
			row, ok := doc[p]
			if !ok {
				t.Errorf("README.md does not list %s (needed by %s)", p, e)
				continue
			}
			if _, named := conditionType[p]; named != (row[0] != "none") {
				t.Errorf("README.md: %s has condition %q; conditional: %v", p, row[0], named)
			}
			var holders []string
			for _, e2 := range entries {
				if _, ok := calls[e2][p]; ok {
					holders = append(holders, e2)
				}
			}
			docHolders := row[1]
			if len(holders) == len(entries) {
				if docHolders != "all" {
					t.Errorf("README.md: %s held by %q, want all", p, docHolders)
				}
			} else if docHolders != strings.Join(holders, ", ") {
				t.Errorf("README.md: %s held by %q, want %q", p, docHolders, strings.Join(holders, ", "))
			}
		}
	}
}

// celCond is a parsed IAM condition over a resource's type and name, in
// the subset of CEL (https://cloud.google.com/iam/docs/conditions-overview)
// this configuration writes: ||, &&, parentheses, resource.type == / !=
// "…", resource.name == "…" and resource.name.startsWith("…").
type celCond func(typ, name string) bool

type celParser struct {
	toks []string
	i    int
}

var celToken = regexp.MustCompile(`^(\s+|\|\||&&|==|!=|\(|\)|"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_.]*)`)

func parseCEL(s string) (celCond, error) {
	p := &celParser{}
	for rest := s; rest != ""; {
		m := celToken.FindString(rest)
		if m == "" {
			return nil, fmt.Errorf("condition %q: unexpected %q", s, rest)
		}
		if strings.TrimSpace(m) != "" {
			p.toks = append(p.toks, m)
		}
		rest = rest[len(m):]
	}
	c, err := p.or()
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", s, err)
	}
	if p.i != len(p.toks) {
		return nil, fmt.Errorf("condition %q: trailing %v", s, p.toks[p.i:])
	}
	return c, nil
}

func (p *celParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *celParser) next() string { t := p.peek(); p.i++; return t }

func (p *celParser) or() (celCond, error) {
	l, err := p.and()
	for err == nil && p.peek() == "||" {
		p.next()
		var r celCond
		if r, err = p.and(); err == nil {
			a, b := l, r
			l = func(t, n string) bool { return a(t, n) || b(t, n) }
		}
	}
	return l, err
}

func (p *celParser) and() (celCond, error) {
	l, err := p.unary()
	for err == nil && p.peek() == "&&" {
		p.next()
		var r celCond
		if r, err = p.unary(); err == nil {
			a, b := l, r
			l = func(t, n string) bool { return a(t, n) && b(t, n) }
		}
	}
	return l, err
}

func (p *celParser) str() (string, error) {
	t := p.next()
	if !strings.HasPrefix(t, `"`) {
		return "", fmt.Errorf("want a string literal, have %q", t)
	}
	return strconv.Unquote(t)
}

func (p *celParser) unary() (celCond, error) {
	switch t := p.next(); t {
	case "(":
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.next() != ")" {
			return nil, fmt.Errorf("unclosed (")
		}
		return c, nil
	case "resource.type", "resource.name":
		op := p.next()
		if op != "==" && op != "!=" {
			return nil, fmt.Errorf("%s %s: want == or !=", t, op)
		}
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		isType, eq := t == "resource.type", op == "=="
		return func(typ, name string) bool {
			got := name
			if isType {
				got = typ
			}
			return (got == v) == eq
		}, nil
	case "resource.name.startsWith":
		if p.next() != "(" {
			return nil, fmt.Errorf("startsWith without (")
		}
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		if p.next() != ")" {
			return nil, fmt.Errorf("startsWith(%q without )", v)
		}
		return func(_, name string) bool { return strings.HasPrefix(name, v) }, nil
	default:
		return nil, fmt.Errorf("unexpected %q", t)
	}
}

// TestAttackComputeConditionRefusesOtherNames: the condition of every conditional
// Compute grant parses, admits the names shared/naming gives this
// cluster's VMs (in each pool's zone) and instance templates, and refuses
// other clusters', other projects', other zones' and other types' names.
func TestAttackComputeConditionRefusesOtherNames(t *testing.T) {
	m := loadModule(t)
	data, err := os.ReadFile(filepath.Join("..", "examples", "cluster_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	const project = "my-proj"
	type probe struct {
		what, typ, name string
	}
	var allowed, refused []probe
	vm := func(cluster, pool string, i int, gen int64) string {
		return model.VMName(model.NodeName(cluster, pool, i), gen)
	}
	for _, p := range c.NodePools {
		for _, i := range []int{0, p.MaxNodeCount - 1} {
			for _, g := range []int64{1, 42} {
				allowed = append(allowed, probe{"VM of pool " + p.ID, typeInstance,
					fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, p.Zone, vm(c.ID, p.ID, i, g))})
			}
		}
		allowed = append(allowed, probe{"template of pool " + p.ID, typeTemplate,
			"projects/" + project + "/global/instanceTemplates/" + naming.Template(c.ID, p.ID, "any template body")})
		refused = append(refused,
			probe{"another cluster's VM", typeInstance, fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, p.Zone, vm("other", p.ID, 0, 1))},
			probe{"a VM of a cluster whose id extends this one's", typeInstance, fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, p.Zone, vm(c.ID+"x", p.ID, 0, 1))},
			probe{"this cluster's VM name in another project", typeInstance, fmt.Sprintf("projects/other-proj/zones/%s/instances/%s", p.Zone, vm(c.ID, p.ID, 0, 1))},
			probe{"this cluster's VM name in a zone of no pool", typeInstance, fmt.Sprintf("projects/%s/zones/europe-west4-a/instances/%s", project, vm(c.ID, p.ID, 0, 1))},
			probe{"a disk named like this cluster's VM", "compute.googleapis.com/Disk", fmt.Sprintf("projects/%s/zones/%s/disks/%s", project, p.Zone, vm(c.ID, p.ID, 0, 1))},
			probe{"another cluster's template", typeTemplate, "projects/" + project + "/global/instanceTemplates/" + naming.Template("other", p.ID, "body")},
			probe{"this cluster's template name in another project", typeTemplate, "projects/other-proj/global/instanceTemplates/" + naming.Template(c.ID, p.ID, "body")},
			probe{"a VM named like this cluster's template", typeInstance, fmt.Sprintf("projects/%s/zones/%s/instances/%s", project, p.Zone, naming.Template(c.ID, p.ID, "body"))},
			probe{"the project itself", "cloudresourcemanager.googleapis.com/Project", "projects/" + project},
		)
	}
	n := 0
	for _, g := range functionComputeGrants(t, m) {
		if g.condition == "" {
			continue
		}
		n++
		cond, err := parseCEL(g.condition)
		if err != nil {
			t.Errorf("%s: %v", g.addr, err)
			continue
		}
		for _, pr := range allowed {
			if !cond(pr.typ, pr.name) {
				t.Errorf("%s: the condition refuses %s %s (%s)", g.addr, pr.what, pr.name, pr.typ)
			}
		}
		for _, pr := range refused {
			if cond(pr.typ, pr.name) {
				t.Errorf("%s: the condition admits %s %s (%s)", g.addr, pr.what, pr.name, pr.typ)
			}
		}
	}
	if n == 0 {
		t.Fatal("no conditional Compute grant to a function account")
	}
}

// TestCELSubset guards the condition parser the test above relies on.
func TestCELSubset(t *testing.T) {
	c, err := parseCEL(`(resource.type == "A" && resource.name.startsWith("x/\"y")) || resource.name == "z"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ, name string
		want      bool
	}{{"A", `x/"y1`, true}, {"B", `x/"y1`, false}, {"A", "x/y", false}, {"B", "z", true}} {
		if got := c(tc.typ, tc.name); got != tc.want {
			t.Errorf("(%s, %s) = %v, want %v", tc.typ, tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{`resource.name.startsWith("a"`, `resource.type = "A"`, `resource.name.endsWith("a")`, `(resource.type == "A"`, `resource.type == "A" ||`, `resource.type == A`} {
		if _, err := parseCEL(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestAttackFunctionAccountsCannotTakeOverVMs: a function account used by
// someone else (a leaked token, a compromised dependency) cannot reach into
// a VM: no Compute permission that runs code or logs in on a VM (metadata,
// startup scripts, SSH keys, the VM's service account, serial port), that
// creates or deletes a VM, disk or image outside a MIG, or that changes a
// network or firewall is granted to it, nor any role that holds one.
func TestAttackFunctionAccountsCannotTakeOverVMs(t *testing.T) {
	m := loadModule(t)
	forbidden := []string{
		"compute.instances.setMetadata", "compute.projects.setCommonInstanceMetadata",
		"compute.instances.setServiceAccount", "compute.instances.create", "compute.instances.delete",
		"compute.instances.setLabels", "compute.instances.attachDisk", "compute.instances.updateNetworkInterface",
		"compute.instances.getSerialPortOutput", "compute.instances.osAdminLogin", "compute.instances.osLogin",
		"compute.instances.setIamPolicy", "compute.instances.stop", "compute.instances.reset",
		"compute.disks.create", "compute.disks.createSnapshot", "compute.images.create",
		"compute.firewalls.create", "compute.firewalls.update", "compute.networks.updatePolicy",
		"compute.subnetworks.use", "compute.instanceTemplates.delete",
	}
	grants := functionComputeGrants(t, m)
	if len(grants) == 0 {
		t.Fatal("no Compute grant to a function account")
	}
	for _, g := range grants {
		for _, p := range g.permissions {
			if slices.Contains(forbidden, p) {
				t.Errorf("%s grants %s to function account %s", g.addr, p, g.identity)
			}
		}
	}
	for _, b := range m.blocks {
		if _, ok := b.body.Attributes["role"]; !ok {
			continue
		}
		for _, in := range b.instances {
			mem, ok := m.ref1(get(in.value, "member"))
			if !ok || mem.b.typ != "google_service_account" || mem.b.name != "function" {
				continue
			}
			r, _ := str(get(in.value, "role"))
			for _, bad := range []string{"roles/owner", "roles/editor", "roles/compute."} {
				if strings.HasPrefix(r, bad) {
					t.Errorf("%s grants %s to function account %s", b.instAddr(in.key), r, mem.key)
				}
			}
			if r == "roles/iam.serviceAccountUser" && b.typ != "google_service_account_iam_member" {
				t.Errorf("%s grants %s to function account %s beyond one service account", b.instAddr(in.key), r, mem.key)
			}
		}
	}
}
