package deno_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/lanes"
)

// deno runs main.mjs with Deno's permissions limited to reading files,
// reaching loopback and reading the environment (node-redis reads it).
func deno(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin := lanes.NPMBin(t, "deno")
	lanes.NPMPackage(t, "redis")
	module := lanes.Module(t, wasm.WASI)
	full := append([]string{"run", "--allow-read", "--allow-net=127.0.0.1", "--allow-env", "main.mjs",
		"--wasm", module}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = append(cmd.Environ(), "NO_COLOR=1", "DENO_NO_UPDATE_CHECK=1")
	return cmd
}

// TestDenoLane runs the lanes' sequence through Deno, node-redis and a
// real redis-server, and compares every response with native Go's.
func TestDenoLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seq, want := lanes.Want(t)
	cmd := deno(ctx, t, "--redis", lanes.Redis(t), "--sequence", lanes.Path())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("deno run main.mjs --sequence: %v\n%s", err, stderr.String())
	}
	lanes.Compare(t, "deno", seq, string(out), want)
}

// TestDenoExample runs the example as a user would.
func TestDenoExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := deno(ctx, t, "--redis", lanes.Redis(t), "--prefix", "deno-test").CombinedOutput()
	t.Logf("deno run main.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("example failed: %v", err)
	}
	for _, want := range []string{"deno 2.9.6 abi 2", "status ONLINE web-1:ONLINE", `count {"n":1,`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
