package main

import (
	"context"
	"errors"
	"flag"
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
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
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
