package wasmtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/presencekit/presence/wasm"
)

// TestSharedBuild: the module is a WebAssembly binary, built once: a second
// call returns the same file.
func TestSharedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the WebAssembly module")
	}
	first := ModuleFile(t, wasm.WASI)
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if b := Module(t, wasm.WASI); !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Fatalf("%s is not a WebAssembly module: % x", first, b[:min(8, len(b))])
	}
	second := ModuleFile(t, wasm.WASI)
	fi2, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if second != first || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("built again: %s (%v), then %s (%v)", first, fi.ModTime(), second, fi2.ModTime())
	}
}

// TestKeyFollowsSources: a change to any source the module is built from
// gives another key; a test file does not.
func TestKeyFollowsSources(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key := func() string {
		t.Helper()
		k, err := sourceKey(root, wasm.WASI)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.mod", "module github.com/presencekit/presence\n")
	write("go.sum", "")
	write("core/a.go", "package core\n")
	write("wasm/module/m.go", "package main\n")
	first := key()
	if js, _ := sourceKey(root, wasm.JS); js == first {
		t.Fatal("both targets have one key")
	}
	for _, step := range []struct {
		name, file, text string
		same             bool
	}{
		{"a test file", "core/a_test.go", "package core\n", true},
		{"a file in node_modules", "wasm/node_modules/x/index.js", "x", true},
		{"node_modules linked from elsewhere", "", "", true},
		{"a changed source", "core/a.go", "package core // changed\n", false},
		{"a new Lua script", "core/lua/x.lua", "return 1", false},
		{"a changed go.sum", "go.sum", "example.com/x v1.0.0 h1:x\n", false},
	} {
		before := key()
		if step.file == "" {
			if err := os.Symlink(t.TempDir(), filepath.Join(root, "core", "node_modules")); err != nil {
				t.Fatal(err)
			}
		} else {
			write(step.file, step.text)
		}
		if after := key(); (after == before) != step.same {
			t.Errorf("%s: key %s → %s, want it the same: %v", step.name, before, after, step.same)
		}
	}
}
