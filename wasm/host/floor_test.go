package host_test

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/floor"
)

// BenchmarkFloor times parts of the module's hot path on their own,
// natively and in a WebAssembly build (wasm/internal/floor/module) on
// wazero, in CPU time per beat: a call that does nothing ("noop"),
// decoding a compact heartbeat_batch request ("decode"), and the core's
// plan of the batch without any codec ("plan"), and the guest's start and
// resume of the batch's plan in the compact form, codec included, the
// decoding of the first response aside ("guest"). The ratio of the plan's
// two figures is the floor under BenchmarkHeartbeatWASM's ratio that no
// encoding of the messages can lower.
func BenchmarkFloor(b *testing.B) {
	ctx := context.Background()
	out := filepath.Join(b.TempDir(), "floor.wasm")
	cmd := exec.CommandContext(ctx, wasm.GoCommand(), "build", "-trimpath", "-ldflags=-s -w", "-buildmode=c-shared",
		"-o", out, "github.com/presencekit/presence/wasm/internal/floor/module")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, msg)
	}
	code, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.InstantiateWithConfig(ctx, code, wazero.NewModuleConfig().WithStartFunctions().
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 100} {
		if _, err := mod.ExportedFunction("floor_setup").Call(ctx, uint64(n)); err != nil {
			b.Fatal(err)
		}
		work := floor.New(n)
		for _, part := range []string{"noop", "decode", "plan", "guest"} {
			f := mod.ExportedFunction("floor_" + part)
			native := map[string]func(){"noop": func() {}, "decode": work.Decode, "plan": work.Plan, "guest": work.Guest}[part]
			for _, side := range []string{"native", "wasm"} {
				b.Run(part+"/"+side+"/beats="+strconv.Itoa(n), func(b *testing.B) {
					run := native
					if side == "wasm" {
						run = func() {
							if _, err := f.Call(ctx); err != nil {
								b.Fatal(err)
							}
						}
					}
					run()
					b.ResetTimer()
					cpu := cpuTime()
					for i := 0; i < b.N; i++ {
						run()
					}
					b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*n), "cpu-ns/beat")
				})
			}
		}
	}
}
