package sim_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/presencekit/presence/cmd/internal/sim"
	"github.com/presencekit/presence/internal/wasmtest"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/host"
)

// The module is built and compiled once per test binary (and its machine
// code cached on disk across test binaries).
var (
	runtimeOnce sync.Once
	runtime     *host.Runtime
	runtimeErr  error
)

func sharedRuntime(tb testing.TB) *host.Runtime {
	tb.Helper()
	runtimeOnce.Do(func() {
		ctx := context.Background()
		module, err := wasmtest.Bytes(wasm.WASI)
		if err != nil {
			runtimeErr = err
			return
		}
		var opt host.Options
		if cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(os.TempDir(), "presence-wazero-cache")); err == nil {
			opt.Cache = cache
		}
		runtime, runtimeErr = host.NewRuntime(ctx, module, opt)
	})
	if runtimeErr != nil {
		tb.Fatal(runtimeErr)
	}
	return runtime
}

// smallConfig is a short run that exercises every behaviour: crashes,
// network switches, kicks, DND and videos.
func smallConfig(engine sim.Engine, seed uint64) sim.Config {
	mix := sim.DefaultMix()
	mix.Crash = 0.5
	mix.Switch = 0.02
	mix.Exclusive = 0.3
	mix.DND = 0.2
	mix.Videos = 5
	mix.Watch = 0.2
	mix.Session = 4 * time.Minute
	mix.Gap = 3 * time.Minute
	mix.Background = 6 * time.Minute
	cfg := sim.Config{Seed: seed, Users: 200, Edges: 3, Duration: 10 * time.Minute, Mix: mix, Engine: engine,
		Tick: time.Second, CensusEvery: time.Minute}
	if engine == sim.EngineWASM {
		cfg.Tick = 5 * time.Second // the default
	}
	if raceEnabled {
		cfg.Users, cfg.Duration = 40, 3*time.Minute
	}
	return cfg
}

func TestSmallRunAgrees(t *testing.T) {
	for _, engine := range []sim.Engine{sim.EngineNative, sim.EngineWASM} {
		t.Run(string(engine), func(t *testing.T) {
			cfg := smallConfig(engine, 7)
			if engine == sim.EngineWASM {
				cfg.Runtime = sharedRuntime(t)
			}
			res, err := sim.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res.Summary())
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
			s := res.Stats
			if !raceEnabled && (s.Beats == 0 || s.Kicks == 0 || s.Refused == 0 || s.Events == 0 || s.Crashes != 1 || s.Touches == 0 || s.Switches == 0) {
				t.Errorf("the run did not exercise everything: %+v", s)
			}
			if a := res.Agreement(); a.StatusSamples != cfg.Users*int(cfg.Duration/time.Minute) || a.CountChecks == 0 {
				t.Errorf("agreement: %+v", a)
			}
		})
	}
}

// series runs cfg and returns its time series without the wall times.
func series(t *testing.T, cfg sim.Config) string {
	t.Helper()
	res, err := sim.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := res.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.SplitN(l, ",", 3); len(f) == 3 {
			lines = append(lines, f[0]+","+f[2])
		}
	}
	return strings.Join(lines, "\n")
}

func TestDeterministic(t *testing.T) {
	cfg := smallConfig(sim.EngineNative, 11)
	cfg.Duration = min(cfg.Duration, 4*time.Minute)
	if series(t, cfg) != series(t, cfg) {
		t.Fatal("two runs with one seed differ")
	}
}

// TestWASMEqualsNative runs one simulation on WebAssembly edges and on
// native ones: every figure of the time series is the same.
func TestWASMEqualsNative(t *testing.T) {
	cfg := smallConfig(sim.EngineNative, 5)
	cfg.Duration = min(cfg.Duration, 3*time.Minute)
	native := series(t, cfg)
	cfg.Engine, cfg.Runtime = sim.EngineWASM, sharedRuntime(t)
	if wasm := series(t, cfg); wasm != native {
		t.Fatalf("the series differ:\nnative\n%s\nwasm\n%s", native, wasm)
	}
}
