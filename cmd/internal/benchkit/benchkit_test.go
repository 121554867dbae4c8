package benchkit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/presencekit/presence/internal/testtier"
)

func TestHistQuantiles(t *testing.T) {
	var h benchkit.Hist
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		got := h.Quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d > 0.02 || d < -0.02 {
			t.Errorf("q%.2f = %v, want %v within 2%%", c.q, got, c.want)
		}
	}
	if h.Max() != 10*time.Millisecond || h.Count() != 10000 {
		t.Errorf("max %v count %d", h.Max(), h.Count())
	}
	var empty benchkit.Hist
	if empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Error("empty histogram should report zeros")
	}
}

func TestHistMerge(t *testing.T) {
	var a, b benchkit.Hist
	a.Record(time.Millisecond)
	b.Record(3 * time.Millisecond)
	a.Merge(&b)
	if a.Count() != 2 || a.Max() != 3*time.Millisecond || a.Mean() != 2*time.Millisecond {
		t.Errorf("merged: count %d max %v mean %v", a.Count(), a.Max(), a.Mean())
	}
}

func TestRunBounds(t *testing.T) {
	res, err := benchkit.Run(context.Background(), benchkit.Load{Concurrency: 3, Duration: 5 * time.Second, MaxOps: 500},
		func(context.Context, int, int) (int, error) { return 2, nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 500 || res.Items != 1000 || res.Latency.Count() != 500 {
		t.Errorf("ops %d items %d samples %d, want 500, 1000, 500", res.Ops, res.Items, res.Latency.Count())
	}
	start := time.Now()
	_, err = benchkit.Run(context.Background(), benchkit.Load{Duration: 50 * time.Millisecond},
		func(ctx context.Context, _, _ int) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
	if err != nil || time.Since(start) > 2*time.Second {
		t.Errorf("a run interrupted by its end: %v after %v", err, time.Since(start))
	}
}

func TestRunTooManyErrors(t *testing.T) {
	boom := errors.New("boom")
	res, err := benchkit.Run(context.Background(), benchkit.Load{Duration: 5 * time.Second, MaxErrors: 10},
		func(context.Context, int, int) (int, error) { return 0, boom })
	if !errors.Is(err, benchkit.ErrTooManyErrors) || !errors.Is(err, boom) || res.Errors != 10 {
		t.Errorf("err %v, errors %d", err, res.Errors)
	}
}

func TestDiffCommands(t *testing.T) {
	before := map[string]benchkit.CommandStat{"evalsha": {Calls: 10, Usec: 100}, "hget": {Calls: 5, Usec: 5}}
	after := map[string]benchkit.CommandStat{"evalsha": {Calls: 20, Usec: 300}, "hget": {Calls: 15, Usec: 15}, "info": {Calls: 9, Usec: 9}}
	got := benchkit.DiffCommands(before, after, 10)
	if len(got) != 2 || got[0].Command != "evalsha" || got[0].CallsPerItem != 1 || got[0].UsecPerItem != 20 {
		t.Errorf("got %+v", got)
	}
}

func TestSizedShards(t *testing.T) {
	for n, want := range map[int]int{1: 256, 50_000: 256, 100_000: 512, 1_000_000: 4096} {
		if got := benchkit.SizedShards(n); got != want {
			t.Errorf("SizedShards(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestEvaluateTargets(t *testing.T) {
	rep := &benchkit.Report{
		Throughput: []benchkit.ThroughputRow{{Workload: "heartbeat-batch", Adapter: "goredis", ItemsPerSec: 400_000}},
		Memory:     []benchkit.MemoryRow{{Workload: "user-device", Items: 100_000, BytesPerItem: 150}},
		Sweeps: []benchkit.SweepRow{
			{Workload: "users", Backlog: 50_000, WallMs: 100, MaxCallus: 1500},
			{Workload: "scope-compact", Backlog: 1_000_000, Shards: 256, MaxCallus: 9000, Encoding: "hashtable:256"},
		},
		Cache: []benchkit.CacheRow{{Workload: "Count via rueidis client-side cache", NsPerRead: 100}, {Workload: "GET round trip (rueidis)", NsPerRead: 20_000}},
	}
	met := map[string]bool{}
	for _, tr := range benchkit.EvaluateTargets(rep) {
		met[tr.Name] = tr.Met
	}
	want := map[string]bool{"batched ingest": true, "user presence memory": false, "sweep 50,000 expired users": true,
		"longest call while sweeping": false, "rueidis cached count": true}
	for k, v := range want {
		if got, ok := met[k]; !ok || got != v {
			t.Errorf("target %q: met %v (present %v), want %v", k, got, ok, v)
		}
	}
}

// TestSuiteBrief runs every group, tiny, against a throwaway redis-server,
// so that the workloads cannot rot. Each workload runs 250 ms: long enough
// for one call of the slowest to finish on a loaded 2-core machine, which
// 50 ms was not (a compact count summing 256 shards, under -race).
func TestSuiteBrief(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	srv := redistest.Server(t)
	var log bytes.Buffer
	s := benchkit.Suite{URL: "redis://" + srv.Addr, Brief: true, Duration: testtier.Pick(100*time.Millisecond, 250*time.Millisecond), Users: 300,
		MemoryItems: 1000, Backlogs: []int{1000}, StallDevices: 500, StallMembers: 1000, Concurrency: 2, BatchConcurrency: 1, Batch: 50, Log: &log}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := s.Run(ctx)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rep.Throughput) != 14*len(benchkit.Adapters()) || len(rep.Memory) != 6 || len(rep.Sweeps) != 5 || len(rep.Cache) != 4 || len(rep.Stalls) != 5 {
		t.Errorf("rows: %d throughput, %d memory, %d sweeps, %d cache, %d stalls", len(rep.Throughput), len(rep.Memory), len(rep.Sweeps), len(rep.Cache), len(rep.Stalls))
	}
	for _, r := range rep.Stalls {
		if r.Pings == 0 && r.Seconds >= 0.1 { // a sweep of a few entries may end before the first
			t.Errorf("stall row %q: no PINGs", r.Workload)
		}
	}
	for _, r := range rep.Throughput {
		if r.Items == 0 || r.Errors != 0 {
			t.Errorf("%s/%s: %d items, %d errors", r.Workload, r.Adapter, r.Items, r.Errors)
		}
	}
	for _, sw := range rep.Sweeps {
		want := map[string]int{"scope-compact 1% expired": 10, "scope-compact 0% expired": 0}[sw.Workload]
		if !strings.Contains(sw.Workload, "expired") {
			want = 1000
		}
		if sw.Removed != want || sw.Calls == 0 {
			t.Errorf("sweep %s: removed %d in %d calls, want %d", sw.Workload, sw.Removed, sw.Calls, want)
		}
	}
	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "heartbeat-batch") {
		t.Errorf("table: %v\n%s", err, table.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back["schema"] != benchkit.SchemaVersion {
		t.Errorf("json: %v, schema %v", err, back["schema"])
	}
}
