package wasmsize

import (
	"errors"
	"testing"
)

func uleb(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func vec(b []byte) []byte { return append(uleb(len(b)), b...) }

func section(id byte, body []byte) []byte { return append([]byte{id}, vec(body)...) }

// module builds a module with one imported function and code bodies of
// the given sizes, named by names (index 0 is the import).
func module(bodies []int, names []string) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	imp := append(uleb(1), vec([]byte("env"))...)
	imp = append(imp, vec([]byte("f"))...)
	imp = append(imp, 0, 0) // a function of type 0
	m = append(m, section(2, imp)...)
	code := uleb(len(bodies))
	for _, n := range bodies {
		code = append(code, vec(make([]byte, n))...)
	}
	m = append(m, section(10, code)...)
	sub := uleb(len(names))
	for i, n := range names {
		sub = append(sub, uleb(i)...)
		sub = append(sub, vec([]byte(n))...)
	}
	custom := append(vec([]byte("name")), append([]byte{1}, vec(sub)...)...)
	return append(m, section(0, custom)...)
}

func TestParse(t *testing.T) {
	b := module([]int{10, 200, 30, 5} /* 200 takes a 2-byte prefix */, []string{
		"env.f",
		"github.com_x_y_z.(_T).M", "github.com_x_y.F", "slices.Sort_go.shape.int_", "type_.eq.main.T",
	})
	rep, err := Parse(b, []string{"github.com/x/y", "github.com/x/y/z", "slices", "main"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{{"github.com/x/y", 1, 202}, {"github.com/x/y/z", 1, 11}, {Other, 1, 6}, {"slices", 1, 31}}
	want[1], want[2], want[3] = want[3], want[1], want[2] // largest first
	if len(rep.Packages) != len(want) {
		t.Fatalf("packages %+v, want %+v", rep.Packages, want)
	}
	for i := range want {
		if rep.Packages[i] != want[i] {
			t.Fatalf("packages %+v, want %+v", rep.Packages, want)
		}
	}
	wantFuncs := []Func{{"github.com_x_y.F", "github.com/x/y", 202}, {"slices.Sort_go.shape.int_", "slices", 31},
		{"github.com_x_y_z.(_T).M", "github.com/x/y/z", 11}, {"type_.eq.main.T", Other, 6}}
	if len(rep.Funcs) != len(wantFuncs) {
		t.Fatalf("funcs %+v, want %+v", rep.Funcs, wantFuncs)
	}
	for i := range wantFuncs {
		if rep.Funcs[i] != wantFuncs[i] {
			t.Fatalf("funcs %+v, want %+v", rep.Funcs, wantFuncs)
		}
	}
	if rep.Total != len(b) || rep.Section("code") == 0 || rep.Section("custom:name") == 0 || rep.Section("import") == 0 {
		t.Fatalf("report %+v", rep)
	}
	sum := 0
	for _, s := range rep.Sections {
		sum += s.Size
	}
	if sum != len(b)-8 {
		t.Errorf("sections sum to %d, want %d", sum, len(b)-8)
	}
}

func TestParseMalformed(t *testing.T) {
	b := module([]int{10}, []string{"env.f", "main.main"})
	for _, bad := range [][]byte{nil, []byte("\x00asm"), []byte("wasm\x01\x00\x00\x00"), b[:len(b)-3], append(b[:len(b):len(b)], 10, 0xff)} {
		if _, err := Parse(bad, nil); !errors.Is(err, ErrFormat) {
			t.Errorf("Parse(%q): %v, want ErrFormat", bad, err)
		}
	}
}
