package wasmsize_test

import (
	"errors"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/wasmtest"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/wasmsize"
	"strings"
	"testing"
)

// TestDataOfTheReactor breaks the reactor's data section down and checks
// that every part the module must have is found: the pclntab from the
// runtime's moduledata, the Lua scripts, the read-only data.
func TestDataOfTheReactor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reactor; skipped with -short")
	}
	var scripts []string
	for _, s := range luascripts.All() {
		scripts = append(scripts, s.Source())
	}
	parts, err := wasmsize.Data(wasmtest.Module(t, wasm.WASI), scripts)
	if err != nil {
		t.Fatal(err)
	}
	size := map[string]int{}
	total := 0
	for _, p := range parts {
		size[p.Name] = p.Size
		total += p.Size
		t.Logf("%9d  %s", p.Size, p.Name)
	}
	for name, least := range map[string]int{
		"pclntab: function names": 10_000, "pclntab: pc-value tables": 10_000,
		"rodata: type descriptors, strings, static tables": 10_000, "Lua scripts (in rodata)": 10_000,
	} {
		if size[name] < least {
			t.Errorf("%s: %d bytes, want at least %d", name, size[name], least)
		}
	}
	if size["other"] > total/20 {
		t.Errorf("%d of %d bytes are not attributed", size["other"], total)
	}
}

func TestDataRefusesWhatIsNotAGoModule(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("\x00asm\x01\x00\x00\x00"), []byte(strings.Repeat("x", 16))} {
		if _, err := wasmsize.Data(b, nil); !errors.Is(err, wasmsize.ErrFormat) {
			t.Errorf("Data(%q) = %v, want ErrFormat", b, err)
		}
	}
}
