// Package wasmtest gives tests the WebAssembly modules of the core, built
// once per state of the sources and shared by every test process of a run.
//
// Several packages test the module (its size, the wazero host, the Node,
// Deno and workerd lanes, the simulator); each used to link its own copy,
// a few seconds of CPU each. Module keys a build by the Go version, the
// target and a hash of every source file the module can depend on in this
// repository (core/, wasm/, go.mod, go.sum), keeps it in the system's
// temporary directory, and builds again only when one of those changed.
package wasmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/wasm"
)

// buildTimeout bounds one build of a module on a loaded machine.
const buildTimeout = 5 * time.Minute

// Module returns the module for target, as wasm.Build makes it.
func Module(tb testing.TB, target wasm.Target) []byte {
	tb.Helper()
	b, err := os.ReadFile(ModuleFile(tb, target))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// ModuleFile returns the path of the module for target, as wasm.Build makes
// it. The file is shared: a test must not change it.
func ModuleFile(tb testing.TB, target wasm.Target) string {
	tb.Helper()
	path, err := File(target)
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Bytes is Module for code that reports its own errors, such as a
// sync.Once shared by a package's tests.
func Bytes(target wasm.Target) ([]byte, error) {
	path, err := File(target)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// File is ModuleFile for code that reports its own errors.
func File(target wasm.Target) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("wasmtest: %w", err)
	}
	key, err := sourceKey(root, target)
	if err != nil {
		return "", fmt.Errorf("wasmtest: %w", err)
	}
	dir := filepath.Join(os.TempDir(), "presence-wasmtest")
	path := filepath.Join(dir, string(target)+"-"+key+".wasm")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("wasmtest: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	// Build beside the final name and rename: a process that builds at the
	// same time renames an identical file, and no reader sees half of one.
	tmp, err := os.CreateTemp(dir, string(target)+"-*.partial")
	if err != nil {
		return "", fmt.Errorf("wasmtest: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := wasm.Build(ctx, target, tmp.Name()); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("wasmtest: %w", err)
	}
	return path, nil
}

// sourceKey hashes what a build of target depends on in the repository at
// root, with the Go version and the target.
func sourceKey(root string, target wasm.Target) (string, error) {
	h := sha256.New()
	io.WriteString(h, goVersion()+"\x00"+string(target)+"\x00")
	for _, name := range []string{"go.mod", "go.sum"} {
		if err := hashFile(h, root, filepath.Join(root, name)); err != nil {
			return "", err
		}
	}
	for _, dir := range []string{"core", "wasm"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if name == "node_modules" || name == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			// a link (node_modules linked from another checkout) or any
			// other non-regular file is no source of the module
			if !d.Type().IsRegular() || strings.HasSuffix(name, "_test.go") {
				return nil
			}
			return hashFile(h, root, path)
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

func hashFile(h io.Writer, root, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rel, _ := filepath.Rel(root, path)
	io.WriteString(h, rel+"\x00")
	_, err = io.Copy(h, f)
	io.WriteString(h, "\x00")
	return err
}

// repoRoot finds the library module's directory from the test's working
// directory (a package directory of either module of the repository).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/presencekit/presence\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of github.com/presencekit/presence above the working directory")
		}
		dir = parent
	}
}

// goVersion is the version of the go command that builds the module.
func goVersion() string {
	out, err := exec.Command(wasm.GoCommand(), "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}
