package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/centrifugal/centrifuge"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
	}
}

// options are the command line.
type options struct {
	url          string
	concurrency  int
	batchConc    int
	batch        int
	duration     time.Duration
	users        int
	memoryItems  int
	room         int
	brief        bool
	clock        string
	jsonPath     string
	mdPath       string
	quiet        bool
	adapters     []string
	skipMemory   bool
	skipCompeter bool
	userBuckets  int
	groupCommit  int
	callgrindPID int
	runs         int
	designs      map[string]bool // nil: every design
	only         map[string]bool // workload groups
	cpuprofile   string
}

// Workload groups, as --only names them.
const (
	groupBeat   = "beat"
	groupBatch  = "batch"
	groupReads  = "reads"
	groupMemory = "memory"
)

// designNames lists every design of the comparison, as --designs names them.
func designNames() []string {
	var out []string
	for _, a := range append(benchkit.Adapters(), benchkit.Variants()...) {
		out = append(out, "engine/"+a, "engine/"+a+" solo", "engine/"+a+"+batcher")
	}
	return append(out, "centrifuge", "plain zadd+setex+hset", "plain hset×16")
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.url, "redis", "", "redis://host:port of a fresh, throwaway redis-server (required)")
	fs.IntVar(&o.concurrency, "concurrency", 0, "workers of single-beat workloads (default 16; brief 8)")
	fs.IntVar(&o.batchConc, "batch-concurrency", 0, "workers of batched workloads (default 4; brief 2)")
	fs.IntVar(&o.batch, "batch", 0, "beats per batched call (default 1000; brief 200)")
	fs.DurationVar(&o.duration, "duration", 0, "time of each workload (default 3s; brief 300ms)")
	fs.IntVar(&o.users, "users", 0, "users beating (default 20000; brief 2000)")
	fs.IntVar(&o.memoryItems, "memory-items", 0, "online devices whose memory is measured per design (default 100000; brief 5000)")
	fs.IntVar(&o.room, "room", 1000, "members of the room whose count is read")
	fs.BoolVar(&o.brief, "brief", false, "a few seconds in all, for CI")
	fs.StringVar(&o.clock, "clock", benchkit.ClockServer, "how the engine reads \"now\": server (serverclock's offset of the server's clock) or script (each script reads TIME)")
	fs.StringVar(&o.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&o.mdPath, "markdown", "", "also write the report as Markdown tables to this file")
	fs.IntVar(&o.userBuckets, "user-buckets", 0, "the engine's Config.UserBuckets (default 16; on a single node, 1 lets a batch be one script call)")
	fs.IntVar(&o.groupCommit, "group-commit", 0, "the engine's Config.GroupCommit: combined round trips on the wire at once (default 2; the \"solo\" rows always -1)")
	fs.IntVar(&o.callgrindPID, "callgrind-pid", 0, "pid of the redis-server, run under valgrind --tool=callgrind: report its instructions per item (cmd/bench/instructions.sh)")
	fs.BoolVar(&o.skipMemory, "skip-memory", false, "skip the memory rows (as --only without memory)")
	fs.IntVar(&o.runs, "runs", 1, "rounds: each row is measured this many times, in alternating order, and reports the median; ratios to Centrifuge are taken within each round")
	designs := fs.String("designs", "", "comma-separated designs to run (default all): "+strings.Join(designNames(), ", "))
	only := fs.String("only", "", "comma-separated workload groups to run (default all): beat, batch, reads, memory")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of each row's run, each round, into this directory")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *designs != "" {
		o.designs = map[string]bool{}
		for _, d := range strings.Split(*designs, ",") {
			if d = strings.TrimSpace(d); !slices.Contains(designNames(), d) {
				return o, fmt.Errorf("--designs: unknown design %q (want some of %s)", d, strings.Join(designNames(), ", "))
			}
			o.designs[d] = true
		}
	}
	o.only = map[string]bool{groupBeat: true, groupBatch: true, groupReads: true, groupMemory: true}
	if *only != "" {
		o.only = map[string]bool{}
		for _, g := range strings.Split(*only, ",") {
			g = strings.TrimSpace(g)
			if g != groupBeat && g != groupBatch && g != groupReads && g != groupMemory {
				return o, fmt.Errorf("--only: unknown workload group %q (want some of beat, batch, reads, memory)", g)
			}
			o.only[g] = true
		}
	}
	if o.skipMemory {
		o.only[groupMemory] = false
	}
	if o.runs < 1 {
		return o, errors.New("--runs must be at least 1")
	}
	if o.url == "" {
		return o, errors.New("--redis is required (a fresh redis-server: embedded miniredis is not a fair target)")
	}
	def := func(v *int, full, brief int) {
		if *v <= 0 {
			*v = full
			if o.brief {
				*v = brief
			}
		}
	}
	def(&o.concurrency, 16, 8)
	def(&o.batchConc, 4, 2)
	def(&o.batch, core.MaxBatch, 200)
	def(&o.users, 20_000, 2_000)
	def(&o.memoryItems, 100_000, 5_000)
	if o.duration <= 0 {
		o.duration = 3 * time.Second
		if o.brief {
			o.duration = 300 * time.Millisecond
		}
	}
	if o.clock != benchkit.ClockServer && o.clock != benchkit.ClockScript {
		return o, fmt.Errorf("--clock must be %s or %s", benchkit.ClockServer, benchkit.ClockScript)
	}
	if o.userBuckets < 0 || o.callgrindPID < 0 {
		return o, errors.New("--user-buckets and --callgrind-pid must not be negative")
	}
	if o.batch > core.MaxBatch || o.room < 1 || o.room > core.MaxPage {
		return o, fmt.Errorf("--batch must be at most %d and --room 1 to %d", core.MaxBatch, core.MaxPage)
	}
	o.adapters = append(benchkit.Adapters(), benchkit.Variants()...)
	return o, nil
}

// Report is the comparison's outcome. As JSON: schema
// ("presence-compare/1"), started, host, server (as in benchkit.Report),
// settings, throughput and memory rows (benchkit.ThroughputRow and
// MemoryRow; a throughput row is the median of its rounds), rounds (each
// throughput row's rounds, in the same order), ratios (each engine
// design's single beats over Centrifuge's: rate, server_cpu and
// client_cpu, each [median, min, max] of the rounds' ratios), and targets
// (benchkit.TargetRow).
type Report struct {
	Schema     string                     `json:"schema"`
	Started    time.Time                  `json:"started"`
	Host       benchkit.HostInfo          `json:"host"`
	Server     benchkit.ServerInfo        `json:"server"`
	Settings   map[string]any             `json:"settings"`
	Throughput []benchkit.ThroughputRow   `json:"throughput"`
	Rounds     [][]benchkit.ThroughputRow `json:"rounds,omitempty"`
	Ratios     []ratio                    `json:"ratios,omitempty"`
	Memory     []benchkit.MemoryRow       `json:"memory"`
	Targets    []benchkit.TargetRow       `json:"targets"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	opt, err := redis.ParseURL(o.url)
	if err != nil {
		return fmt.Errorf("--redis %q: %w", o.url, err)
	}
	ac := redis.NewClient(opt)
	defer ac.Close()
	admin := benchkit.NewAdmin(ac)
	if o.callgrindPID > 0 {
		admin.CountInstructions(benchkit.Callgrind(o.callgrindPID))
	}
	c := &comparison{o: o, admin: admin, addr: opt.Addr, log: stderr,
		run: "cmp" + strconv.FormatInt(time.Now().UnixMilli()%1e9, 36)}
	if o.quiet {
		c.log = io.Discard
	}
	c.rep = &Report{Schema: "presence-compare/1", Started: time.Now().UTC().Truncate(time.Second), Host: benchkit.Host(),
		Settings: map[string]any{"concurrency": o.concurrency, "batch_concurrency": o.batchConc, "batch": o.batch,
			"duration_ns": o.duration, "users": o.users, "memory_items": o.memoryItems, "room": o.room, "brief": o.brief, "clock": o.clock,
			"user_buckets": o.userBuckets, "group_commit": o.groupCommit, "callgrind": o.callgrindPID > 0,
			"runs": o.runs, "designs": sortedKeys(o.designs), "only": sortedKeys(o.only)}}
	if c.rep.Server, err = c.admin.Describe(ctx); err != nil {
		return err
	}
	if err := c.setup(ctx); err != nil {
		return err
	}
	defer c.close()
	// Memory first, on a fresh server; its keys are removed afterwards, so
	// that their expiry costs nothing during the throughput workloads.
	if o.only[groupMemory] {
		if err := c.memory(ctx); err != nil {
			return err
		}
	}
	if err := c.throughput(ctx); err != nil {
		return err
	}
	c.rep.Host.LoadEnd = benchkit.LoadAvg()
	c.rep.Ratios = c.ratios()
	c.rep.Targets = c.targets()
	if err := c.writeTable(stdout); err != nil {
		return err
	}
	if o.jsonPath != "" {
		if err := benchkit.WriteFile(o.jsonPath, func(w io.Writer) error { return jsonEncoder(w).Encode(c.rep) }); err != nil {
			return err
		}
	}
	if o.mdPath != "" {
		return benchkit.WriteFile(o.mdPath, c.writeMarkdown)
	}
	return nil
}

// writeMarkdown writes the comparison as Markdown tables.
func (c *comparison) writeMarkdown(w io.Writer) error {
	r := c.rep
	fmt.Fprintf(w, "Run %s, Redis %s (default configuration, no persistence) at %s, %s, %d CPUs shared by client and server, load average %.2f at start, %.2f at end; the engine's clock: %s.\n",
		r.Started.Format("2006-01-02 15:04 MST"), r.Server.Version, r.Server.Addr, r.Host.Go, r.Host.CPUs, r.Host.LoadStart[0], r.Host.LoadEnd[0], c.o.clock)
	if c.o.callgrindPID > 0 {
		fmt.Fprintln(w, "\nThe server ran under callgrind, about fifty times slower: its instructions per item are the figure, not the rates.")
		fmt.Fprintln(w, "\n| design | workload | workers | batch | server instructions/item |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|")
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f |\n", t.Adapter, t.Workload, t.Concurrency, t.Batch, t.ServerInstr)
		}
	} else {
		if c.o.runs > 1 {
			fmt.Fprintf(w, "\nEach row is the median of %d rounds; the ratios are the median (and range) of each round's ratio.\n", c.o.runs)
		}
		fmt.Fprintln(w, "\n| design | workload | workers | batch | beats or reads/s | p50 µs | p99 µs | server CPU µs/item | client CPU µs/item | client allocs/item |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f |\n", t.Adapter, t.Workload, t.Concurrency, t.Batch,
				t.ItemsPerSec, t.P50us, t.P99us, t.ServerCPUus, t.ClientCPUus, t.ClientAllocs)
		}
		if len(r.Ratios) > 0 {
			fmt.Fprintf(w, "\n| single beats, %d workers, over Centrifuge's | rate | server CPU/beat | client CPU/beat |\n", c.o.concurrency)
			fmt.Fprintln(w, "|---|--:|--:|--:|")
			for _, x := range r.Ratios {
				fmt.Fprintf(w, "| %s | %s | %s | %s |\n", x.Design, spreadString(x.Rate), spreadString(x.ServerCPU), spreadString(x.ClientCPU))
			}
		}
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w, "\n| memory of user presence | online devices | bytes/device | keys |")
		fmt.Fprintln(w, "|---|--:|--:|--:|")
		for _, m := range r.Memory {
			fmt.Fprintf(w, "| %s | %d | %.1f | %d |\n", m.Workload, m.Items, m.BytesPerItem, m.Keys)
		}
	}
	if len(r.Targets) > 0 && c.o.callgrindPID == 0 { // rates under callgrind say nothing
		fmt.Fprintln(w)
		benchkit.WriteTargetsMarkdown(w, r.Targets)
	}
	return nil
}

func (c *comparison) writeTable(w io.Writer) error {
	r := c.rep
	fmt.Fprintf(w, "presence compare  %s  redis %s at %s  go %s  %d CPUs  load %.2f→%.2f\n\n",
		r.Started.Format(time.RFC3339), r.Server.Version, r.Server.Addr, r.Host.Go, r.Host.CPUs, r.Host.LoadStart[0], r.Host.LoadEnd[0])
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	if c.o.runs > 1 {
		fmt.Fprintf(w, "medians of %d rounds\n", c.o.runs)
	}
	fmt.Fprintln(tw, "design\tworkload\tconc\tbatch\tbeats|reads/s\tp50 µs\tp99 µs\tsrv CPU µs/item\tcli CPU µs/item\tcli allocs/item\terrors\t")
	for _, t := range r.Throughput {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t\n", t.Adapter, t.Workload, t.Concurrency, t.Batch,
			t.ItemsPerSec, t.P50us, t.P99us, t.ServerCPUus, t.ClientCPUus, t.ClientAllocs, t.Errors)
	}
	tw.Flush()
	if len(r.Ratios) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintf(tw, "over Centrifuge, %d workers\trate\tsrv CPU/beat\tcli CPU/beat\t\n", c.o.concurrency)
		for _, x := range r.Ratios {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", x.Design, spreadString(x.Rate), spreadString(x.ServerCPU), spreadString(x.ClientCPU))
		}
		tw.Flush()
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "memory\tdevices\tbytes/device\tkeys\t")
		for _, m := range r.Memory {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t\n", m.Workload, m.Items, m.BytesPerItem, m.Keys)
		}
		tw.Flush()
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w)
		benchkit.WriteTargets(tw, r.Targets)
		tw.Flush()
	}
	return nil
}

// centrifugeNode returns a Centrifuge node and a presence manager on addr.
func centrifugeNode(addr, prefix string) (*centrifuge.Node, *centrifuge.RedisPresenceManager, *centrifuge.RedisShard, error) {
	node, err := centrifuge.New(centrifuge.Config{})
	if err != nil {
		return nil, nil, nil, err
	}
	shard, err := centrifuge.NewRedisShard(node, centrifuge.RedisShardConfig{Address: addr})
	if err != nil {
		return nil, nil, nil, err
	}
	pm, err := centrifuge.NewRedisPresenceManager(node, centrifuge.RedisPresenceManagerConfig{
		Prefix: prefix, Shards: []*centrifuge.RedisShard{shard},
	})
	if err != nil {
		shard.Close()
		return nil, nil, nil, err
	}
	return node, pm, shard, nil
}

// sortedKeys returns the keys of m whose value is true, sorted; nil for a
// nil map.
func sortedKeys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
