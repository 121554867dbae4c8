package benchkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/presencekit/presence/cmd/internal/benchkit"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := benchkit.Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestMedianRow(t *testing.T) {
	rows := []benchkit.ThroughputRow{
		{Workload: "beat", Adapter: "a", Ops: 10, Items: 10, Seconds: 1, ItemsPerSec: 300, ServerCPUus: 9, ClientCPUus: 1, ClientAllocs: 20},
		{Workload: "beat", Adapter: "a", Ops: 20, Items: 20, Errors: 1, Seconds: 1, ItemsPerSec: 100, ServerCPUus: 5, ClientCPUus: 7, ClientAllocs: 30},
		{Workload: "beat", Adapter: "a", Ops: 30, Items: 30, Seconds: 1, ItemsPerSec: 200, ServerCPUus: 1, ClientCPUus: 4, ClientAllocs: 10},
	}
	got := benchkit.MedianRow(rows)
	want := benchkit.ThroughputRow{Workload: "beat", Adapter: "a", Ops: 60, Items: 60, Errors: 1, Seconds: 3, ItemsPerSec: 200,
		ServerCPUus: 5, ClientCPUus: 4, ClientAllocs: 20, Runs: 3}
	if got.Workload != want.Workload || got.Ops != want.Ops || got.Items != want.Items || got.Errors != want.Errors ||
		got.Seconds != want.Seconds || got.ItemsPerSec != want.ItemsPerSec || got.ServerCPUus != want.ServerCPUus ||
		got.ClientCPUus != want.ClientCPUus || got.ClientAllocs != want.ClientAllocs || got.Runs != want.Runs {
		t.Errorf("MedianRow = %+v, want %+v", got, want)
	}
	if z := benchkit.MedianRow(nil); z.Runs != 0 || z.Workload != "" {
		t.Errorf("MedianRow(nil) = %+v, want the zero row", z)
	}
}

// sink keeps the allocations of TestMeasureClientCosts on the heap.
var sink []*[64]byte

// TestMeasureClientCosts checks that a row charges the process's CPU and
// allocations to its items: an op that allocates 3 objects and spins until
// the process has used 20 µs more CPU (not wall time, which a loaded host
// stretches) shows about 3 allocations and at least 20 µs an item.
func TestMeasureClientCosts(t *testing.T) {
	if _, ok := benchkit.ProcessCPU(); !ok {
		t.Skip("this platform does not report process CPU time")
	}
	const ops = 2000
	row, err := benchkit.Measure(context.Background(), nil, "spin", "none", 1, benchkit.Load{Concurrency: 1, Duration: time.Minute, MaxOps: ops},
		func(context.Context, int, int) (int, error) {
			for range 3 {
				sink = append(sink[:0], new([64]byte))
			}
			start, _ := benchkit.ProcessCPU()
			for now := start; now-start < 20*time.Microsecond; now, _ = benchkit.ProcessCPU() {
			}
			return 1, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if row.Items != ops || row.ClientAllocs < 3 || row.ClientAllocs > 4 {
		t.Errorf("%d items, %.1f allocations an item, want %d and 3 to 4", row.Items, row.ClientAllocs, ops)
	}
	if row.ClientCPUus < 20 {
		t.Errorf("client CPU %.2f µs an item, want at least 20 (each op spins that long)", row.ClientCPUus)
	}
}
