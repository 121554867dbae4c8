// Command exported counts the names a Go package exports, by kind:
// functions, types, methods, constants and variables, as its public API
// surface. It reads the package's non-test files (every build
// configuration, each name once).
//
//	go run ./internal/exported ./core
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	list := flag.Bool("list", false, "print every name")
	flag.Parse()
	for _, dir := range flag.Args() {
		names, err := exported(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		byKind := map[string]int{}
		var all []string
		for n, k := range names {
			byKind[k]++
			all = append(all, k+" "+n)
		}
		sort.Strings(all)
		fmt.Printf("%s: %d names (%d functions, %d types, %d methods, %d constants, %d variables)\n",
			dir, len(names), byKind["func"], byKind["type"], byKind["method"], byKind["const"], byKind["var"])
		if *list {
			for _, s := range all {
				fmt.Println("  " + s)
			}
		}
	}
}

// exported maps each exported name of the package in dir (methods as
// Type.Method) to its kind. Methods of unexported types are left out.
func exported(dir string) (map[string]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					out[d.Name.Name] = "func"
					continue
				}
				if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
					out[recv+"."+d.Name.Name] = "method"
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							out[s.Name.Name] = "type"
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out[n.Name] = map[token.Token]string{token.CONST: "const", token.VAR: "var"}[d.Tok]
							}
						}
					}
				}
			}
		}
	}
	return out, nil
}

// recvName is the type name of a method's receiver.
func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
