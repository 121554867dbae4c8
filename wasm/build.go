package wasm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Target is a WebAssembly build target of the core.
type Target string

const (
	// WASI is the WASI reactor, wasm/module.
	WASI Target = "wasip1"
	// JS is the JavaScript build, wasm/jsmodule.
	JS Target = "js"
)

// Package returns the import path of the main package built for t.
func (t Target) Package() string {
	if t == JS {
		return "github.com/presencekit/presence/wasm/jsmodule"
	}
	return "github.com/presencekit/presence/wasm/module"
}

// ErrBuild is matched by every *BuildError.
var ErrBuild = errors.New("presence/wasm: build failed")

// BuildError reports a failed go build, with its output. It matches ErrBuild.
type BuildError struct {
	Target Target
	Output string
	Err    error
}

// Error returns "presence/wasm: building TARGET: ERR: OUTPUT".
func (e *BuildError) Error() string {
	return "presence/wasm: building " + string(e.Target) + ": " + e.Err.Error() + ": " + strings.TrimSpace(e.Output)
}

// Unwrap returns the underlying error.
func (e *BuildError) Unwrap() error { return e.Err }

// Is matches ErrBuild.
func (e *BuildError) Is(target error) bool { return target == ErrBuild }

// Build compiles the module for t into the file out (stripped of debug
// information, with -trimpath), using the go command on PATH or in
// GOROOT. It must run inside this module's source tree, in any directory.
func Build(ctx context.Context, t Target, out string) error {
	if t != WASI && t != JS {
		return &BuildError{Target: t, Err: errors.New("unknown target")}
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", out}
	if t == WASI {
		args = append(args, "-buildmode=c-shared")
	}
	cmd := exec.CommandContext(ctx, GoCommand(), append(args, t.Package())...)
	cmd.Env = append(os.Environ(), "GOOS="+string(t), "GOARCH=wasm", "CGO_ENABLED=0")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return &BuildError{Target: t, Output: output.String(), Err: err}
	}
	return nil
}

// BuildBytes builds the module for t in a temporary directory and returns
// its bytes.
func BuildBytes(ctx context.Context, t Target) ([]byte, error) {
	dir, err := os.MkdirTemp("", "presence-wasm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "presence.wasm")
	if err := Build(ctx, t, out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// GoCommand returns the go command: "go" from PATH, else GOROOT/bin/go.
func GoCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	root := os.Getenv("GOROOT")
	if root == "" {
		root = runtime.GOROOT() //nolint:staticcheck // a fallback when go is not on PATH
	}
	return filepath.Join(root, "bin", "go")
}

// WasmExecJS returns the path of the wasm_exec.js support file that the
// JS build needs: $(go env GOROOT)/lib/wasm (Go 1.24 and later) or
// misc/wasm (earlier releases).
func WasmExecJS(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, GoCommand(), "env", "GOROOT").Output()
	if err != nil {
		return "", err
	}
	root := strings.TrimSpace(string(out))
	for _, dir := range []string{"lib/wasm", "misc/wasm"} {
		p := filepath.Join(root, dir, "wasm_exec.js")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("presence/wasm: wasm_exec.js not found under " + root)
}
