package node_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/lanes"
)

// setup finds node and node-redis and builds the reactor.
func setup(t testing.TB) (node, module string) {
	t.Helper()
	node = lanes.Node(t)
	lanes.NPMPackage(t, "redis")
	return node, lanes.Module(t, wasm.WASI)
}

// TestNodeLane runs the lanes' sequence through Node, node-redis and a
// real redis-server, with the hot path in the compact form and with
// every message in JSON, and compares every response with native Go's.
func TestNodeLane(t *testing.T) {
	node, module := setup(t)
	seq, want := lanes.Want(t)
	for _, form := range []struct{ name, flag string }{{"compact", ""}, {"json", "--json"}} {
		t.Run(form.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := []string{"example.mjs", "--wasm", module, "--redis", lanes.Redis(t), "--sequence", lanes.Path()}
			if form.flag != "" {
				args = append(args, form.flag)
			}
			cmd := exec.CommandContext(ctx, node, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node example.mjs --sequence: %v\n%s", err, stderr.String())
			}
			lanes.Compare(t, "node", seq, string(out), want)
		})
	}
}

// TestPlansCodec runs the tests of wasm/js/plans.mjs (the compact form as
// the JavaScript hosts write and read it) under node --test.
func TestPlansCodec(t *testing.T) {
	node := lanes.Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "plans_test.mjs")
	cmd.Dir = filepath.Join(lanes.Dir(), "js")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test plans_test.mjs: %v\n%s", err, out)
	}
}

// TestNodeExample runs the example as a user would, and reads what it
// wrote with the native engine.
func TestNodeExample(t *testing.T) {
	node, module := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := lanes.Redis(t)
	cmd := exec.CommandContext(ctx, node, "example.mjs", "--wasm", module, "--redis", addr, "--prefix", "node-test")
	out, err := cmd.CombinedOutput()
	t.Logf("node example.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("example failed: %v", err)
	}
	for _, want := range []string{
		"abi 2", `"clock":"host"`, "together 3 plans in 1 rounds", "bad resume unknown_plan",
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
