package lanes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/wasmtest"
	"github.com/presencekit/presence/wasm"
)

// RequireEnv names the environment variable that turns a lane's skip (a
// runtime or npm package missing) into a failure; .ci/run sets it, so
// that CI cannot pass by skipping a lane.
const RequireEnv = "PRESENCE_REQUIRE_LANES"

// Skip skips the test with why, or fails it where RequireEnv is set.
func Skip(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("%s (and %s is set)", why, RequireEnv)
	}
	t.Skip(why)
}

// Dir is the wasm/ directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// NPMBin returns the path of an executable the npm packages of
// wasm/package.json install (deno, workerd), or skips the test.
func NPMBin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		Skip(t, name+" is not installed: run `npm ci --prefix wasm` to test this lane")
	}
	return p
}

// NPMPackage skips the test unless the npm package is installed in
// wasm/node_modules.
func NPMPackage(t testing.TB, name string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(Dir(), "node_modules", name, "package.json")); err != nil {
		Skip(t, "npm package "+name+" is not installed: run `npm ci --prefix wasm` to test this lane")
	}
}

// Node returns the path of node, or skips the test.
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		Skip(t, "node is not on PATH: skipping the Node.js lane")
	}
	return p
}

// Module returns the path of the module for target, built once for every
// lane of a test run (wasmtest).
func Module(t testing.TB, target wasm.Target) string {
	t.Helper()
	return wasmtest.ModuleFile(t, target)
}

// Redis starts a redis-server for the test (skipping where there is
// none) and returns its address.
func Redis(t testing.TB) string {
	t.Helper()
	return redistest.Server(t).Addr
}

// Want runs the sequence natively against a redis-server of its own and
// returns the lines every lane must print.
func Want(t testing.TB) (Sequence, []string) {
	t.Helper()
	seq, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: Redis(t)})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, err := Native(ctx, seq, goredis.New(c))
	if err != nil {
		t.Fatal(err)
	}
	return seq, want
}

// Reporter is what Compare reports to; a *testing.T is one.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// Compare checks a lane's output, one response per line, against the
// native lines, naming the step of the first difference.
func Compare(t Reporter, lane string, seq Sequence, output string, want []string) {
	t.Helper()
	got := strings.Split(strings.TrimRight(output, "\n"), "\n")
	if output == "" {
		got = nil
	}
	for i := 0; i < len(want) && i < len(got); i++ {
		if got[i] != want[i] {
			t.Errorf("%s differs from native Go at %s:\n %s: %s\n native: %s", lane, seq.Line(i), lane, got[i], want[i])
			return
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s printed %d responses, native Go %d", lane, len(got), len(want))
	}
}
