package node_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/lanes"
)

// setup finds node and node-redis, builds the JS module and finds
// wasm_exec.js.
func setup(t testing.TB) (node, module, execJS string) {
	t.Helper()
	node = lanes.Node(t)
	lanes.NPMPackage(t, "redis")
	module = lanes.Module(t, wasm.JS)
	execJS, err := wasm.WasmExecJS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return node, module, execJS
}

// TestNodeLane runs the lanes' sequence through Node, node-redis and a
// real redis-server, and compares every response with native Go's.
func TestNodeLane(t *testing.T) {
	node, module, execJS := setup(t)
	seq, want := lanes.Want(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "example.mjs", "--wasm", module, "--wasm-exec", execJS,
		"--redis", lanes.Redis(t), "--sequence", lanes.Path())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node example.mjs --sequence: %v\n%s", err, stderr.String())
	}
	lanes.Compare(t, "node", seq, string(out), want)
}

// TestNodeExample runs the example as a user would, and reads what it
// wrote with the native engine.
func TestNodeExample(t *testing.T) {
	node, module, execJS := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := lanes.Redis(t)
	cmd := exec.CommandContext(ctx, node, "example.mjs", "--wasm", module, "--wasm-exec", execJS,
		"--redis", addr, "--prefix", "node-test")
	out, err := cmd.CombinedOutput()
	t.Logf("node example.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("example failed: %v", err)
	}
	for _, want := range []string{
		"abi 2", `"clock":"host"`, "together 3 plans in 2 rounds", "bad resume unknown_plan",
		"status ONLINE web-1:ONLINE", `count {"n":3,`,
		"refused heartbeat: [invalid] presence: invalid Heartbeat.User: must not be empty",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	eng, err := core.New(goredis.New(c), core.Config{Prefix: "node-test"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Status(ctx, "alice")
	if err != nil || st.Status != core.StatusOnline || len(st.Devices) != 1 || st.Devices[0].ID != "web-1" {
		t.Fatalf("native view of alice: %+v %v", st, err)
	}
}
