package core

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// formatSamples are values of every type the core formats, by type name.
var formatSamples = map[string][]any{
	"int":                {0, -7, 1000},
	"int64":              {int64(0), int64(-1), int64(1772366400123)},
	"int32":              {int32('a'), int32('é'), int32(0x1F389), int32(7)},
	"rune":               {'a', 'é', rune(0x1F389), rune(7)},
	"byte":               {byte(0), byte(255)},
	"uint32":             {uint32(0), uint32(16384)},
	"uint8":              {uint8(0), uint8(255)},
	"string":             {"", "alice", "a\"b\\\n\x00é\xff"},
	"[]byte":             {[]byte(nil), []byte(`{"user":"a"}`), []byte("\xff")},
	"error":              {errors.New("boom"), fmt.Errorf("wrapped: %w", ErrReply)},
	"time.Duration":      {time.Duration(0), 1500 * time.Millisecond, 7 * 24 * time.Hour, -time.Nanosecond},
	"core.Kind":          {KindWeb, KindAndroid, Kind(200)},
	"core.Policy":        {PolicyMulti, Policy(99)},
	"core.Layout":        {LayoutExact, LayoutCompact, Layout(42)},
	"core.Manual":        {Manual(0), Manual(77)},
	"core.Status":        {Status(0), Status(3), Status(99)},
	"core.Value":         {Value{}, Value{Kind: ValueInt, Int: -3}, Value{Kind: ValueString, Str: "a\"b"}, Value{Kind: ValueArray}, Value{Kind: ValueArray, Array: []Value{{Kind: ValueInt, Int: 1}, {Kind: ValueArray, Array: []Value{{Kind: ValueString, Str: "x"}, {}}}}}},
	"core.Scope":         {Scope{Class: "room", ID: "r1"}},
	"untyped int":        {0, 1000},
	"untyped rune":       {'x'},
	"untyped string":     {"s"},
	"core.msArg":         nil, // not formatted: listed so that a mistake shows
	"<nil>":              {nil},
	"untyped nil":        {nil},
	"github.com/x/never": nil,
}

// TestSprintf compares sprintf with fmt.Sprintf on every sample.
func TestSprintf(t *testing.T) {
	for typ, samples := range formatSamples {
		for _, v := range samples {
			for _, verb := range []string{"d", "s", "q", "v", "U"} {
				got, want := sprintf("<%"+verb+">", v), fmt.Sprintf("<%"+verb+">", v)
				if strings.Contains(got, "(unsupported)") {
					continue // checked against the call sites below
				}
				if got != want {
					t.Errorf("%s %#v: sprintf %%%s = %q, fmt %q", typ, v, verb, got, want)
				}
			}
		}
	}
	if got, want := sprintf("%d%% of %s", 1, "a"), fmt.Sprintf("%d%% of %s", 1, "a"); got != want {
		t.Errorf("%%%%: %q, fmt %q", got, want)
	}
}

// TestSprintfCallSites type-checks the core and checks that every call of
// invalid, replyErr and sprintf has a constant format whose verbs and
// argument types sprintf formats as fmt does (TestSprintf's samples).
func TestSprintfCallSites(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_wasm.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("github.com/presencekit/presence/core", fset, files, info); err != nil {
		t.Fatal(err)
	}
	qualifier := func(p *types.Package) string {
		if p.Path() == "github.com/presencekit/presence/core" {
			return "core"
		}
		return p.Path()
	}
	calls := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			id, ok := call.Fun.(*ast.Ident)
			if !ok {
				return true
			}
			at := map[string]int{"invalid": 1, "replyErr": 0, "sprintf": 0}
			fi, ok := at[id.Name]
			if !ok || len(call.Args) <= fi {
				return true
			}
			pos := fset.Position(call.Pos())
			if call.Ellipsis.IsValid() {
				return true // the forwarding calls inside errors.go
			}
			tv := info.Types[call.Args[fi]]
			if tv.Value == nil {
				t.Errorf("%s: %s's format is not a constant", pos, id.Name)
				return true
			}
			calls++
			format := strings.Trim(tv.Value.ExactString(), `"`)
			format = strings.ReplaceAll(format, "%%", "")
			args := call.Args[fi+1:]
			var verbs []byte
			for i := 0; i < len(format); i++ {
				if format[i] == '%' && i+1 < len(format) {
					verbs = append(verbs, format[i+1])
					i++
				}
			}
			if len(verbs) != len(args) {
				t.Errorf("%s: %d verbs, %d arguments", pos, len(verbs), len(args))
				return true
			}
			for i, arg := range args {
				typ := types.TypeString(info.Types[arg].Type, qualifier)
				samples := formatSamples[typ]
				if len(samples) == 0 {
					t.Errorf("%s: argument %d of type %s has no sample in formatSamples", pos, i+1, typ)
					continue
				}
				for _, v := range samples {
					got, want := sprintf("%"+string(verbs[i]), v), fmt.Sprintf("%"+string(verbs[i]), v)
					if got != want {
						t.Errorf("%s: %%%c of %s %#v: sprintf %q, fmt %q", pos, verbs[i], typ, v, got, want)
					}
				}
			}
			return true
		})
	}
	if calls < 60 {
		t.Errorf("only %d formatted calls found", calls)
	}
}
