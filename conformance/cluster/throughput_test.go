package cluster

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// envBench turns the throughput test's full size on:
// PRESENCE_CLUSTER_BENCH=1 (run it without -race for figures worth quoting).
// Without it the test runs a small smoke size, for CI.
const envBench = "PRESENCE_CLUSTER_BENCH"

// benchSize is the size of one throughput run.
type benchSize struct {
	members int // members of the hot scope
	passes  int // times every member is touched in the write phase
	writers int // goroutines sending TouchBatch calls
	reads   int // timed count and sweep repetitions
}

func benchSizes() (benchSize, bool) {
	if os.Getenv(envBench) != "" {
		return benchSize{members: 50000, passes: 3, writers: 8, reads: 15}, true
	}
	return benchSize{members: 4000, passes: 1, writers: 4, reads: 3}, false
}

// benchShards is the shard count of the hot scope's class: the default,
// 256, which keeps 50,000 members at about 200 per shard.
const benchShards = 256

// benchResult is what one adapter and mode measured.
type benchResult struct {
	adapter, mode string
	touches       int
	write         time.Duration
	cpu           []float64 // CPU seconds of each master during the write phase
	scripts       []int64   // script calls each master ran during the write phase
	zadds         []int64   // ZADD calls (registry) each master ran during the write phase
	countCold     []time.Duration
	countWarm     []time.Duration
	sweep         []time.Duration
	count         int64
}

func (r benchResult) rate() float64 { return float64(r.touches) / r.write.Seconds() }

// TestThroughput measures touches per second into one hot compact scope
// (TouchBatch of 1,000) on a 3-master cluster, through every adapter, with
// the scope's 256 shards kept together (one slot, so one master takes
// every write) and spread over slots (every master takes a share), and the
// latency of a count without a count key (together: one script sums the
// shards; spread: one pipelined round per node), of a count read from the
// count key (rueidis: from its client-side cache), and of a sweep of the
// scope. The counts must agree between modes. The figures go to the test
// log with the machine's load; docs/cluster.md quotes them.
func TestThroughput(t *testing.T) {
	t.Parallel()
	size, full := benchSizes()
	if testing.Short() && !full {
		t.Skip("smoke throughput run skipped in -short mode")
	}
	c := startCluster(t, 0, 0)
	load0 := loadAvg()
	var results []benchResult
	for _, tg := range ClusterTargets(c.Addrs()) {
		for _, spread := range []bool{false, true} {
			mode := "together"
			if spread {
				mode = "spread"
			}
			t.Run(tg.Adapter+"/"+mode, func(t *testing.T) {
				be, err := tg.Open(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer be.Close()
				r := runThroughput(t, c, be.Store, tg.Adapter, spread, size)
				r.adapter, r.mode = tg.Adapter, mode
				results = append(results, r)
				if want := int64(size.members); r.count != want {
					t.Errorf("count %d, want %d", r.count, want)
				}
			})
		}
	}
	t.Logf("machine: %d CPUs, GOMAXPROCS %d, load average %s before, %s after; %d members, %d passes, %d writers, TouchBatch of %d, %d shards",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), load0, loadAvg(), size.members, size.passes, size.writers, core.MaxBatch, benchShards)
	t.Log("\n" + benchTable(results))
}

// runThroughput runs the write phase and the timed reads for one adapter
// and mode.
func runThroughput(t testing.TB, c *redistest.ClusterInstance, store core.Store, adapter string, spread bool, size benchSize) benchResult {
	ctx := context.Background()
	prefix := "bench-" + adapter + "-" + strconv.FormatBool(spread)
	cfg := core.Config{
		Prefix: prefix,
		Classes: map[string]core.ScopeClass{
			// Always due, so that every SweepScopes sweeps the scope.
			"video": {Layout: core.LayoutCompact, Window: 10 * time.Minute, SweepInterval: time.Millisecond,
				Shards: benchShards, Spread: spread},
		},
	}
	var log batchLog
	eng, err := core.New(log.wrap(store), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The same engine without the client-side cache, for counts that must
	// reach the server.
	plain, err := core.New(log.wrap(struct{ core.Store }{store}), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := core.Scope{Class: "video", ID: "hot"}
	var r benchResult

	// Load the scripts on every master first: a script's first use on a
	// node costs a NOSCRIPT reply and a resend with its source.
	warm := make([]core.ScopeTouch, core.MaxBatch)
	for i := range warm {
		warm[i] = core.ScopeTouch{Scope: core.Scope{Class: "video", ID: "warm-up"}, Member: "m" + strconv.Itoa(i)}
	}
	if err := eng.TouchBatch(ctx, warm); err != nil {
		t.Fatal(err)
	}

	// Write phase.
	batches := size.passes * size.members / core.MaxBatch
	cpu0, calls0, zadd0 := masterCPU(t, c), masterCalls(t, c, "evalsha", "eval"), masterCalls(t, c, "zadd")
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for range size.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := make([]core.ScopeTouch, core.MaxBatch)
			for {
				b := int(next.Add(1) - 1)
				if b >= batches {
					return
				}
				for i := range ts {
					ts[i] = core.ScopeTouch{Scope: sc, Member: "m" + strconv.Itoa((b*core.MaxBatch+i)%size.members)}
				}
				if err := eng.TouchBatch(ctx, ts); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	r.write = time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("TouchBatch: %v", err)
	}
	r.touches = batches * core.MaxBatch
	cpu1, calls1, zadd1 := masterCPU(t, c), masterCalls(t, c, "evalsha", "eval"), masterCalls(t, c, "zadd")
	for i := range cpu0 {
		r.cpu = append(r.cpu, cpu1[i]-cpu0[i])
		r.scripts = append(r.scripts, calls1[i]-calls0[i])
		r.zadds = append(r.zadds, zadd1[i]-zadd0[i])
	}

	// A count with no count key: the first call of Count names it.
	log.take()
	cnt, err := plain.Count(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	r.count = cnt.N
	countKey := log.take()[0][0][0]
	countMaster, err := c.MasterFor(countKey)
	if err != nil {
		t.Fatal(err)
	}
	for range size.reads {
		if _, err := countMaster.Do("DEL", countKey); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		got, err := plain.Count(ctx, sc)
		r.countCold = append(r.countCold, time.Since(t0))
		if err != nil || got.N != r.count {
			t.Fatalf("count %v %v, want %d", got, err, r.count)
		}
	}
	for range size.reads {
		t0 := time.Now()
		got, err := eng.Count(ctx, sc)
		r.countWarm = append(r.countWarm, time.Since(t0))
		if err != nil || got.N != r.count {
			t.Fatalf("count %v %v, want %d", got, err, r.count)
		}
	}
	for range size.reads {
		t0 := time.Now()
		rep, err := eng.SweepScopes(ctx)
		r.sweep = append(r.sweep, time.Since(t0))
		if err != nil || rep.Removed != 0 {
			t.Fatalf("sweep %+v %v", rep, err)
		}
	}
	return r
}

// masterCPU returns the CPU seconds (user and system) each master used.
func masterCPU(t testing.TB, c *redistest.ClusterInstance) []float64 {
	var out []float64
	for _, m := range c.Masters() {
		in := info(t, m, "cpu")
		u, _ := strconv.ParseFloat(in["used_cpu_user"], 64)
		s, _ := strconv.ParseFloat(in["used_cpu_sys"], 64)
		out = append(out, u+s)
	}
	return out
}

// masterCalls returns the calls of the given commands each master ran
// (commands run by scripts included).
func masterCalls(t testing.TB, c *redistest.ClusterInstance, cmds ...string) []int64 {
	var out []int64
	for _, m := range c.Masters() {
		calls := commandCalls(t, m)
		var n int64
		for _, cmd := range cmds {
			n += calls[cmd]
		}
		out = append(out, n)
	}
	return out
}

// loadAvg returns the 1, 5 and 15 minute load averages, as uptime shows them.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// median and p90 of ds.
func quantiles(ds []time.Duration) (time.Duration, time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*9/10)]
}

// benchTable renders the results as a Markdown table.
func benchTable(rs []benchResult) string {
	var b strings.Builder
	b.WriteString("| adapter | mode | touches/s | write CPU per master (s) | script calls per master | ZADD per master | count, no count key (median / p90) | count from the count key | sweep of the scope |\n")
	b.WriteString("|---|---|---:|---|---|---|---|---|---|\n")
	for _, r := range rs {
		cm, cp := quantiles(r.countCold)
		wm, wp := quantiles(r.countWarm)
		sm, sp := quantiles(r.sweep)
		cpu := make([]string, len(r.cpu))
		for i, v := range r.cpu {
			cpu[i] = strconv.FormatFloat(v, 'f', 2, 64)
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %v / %v | %v / %v | %v / %v |\n", r.adapter, r.mode, r.rate(),
			strings.Join(cpu, " / "), joinInts(r.scripts), joinInts(r.zadds), round(cm), round(cp), round(wm), round(wp), round(sm), round(sp))
	}
	return b.String()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Microsecond:
		return d.Round(10 * time.Microsecond)
	}
	return d
}

func joinInts(ns []int64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, " / ")
}
