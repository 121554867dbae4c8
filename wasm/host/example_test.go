package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/tetratelabs/wazero"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/host"
)

// The module, built from source, runs a heartbeat against an embedded
// Redis, in virtual time.
func Example() {
	ctx := context.Background()
	module, err := wasm.BuildBytes(ctx, wasm.WASI) // or os.ReadFile a build of ./wasm/module
	if err != nil {
		panic(err)
	}
	// Compile once (and keep the machine code on disk for the next process)…
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(os.TempDir(), "presence-wazero-cache"))
	if err != nil {
		panic(err)
	}
	rt, err := host.NewRuntime(ctx, module, host.Options{Cache: cache})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	in, err := rt.NewInstance(ctx, goredis.New(client)) // …instantiate many times
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	eng, err := in.Configure(ctx, core.Config{Clock: func() time.Time { return now }}, host.EngineOptions{})
	if err != nil {
		panic(err)
	}
	if _, err := eng.Do(ctx, core.Heartbeat{User: "alice", Device: "phone", Kind: core.KindIOS, Active: true}); err != nil {
		panic(err)
	}
	v, err := eng.Do(ctx, core.ReadStatus{User: "alice"})
	if err != nil {
		panic(err)
	}
	st := v.(core.UserStatus)
	fmt.Println(st.Status, st.Devices[0].ID, st.Devices[0].State)
	_, err = eng.Do(ctx, core.Heartbeat{User: "", Device: "phone"})
	fmt.Println(err)
	// Output:
	// ONLINE phone ONLINE
	// presence: invalid Heartbeat.User: must not be empty
}
