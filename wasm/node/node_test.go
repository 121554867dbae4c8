package node_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm"
)

func TestNodeExample(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: skipping the Node.js example")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	mod := filepath.Join(dir, "presence-js.wasm")
	if err := wasm.Build(ctx, wasm.JS, mod); err != nil {
		t.Fatal(err)
	}
	execJS, err := wasm.WasmExecJS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	cmd := exec.CommandContext(ctx, node, "example.mjs", "--wasm", mod, "--wasm-exec", execJS,
		"--redis", mr.Addr(), "--prefix", "node-test")
	out, err := cmd.CombinedOutput()
	t.Logf("node example.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("example failed: %v", err)
	}
	for _, want := range []string{
		"abi 2", `"clock":"host"`, "together 3 plans in 2 rounds", "bad resume unknown_plan", "status ONLINE web-1:ONLINE", `count {"n":3,`,
		"[invalid] presence: invalid Heartbeat.User: must not be empty",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// What the JS build wrote, the native engine reads.
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	eng, err := core.New(goredis.New(c), core.Config{Prefix: "node-test"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eng.Status(ctx, "alice")
	if err != nil || st.Status != core.StatusOnline || len(st.Devices) != 1 || st.Devices[0].ID != "web-1" {
		t.Fatalf("native view of alice: %+v %v", st, err)
	}
	n, err := eng.Count(ctx, core.Scope{Class: "room", ID: "lobby"})
	if err != nil || n.N != 3 {
		t.Fatalf("native count: %+v %v", n, err)
	}
	_ = os.Remove(mod)
}
