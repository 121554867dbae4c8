package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/cmd/internal/sim"
	"github.com/presencekit/presence/wasm"
)

// runSim is "presence sim": users heartbeating through edge nodes, each an
// instance of the WebAssembly core, against one Redis, in virtual time,
// checked against a ground truth (package sim).
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCLI("sim", "presence sim [flags]", `
Simulates users heartbeating through edge nodes, each running the engine
compiled to WebAssembly (or natively: --engine native), against one Redis in
virtual time, and compares every status with a ground truth. Prints progress
and a summary, writes a time series (series.csv) and a chart (chart.svg), and
exits 1 if the engine disagreed with the truth beyond what the design allows.
Runs on an embedded miniredis unless --redis is given. Without --wasm it
builds ./wasm/module first, so run it inside the source tree.`)
	seed := fs.Uint64("seed", 1, "seed of the run: the same seed and flags give the same results")
	users := fs.Int("users", 10000, "number of users")
	edges := fs.Int("edges", 4, "number of edge nodes")
	duration := fs.Duration("duration", time.Hour, "virtual time to simulate")
	tick := fs.Duration("tick", 5*time.Second, "virtual time step: each edge sends one batch per tick")
	sweep := fs.Duration("sweep", 5*time.Second, "virtual time between sweeps (and rows of the time series)")
	census := fs.Duration("census", 10*time.Minute, "virtual time between exact comparisons of every user's status (negative: never)")
	engine := fs.String("engine", string(sim.EngineWASM), "what runs on the edges: wasm or native")
	module := fs.String("wasm", "", "a build of ./wasm/module to run (default: build it from source now)")
	url := fs.String("redis", "", "redis://host:port URL of a real server (default: an embedded miniredis)")
	out := fs.String("out", "", "directory for series.csv and chart.svg (default: a new temporary directory)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	mix := sim.DefaultMix()
	fs.Var(&mix, "mix", "behaviour overrides, key=value,... with keys: "+strings.Join(sim.MixKeys(), ", "))
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	// The ranges package sim enforces, checked here too so that a bad value
	// is a usage error, found before the module build and the connection.
	switch {
	case *engine != string(sim.EngineWASM) && *engine != string(sim.EngineNative):
		return fs.usageError(fmt.Sprintf("--engine %q: want wasm or native", *engine))
	case *users < 1 || *users > 10_000_000:
		return fs.usageError("--users must be 1 to 10000000")
	case *edges < 1 || *edges > 64:
		return fs.usageError("--edges must be 1 to 64")
	case *tick < time.Millisecond || *tick > 10*time.Second || *tick%time.Millisecond != 0:
		return fs.usageError("--tick must be whole milliseconds, 1ms to 10s")
	case *duration < *tick || *sweep < *tick:
		return fs.usageError("--duration and --sweep must be at least one --tick")
	}
	cfg := sim.Config{Seed: *seed, Users: *users, Edges: *edges, Duration: *duration, Tick: *tick,
		SweepEvery: *sweep, CensusEvery: *census, Mix: mix, Engine: sim.Engine(*engine)}
	if !*quiet {
		cfg.Progress = stdout
	}
	if os.Getenv("GOGC") == "" {
		// Embedded Redis (miniredis, gopher-lua) allocates a lot; collect
		// less often, for a quarter less CPU.
		debug.SetGCPercent(400)
	}
	wall := time.Now()
	// Redis first: an unreachable server is reported before the module
	// build, which takes a while.
	if *url != "" {
		be, err := openBackend(ctx, *url)
		if err != nil {
			return err
		}
		defer be.close()
		cfg.Store = be.store
		cfg.Prefix = "presence-sim-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		fmt.Fprintf(stdout, "redis: %s (keys under %q)\n", be.desc, cfg.Prefix)
	}
	if cfg.Engine == sim.EngineWASM {
		var err error
		if *module != "" {
			cfg.Module, err = os.ReadFile(*module)
		} else {
			fmt.Fprintf(stdout, "building the WebAssembly module (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared ./wasm/module)…\n")
			cfg.Module, err = wasm.BuildBytes(ctx, wasm.WASI)
			if err != nil {
				err = fmt.Errorf("%w\n(run presence sim inside its source tree, or pass --wasm with a build of ./wasm/module)", err)
			}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "module: %d bytes (%.1f MiB), built or read in %.1fs\n", len(cfg.Module),
			float64(len(cfg.Module))/(1<<20), time.Since(wall).Seconds())
	}
	fmt.Fprintf(stdout, "simulating %v of %d users on %d edges (%s), seed %d\n", cfg.Duration, cfg.Users, cfg.Edges, cfg.Engine, cfg.Seed)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := sim.Run(ctx, cfg)
	if err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "presence-sim-"); err != nil {
			return err
		}
	}
	csvPath, svgPath, err := res.WriteFiles(dir)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res.Summary())
	fmt.Fprintf(stdout, "time series: %s\nchart:       %s\ntotal wall time %.1fs\n", abs(csvPath), abs(svgPath), time.Since(wall).Seconds())
	return res.Err()
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
