package plan

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

const slurmstatePath = "github.com/flexslurm/flexslurm/shared/slurmstate"

// TestDecisionsReadOnlyTypedSlurmFacts type-checks this package's
// decision code and fails where it reads Slurm's state as text instead of
// as the typed facts of package slurmstate:
//
//   - a string literal standing for a slurmstate value (n.State == "idle",
//     slices.Contains(n.Flags, "DRAIN"), sj.State != "PENDING"): use the
//     facts' methods or constants;
//   - a slurmstate value converted to a string (strings.ToLower(string(n.State)));
//   - a slurmstate value, or any Reason, handed to a function of package
//     strings or slices: a decision never parses a reason, Slurm's or its
//     own (whose reason it is, and which VM it names, are facts);
//   - flexslurm's reason prefix spelled out: decisions say why, and the
//     prefix is rendered where a command leaves flexslurm;
//   - a node's or job's stored reason compared (== or !=) anywhere but in
//     the write that skips an unchanged record (putNodeIfChanged,
//     putJobIfChanged): a decision never branches on a reason it wrote.
func TestDecisionsReadOnlyTypedSlurmFacts(t *testing.T) {
	fset, files, info := typeCheckHere(t)
	if len(files) == 0 {
		t.Fatal("no decision source found")
	}
	var problems []string
	report := func(n ast.Node, format string, args ...any) {
		problems = append(problems, fset.Position(n.Pos()).String()+": "+fmt.Sprintf(format, args...))
	}
	for _, f := range files {
		var allowed []ast.Node // the record writes that may compare reasons
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && (fd.Name.Name == "putNodeIfChanged" || fd.Name.Name == "putJobIfChanged") {
				allowed = append(allowed, fd)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if recordReasonCompared(info, x) && !slices.ContainsFunc(allowed, func(a ast.Node) bool { return a.Pos() <= x.Pos() && x.End() <= a.End() }) {
					report(x, "a record's reason compared: decide from a typed field (an unchanged record is skipped by putNodeIfChanged/putJobIfChanged)")
				}
			case *ast.BasicLit:
				if x.Kind == token.STRING && fromSlurmstate(info.TypeOf(x)) {
					report(x, "string literal %s stands for a %s: use slurmstate's constants or the facts' methods", x.Value, info.TypeOf(x))
				}
				if x.Kind == token.STRING && strings.Contains(x.Value, slurmstate.ReasonPrefix) {
					report(x, "string literal %s spells flexslurm's reason prefix: a decision gives why, the prefix is rendered where the command leaves flexslurm (event.RenderReason)", x.Value)
				}
			case *ast.CallExpr:
				if tv, ok := info.Types[x.Fun]; ok && tv.IsType() && len(x.Args) == 1 && fromSlurmstate(info.TypeOf(x.Args[0])) {
					if b, ok := tv.Type.Underlying().(*types.Basic); ok && b.Info()&types.IsString != 0 {
						report(x, "%s converted to a string: compare the typed facts", info.TypeOf(x.Args[0]))
					}
				}
				pkg := calledPackage(info, x)
				if pkg != "strings" && pkg != "slices" {
					return true
				}
				for _, a := range x.Args {
					if fromSlurmstate(info.TypeOf(a)) {
						report(a, "%s handed to package %s: use the facts' methods", info.TypeOf(a), pkg)
					}
					if sel, ok := ast.Unparen(a).(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" {
						report(a, "a reason read back with package %s: decide from a typed field", pkg)
					}
				}
			}
			return true
		})
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestTypedSlurmGuardCatches: the guard above flags each way of reading
// Slurm's state as text (a guard that cannot fail checks nothing).
func TestTypedSlurmGuardCatches(t *testing.T) {
	src := `package plan

import (
	"slices"
	"strings"

	"github.com/flexslurm/flexslurm/shared/model"
)

func bad(n model.SlurmNode, j model.SlurmJob, r model.Job) bool {
	return n.State == "idle" || slices.Contains(n.Flags, "DRAIN") || j.State != "PENDING" ||
		strings.ToLower(string(n.State)) == "down" || strings.HasPrefix(n.Reason, "flexslurm:") ||
		strings.HasPrefix(r.Reason, "nodes provisioned") || r.Reason != "waiting"
}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(dir, "bad.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := newInfo()
	if _, err := (&types.Config{Importer: exportImporter(t, fset)}).Check("x/plan", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	var lits, conversions, reasons, handed, compared int
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BinaryExpr:
			if recordReasonCompared(info, x) {
				compared++
			}
		case *ast.BasicLit:
			if fromSlurmstate(info.TypeOf(x)) {
				lits++
			}
		case *ast.CallExpr:
			if tv, ok := info.Types[x.Fun]; ok && tv.IsType() && fromSlurmstate(info.TypeOf(x.Args[0])) {
				conversions++
			}
			if pkg := calledPackage(info, x); pkg == "strings" || pkg == "slices" {
				for _, a := range x.Args {
					if fromSlurmstate(info.TypeOf(a)) {
						handed++
					}
					if sel, ok := a.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" {
						reasons++
					}
				}
			}
		}
		return true
	})
	// "idle", "DRAIN", "PENDING"; string(n.State); n.Flags and "DRAIN" to
	// slices.Contains; both reasons.
	if lits != 3 || conversions != 1 || handed != 2 || reasons != 2 || compared != 1 {
		t.Errorf("guard found %d literals, %d conversions, %d values handed to strings/slices, %d reasons, %d reasons compared; want 3, 1, 2, 2, 1",
			lits, conversions, handed, reasons, compared)
	}
}

// recordReasonCompared reports whether x compares (== or !=) the Reason
// field of a model.Node or model.Job.
func recordReasonCompared(info *types.Info, x *ast.BinaryExpr) bool {
	if x.Op != token.EQL && x.Op != token.NEQ {
		return false
	}
	for _, side := range []ast.Expr{x.X, x.Y} {
		sel, ok := ast.Unparen(side).(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Reason" {
			continue
		}
		t := info.TypeOf(sel.X)
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if named, ok := t.(*types.Named); ok && named.Obj().Pkg() != nil &&
			strings.HasSuffix(named.Obj().Pkg().Path(), "/shared/model") && (named.Obj().Name() == "Node" || named.Obj().Name() == "Job") {
			return true
		}
	}
	return false
}

func fromSlurmstate(t types.Type) bool {
	for {
		switch x := t.(type) {
		case *types.Named:
			return x.Obj().Pkg() != nil && x.Obj().Pkg().Path() == slurmstatePath
		case *types.Alias:
			t = types.Unalias(x)
		default:
			return false
		}
	}
}

// calledPackage is the import path of the package whose function x calls
// ("" for a method or a local function).
func calledPackage(info *types.Info, x *ast.CallExpr) string {
	sel, ok := ast.Unparen(x.Fun).(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	if pn, ok := info.Uses[id].(*types.PkgName); ok {
		return pn.Imported().Path()
	}
	return ""
}

func newInfo() *types.Info {
	return &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
}

// typeCheckHere type-checks the package's non-test files.
func typeCheckHere(t *testing.T) (*token.FileSet, []*ast.File, *types.Info) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := newInfo()
	if _, err := (&types.Config{Importer: exportImporter(t, fset)}).Check("github.com/flexslurm/flexslurm/shared/plan", fset, files, info); err != nil {
		t.Fatalf("type-checking the decisions: %v", err)
	}
	return fset, files, info
}

// exportImporter imports packages from the export data `go list -export`
// builds for this package's dependencies.
func exportImporter(t *testing.T, fset *token.FileSet) types.Importer {
	t.Helper()
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		t.Fatalf("the go tool, needed to type-check the decisions: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(file)
	})
}
