package luabuild

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
)

// TableFile is the file of package core that defines the enumerations the
// scripts, the JSON and the JavaScript share: for each, a const block of
// its type counting up from iota, and its names, by number, in the array
// <type>Names ("statusNames"), as String spells them.
const TableFile = "status.go"

// Enum is one enumeration of package core as TableFile defines it.
type Enum struct {
	Type   string   // the Go type, "Status"
	Consts []string // its constants' Go names by number, "StatusOffline" first
	Names  []string // the names String returns, by number
	quoted bool     // the scripts take a value as a string (enumLua)
}

// enumLua is an enumeration the generated files carry, and whether the
// scripts take its values as numbers or, where they compare one to an
// argument or a stored field as it comes, as strings.
type enumLua struct {
	typ    string
	quoted bool
}

// enums are the enumerations the generated files carry, in TableFile's
// order.
var enums = []enumLua{
	{"Status", false},
	{"Manual", false},
	{"Kind", true},
	{"Policy", false},
	{"Layout", true},
}

// Enums reads the enumerations from TableFile in core (package core's
// directory).
func Enums(core fs.FS) ([]Enum, error) {
	src, err := fs.ReadFile(core, TableFile)
	if err != nil {
		return nil, err
	}
	f, err := parser.ParseFile(token.NewFileSet(), TableFile, src, 0)
	if err != nil {
		return nil, err
	}
	consts, names := map[string][]string{}, map[string][]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		switch g.Tok {
		case token.CONST:
			typ := ""
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); ok && len(v.Values) == 1 && isIdent(v.Values[0], "iota") {
					typ = id.Name
				} else if v.Type != nil || v.Values != nil {
					typ = ""
				}
				if typ != "" {
					for _, n := range v.Names {
						consts[typ] = append(consts[typ], n.Name)
					}
				}
			}
		case token.VAR:
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if len(v.Names) != 1 || len(v.Values) != 1 || !strings.HasSuffix(v.Names[0].Name, "Names") {
					continue
				}
				lit, ok := v.Values[0].(*ast.CompositeLit)
				if !ok {
					continue
				}
				var list []string
				for _, e := range lit.Elts {
					b, ok := e.(*ast.BasicLit)
					if !ok || b.Kind != token.STRING {
						return nil, fmt.Errorf("%s: %s holds a value other than a string", TableFile, v.Names[0].Name)
					}
					s, err := strconv.Unquote(b.Value)
					if err != nil {
						return nil, err
					}
					list = append(list, s)
				}
				names[v.Names[0].Name] = list
			}
		}
	}
	out := make([]Enum, 0, len(enums))
	for _, l := range enums {
		e := Enum{Type: l.typ, Consts: consts[l.typ], Names: names[strings.ToLower(l.typ[:1])+l.typ[1:]+"Names"], quoted: l.quoted}
		if len(e.Consts) == 0 || len(e.Consts) != len(e.Names) {
			return nil, fmt.Errorf("%s: %d constants of type %s from iota, %d names", TableFile, len(e.Consts), e.Type, len(e.Names))
		}
		for i, n := range e.Names {
			// the generated files write names as they are, in quotes
			if n == "" || strings.Trim(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
				return nil, fmt.Errorf("%s: %s name %q is not letters, digits, '_' and '-'", TableFile, e.Type, n)
			}
			// the constant and the name of one number must be one value
			if fold(strings.TrimPrefix(e.Consts[i], e.Type)) != fold(n) {
				return nil, fmt.Errorf("%s: %s is number %d, and so is name %q", TableFile, e.Consts[i], i, n)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// fold returns s in lower case without '_' and '-': "exclusive-per-kind"
// and "ExclusivePerKind" are both "exclusiveperkind".
func fold(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// LuaConsts returns the constants the scripts take from the enumerations,
// named as Go names them, each as Inline writes it in: "StatusDND" is "4",
// "KindIOS" is "'3'". The Lua files' own constants are in capitals
// (Def), so that a reader tells the two apart.
func LuaConsts(enums []Enum) map[string]string {
	out := map[string]string{}
	for _, e := range enums {
		for i, c := range e.Consts {
			v := strconv.Itoa(i)
			if e.quoted {
				v = "'" + v + "'"
			}
			out[c] = v
		}
	}
	return out
}
