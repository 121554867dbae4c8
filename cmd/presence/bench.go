package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"

	"github.com/alicebob/miniredis/v2"

	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
)

// runBench is "presence bench": the engine's workloads against a real
// Redis, printed as a table and written as JSON (schema: benchkit.Report).
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newCLI("bench", "presence bench --redis redis://127.0.0.1:PORT [flags]", `
Runs heartbeats (single and batched), status reads, scope touches and counts
through each adapter; Redis memory per device and per scope member; sweeps of
an expired backlog with every call in SLOWLOG; rueidis cached count reads; and
what a PING every 10 ms from another client waits while the engine sweeps or
runs its largest batches (stall). Prints a table (and JSON or Markdown on request). It writes keys under fresh
prefixes and changes slowlog settings for a while: point it at a throwaway
server.`)
	url := fs.String("redis", "", "redis://host:port[/db] of the server to measure (required)")
	allowMini := fs.Bool("allow-miniredis", false, "without --redis, run on an embedded miniredis: a smoke test, not a measurement")
	adapters := fs.String("adapters", strings.Join(benchkit.Adapters(), ","), "adapters for the throughput workloads; also "+strings.Join(benchkit.Variants(), ",")+" (rueidis with Centrifuge's client settings)")
	only := fs.String("only", strings.Join(benchkit.Groups(), ","), "workload groups to run; also "+benchkit.GroupCompact+
		" (only the compact scope rows of memory and sweep)")
	conc := fs.Int("concurrency", 0, "workers of single-item workloads (default 16; brief 8)")
	bconc := fs.Int("batch-concurrency", 0, "workers of batched workloads (default 4; brief 2)")
	batch := fs.Int("batch", 0, "beats or touches per batched call (default 1000; brief 200)")
	dur := fs.Duration("duration", 0, "time of each throughput workload (default 3s; brief 300ms)")
	users := fs.Int("users", 0, "users the heartbeat and status workloads cycle through (default 20000; brief 2000)")
	memItems := fs.Int("memory-items", 0, "devices and scope members whose memory is measured (default 100000; brief 10000)")
	backlogs := fs.String("backlogs", "", "comma-separated expired backlogs to sweep (default 50000,1000000; brief 5000)")
	stallDevices := fs.Int("stall-devices", 0, "expired devices swept while another client PINGs (stall group; default 200000; brief 5000)")
	stallMembers := fs.Int("stall-members", 0, "expired scope members swept while another client PINGs (stall group; default 1000000; brief 10000)")
	shardSize := fs.Int("shard-size", 0, "members a compact shard holds on average before a split (ScopeClass.ShardSize; default the engine's, 128): fewer cost memory, and save sweeps reads when few members expire")
	brief := fs.Bool("brief", false, "a few seconds per group, for CI")
	clock := fs.String("clock", benchkit.ClockServer, "how the throughput engines read \"now\": server (serverclock's offset of the server's clock) or script (each script reads TIME)")
	jsonPath := fs.String("json", "", "also write the report as JSON to this file (\"-\": stdout, instead of the table)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	mdPath := fs.String("markdown", "", "also write the report as Markdown tables to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the client side to this file (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the client side to this file at the end")
	if err := fs.parse(args, stdout); err != nil {
		return err
	}
	s := benchkit.Suite{URL: *url, Concurrency: *conc, BatchConcurrency: *bconc, Batch: *batch, Duration: *dur,
		Users: *users, MemoryItems: *memItems, StallDevices: *stallDevices, StallMembers: *stallMembers, ShardSize: *shardSize, Brief: *brief, Clock: *clock,
		Adapters: splitList(*adapters), Only: splitList(*only)}
	if !*quiet {
		s.Log = stderr
	}
	for _, b := range splitList(*backlogs) {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 || n > 10_000_000 {
			return usageError{msg: fmt.Sprintf("--backlogs: %q is not a count from 1 to 10000000", b)}
		}
		s.Backlogs = append(s.Backlogs, n)
	}
	// benchkit checks these too, but only once it runs; here they are usage
	// errors, found before anything connects.
	for _, a := range s.Adapters {
		if !slices.Contains(benchkit.Adapters(), a) && !slices.Contains(benchkit.Variants(), a) {
			return fs.usageError(fmt.Sprintf("--adapters: unknown adapter %q (have %s)", a,
				strings.Join(append(benchkit.Adapters(), benchkit.Variants()...), ", ")))
		}
	}
	for _, g := range s.Only {
		if !slices.Contains(benchkit.Groups(), g) && g != benchkit.GroupCompact {
			return fs.usageError(fmt.Sprintf("--only: unknown group %q (have %s, %s)", g, strings.Join(benchkit.Groups(), ", "), benchkit.GroupCompact))
		}
	}
	if *clock != benchkit.ClockServer && *clock != benchkit.ClockScript {
		return fs.usageError(fmt.Sprintf("--clock %q: want %s or %s", *clock, benchkit.ClockServer, benchkit.ClockScript))
	}
	if *batch > core.MaxBatch {
		return fs.usageError(fmt.Sprintf("--batch must be at most %d", core.MaxBatch))
	}
	if *url == "" {
		if !*allowMini {
			return usageError{msg: "--redis is required: the embedded miniredis is single-threaded Go with no listpack " +
				"encodings, SLOWLOG or real memory accounting, so its figures say nothing about Redis " +
				"(pass --allow-miniredis for a smoke run anyway)"}
		}
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return fmt.Errorf("starting embedded miniredis: %w", err)
		}
		defer mr.Close()
		s.URL, s.Miniredis = "redis://"+mr.Addr(), true
		fmt.Fprintln(stderr, "bench: WARNING: embedded miniredis: not a fair target, figures are for smoke testing only")
	}
	if *url != "" {
		// Every workload opens its own clients; a server that does not
		// answer is reported once, before any of them.
		if err := pingRedis(ctx, *url); err != nil {
			return err
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			if f, err := os.Create(*memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	rep, err := s.Run(ctx)
	if err != nil {
		if rep != nil && len(rep.Throughput)+len(rep.Memory)+len(rep.Sweeps) > 0 {
			_ = rep.WriteTable(stderr)
		}
		return err
	}
	if *jsonPath == "-" {
		return rep.WriteJSON(stdout)
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if *jsonPath != "" {
		if err := benchkit.WriteFile(*jsonPath, rep.WriteJSON); err != nil {
			return err
		}
	}
	if *mdPath != "" {
		return benchkit.WriteFile(*mdPath, rep.WriteMarkdown)
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
