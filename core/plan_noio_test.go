package core_test

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// ioPackages are packages whose every use is I/O, a clock, a goroutine's
// coordination or hidden randomness: plan code must not reach them.
var ioPackages = map[string]bool{
	"context": true, "net": true, "net/http": true, "os": true, "syscall": true, "sync": true,
	"sync/atomic": true, "log": true, "log/slog": true, "crypto/rand": true, "math/rand": true,
	"math/rand/v2": true, "io/fs": true,
}

// sharedStateFiles hold state that an engine's concurrent plans share
// through package sync or atomics, and why it is not I/O: a plan reads it
// as an input, as it reads now, and reports to it what a script told it.
var sharedStateFiles = map[string]string{
	"pagehint.go":   "the page geometry the steady beat last reported, a hint that is never wrong, only stale",
	"scripts.go":    "the scripts, made once per process when first used and the same from then on",
	"bucketseen.go": "the user buckets whose meta a script reported, an input to the next script as now is",
}

// ioTimeFuncs are the functions of package time that read the clock or wait.
var ioTimeFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTicker": true, "NewTimer": true,
}

// ioTypes are the package's types that stand for I/O or its driver: a plan
// must use none of them, nor call their methods.
var ioTypes = map[string]bool{
	"Store": true, "Publisher": true, "CachedReader": true, "Subscriber": true, "Engine": true,
	"Metrics": true, "Clock": true, "Feed": true,
}

// TestPlansDoNoIO type-checks the package and follows every function that
// the plan files (plan*.go) reach, through the package's own functions and
// methods, and fails if any of them uses an I/O package, reads the clock,
// starts a goroutine, uses a channel, or touches the store, publisher,
// cache, metrics or Engine (ioTypes). The plan makers' constructors
// (NewPlanner, newPlanner, which read Config) are roots too.
func TestPlansDoNoIO(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	var roots []string
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(".", name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		if strings.HasPrefix(name, "plan") {
			roots = append(roots, name)
		}
	}
	if len(roots) < 5 {
		t.Fatalf("plan files %v: want plan.go and the operations' plan_*.go", roots)
	}
	bad := checkNoIO(t, fset, files, roots)
	for _, b := range bad {
		t.Error(b)
	}
}

// TestPlansDoNoIOCatches: the check fails on plan code that does I/O.
func TestPlansDoNoIOCatches(t *testing.T) {
	src := map[string]string{
		"plan_x.go": `package x
import "time"
type Store interface{ Eval() }
func helper() int64 { return time.Now().UnixMilli() }
func PlanA(s Store) int64 { s.Eval(); return helper() }
func PlanB() { c := make(chan int); go func() { c <- 1 }() }
`,
		"engine.go": `package x
func unrelated() { _ = 1 }
`,
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range []string{"engine.go", "plan_x.go"} {
		f, err := parser.ParseFile(fset, name, src[name], 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	bad := checkNoIO(t, fset, files, []string{"plan_x.go"})
	want := []string{"time.Now", "Store", "Eval", "go statement", "channel"}
	all := strings.Join(bad, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("the check missed %q; it found:\n%s", w, all)
		}
	}
}

// checkNoIO type-checks files and returns what the functions reachable
// from the files named in roots do that plans must not.
func checkNoIO(t *testing.T, fset *token.FileSet, files []*ast.File, roots []string) []string {
	t.Helper()
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	decls := map[types.Object]*ast.FuncDecl{}
	var queue []*ast.FuncDecl
	isRoot := map[string]bool{}
	for _, r := range roots {
		isRoot[r] = true
	}
	for _, f := range files {
		name := filepath.Base(fset.Position(f.Pos()).Filename)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			decls[info.Defs[fd.Name]] = fd
			if isRoot[name] {
				queue = append(queue, fd)
			}
		}
	}
	seen := map[*ast.FuncDecl]bool{}
	var bad []string
	report := func(n ast.Node, fd *ast.FuncDecl, what string) {
		pos := fset.Position(n.Pos())
		if _, ok := sharedStateFiles[filepath.Base(pos.Filename)]; ok {
			return
		}
		bad = append(bad, pos.String()+" ("+fd.Name.Name+"): "+what)
	}
	for len(queue) > 0 {
		fd := queue[0]
		queue = queue[1:]
		if seen[fd] || fd.Body == nil {
			continue
		}
		seen[fd] = true
		ast.Inspect(fd, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				report(n, fd, "go statement")
			case *ast.SendStmt, *ast.SelectStmt:
				report(n, fd, "channel operation")
			case *ast.UnaryExpr:
				if n.Op == token.ARROW {
					report(n, fd, "channel receive")
				}
			case *ast.ChanType:
				report(n, fd, "channel type")
			case *ast.Ident:
				obj := info.Uses[n]
				if obj == nil {
					return true
				}
				if p := obj.Pkg(); p != nil && p != pkg {
					switch {
					case ioPackages[p.Path()]:
						report(n, fd, "uses package "+p.Path()+" ("+obj.Name()+")")
					case p.Path() == "time" && ioTimeFuncs[obj.Name()] && isFunc(obj):
						report(n, fd, "reads the clock: time."+obj.Name())
					}
					return true
				}
				if tn, ok := obj.(*types.TypeName); ok && ioTypes[tn.Name()] {
					report(n, fd, "uses type "+tn.Name())
				}
				if fn, ok := obj.(*types.Func); ok {
					if recv := fn.Type().(*types.Signature).Recv(); recv != nil {
						if nt := namedOf(recv.Type()); nt != "" && ioTypes[nt] {
							report(n, fd, "calls "+nt+"."+fn.Name())
						}
					}
					if d := decls[fn]; d != nil && !seen[d] {
						queue = append(queue, d)
					}
				}
			}
			return true
		})
	}
	return bad
}

// isFunc reports whether obj is a package-level function (not a method).
func isFunc(obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	return ok && fn.Type().(*types.Signature).Recv() == nil
}

// namedOf returns the name of t's named type, through a pointer.
func namedOf(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return ""
}
