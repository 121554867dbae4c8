package wasmsize

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/presencekit/presence/wasm"
)

// Build builds t as wasm.Build does, but keeping the name section, and
// breaks it down. Its Total is that of the build with names, a little
// larger than wasm.Build's.
func Build(ctx context.Context, t wasm.Target) (*Report, error) {
	dir, err := os.MkdirTemp("", "presence-wasmsize-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "named.wasm")
	args := []string{"build", "-trimpath", "-o", out}
	if t == wasm.WASI {
		args = append(args, "-buildmode=c-shared")
	}
	env := append(os.Environ(), "GOOS="+string(t), "GOARCH=wasm", "CGO_ENABLED=0")
	cmd := exec.CommandContext(ctx, wasm.GoCommand(), append(args, t.Package())...)
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("wasmsize: building %s: %v: %s", t, err, b)
	}
	cmd = exec.CommandContext(ctx, wasm.GoCommand(), "list", "-deps", t.Package())
	cmd.Env = env
	paths, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("wasmsize: go list -deps %s: %v", t.Package(), err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	return Parse(b, strings.Fields(string(paths)))
}
