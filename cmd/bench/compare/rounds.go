package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"

	"github.com/presencekit/presence/cmd/internal/benchkit"
)

// job is one row of the comparison: a workload through one design.
type job struct {
	workload, design string
	batch            int
	load             benchkit.Load
	op               benchkit.Op
}

// measureRounds measures every job --runs times, in rounds: each round
// measures each job once, odd rounds in reverse order, so that a drift of
// the host's load over the run falls on every design alike. It adds one
// row per job, the median of its rounds, and keeps each round's rows for
// the ratios, which are taken within a round.
func (c *comparison) measureRounds(ctx context.Context, jobs []job) error {
	rows := make([][]benchkit.ThroughputRow, len(jobs))
	for r := range c.o.runs {
		order := make([]int, len(jobs))
		for i := range order {
			order[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			j := jobs[i]
			row, err := c.measure(ctx, j, r)
			if err != nil {
				return err
			}
			c.logf("round %d  %-24s %-16s %10.0f /s  p50 %6.0f µs  p99 %6.0f µs  server %.2f µs  client %.2f µs, %.1f allocs", r+1,
				row.Adapter, row.Workload, row.ItemsPerSec, row.P50us, row.P99us, row.ServerCPUus, row.ClientCPUus, row.ClientAllocs)
			row.Commands = nil
			rows[i] = append(rows[i], row)
		}
	}
	for i := range jobs {
		row := rows[i][0]
		if c.o.runs > 1 {
			row = benchkit.MedianRow(rows[i])
		}
		c.rep.Throughput = append(c.rep.Throughput, row)
		c.rep.Rounds = append(c.rep.Rounds, rows[i])
	}
	return nil
}

// measure runs one job once, under the CPU profiler when --cpuprofile asks.
func (c *comparison) measure(ctx context.Context, j job, round int) (benchkit.ThroughputRow, error) {
	if c.o.cpuprofile != "" {
		name := fmt.Sprintf("%s-%s-c%d-r%d.pprof", j.design, j.workload, j.load.Concurrency, round+1)
		f, err := os.Create(filepath.Join(c.o.cpuprofile, fileName(name)))
		if err != nil {
			return benchkit.ThroughputRow{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return benchkit.ThroughputRow{}, err
		}
		defer pprof.StopCPUProfile()
	}
	return benchkit.Measure(ctx, c.admin, j.workload, j.design, j.batch, j.load, j.op)
}

// fileName makes a design's name fit a file name.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r == '+':
			return 'p'
		}
		return '_'
	}, s)
}

// ratio is one engine design's figures over Centrifuge's, the median and
// range of the rounds' ratios (each round's figures side by side).
type ratio struct {
	Design    string     `json:"design"`
	Rate      [3]float64 `json:"rate"`       // median, min, max
	ServerCPU [3]float64 `json:"server_cpu"` // the same
	ClientCPU [3]float64 `json:"client_cpu"` // the same
}

// ratios returns each engine design's single-beat ratios to Centrifuge's,
// round by round; none without a Centrifuge beat row.
func (c *comparison) ratios() []ratio {
	byName := map[string][]benchkit.ThroughputRow{}
	var names []string
	for _, rs := range c.rep.Rounds {
		if len(rs) == 0 || rs[0].Workload != "beat" {
			continue
		}
		byName[rs[0].Adapter] = rs
		names = append(names, rs[0].Adapter)
	}
	cf := byName["centrifuge"]
	if len(cf) == 0 {
		return nil
	}
	var out []ratio
	for _, name := range names {
		if !strings.HasPrefix(name, "engine/") {
			continue
		}
		rs := byName[name]
		var rate, srv, cli []float64
		for r := range min(len(rs), len(cf)) {
			if cf[r].ItemsPerSec > 0 {
				rate = append(rate, rs[r].ItemsPerSec/cf[r].ItemsPerSec)
			}
			if cf[r].ServerCPUus > 0 {
				srv = append(srv, rs[r].ServerCPUus/cf[r].ServerCPUus)
			}
			if cf[r].ClientCPUus > 0 {
				cli = append(cli, rs[r].ClientCPUus/cf[r].ClientCPUus)
			}
		}
		out = append(out, ratio{Design: name, Rate: spread(rate), ServerCPU: spread(srv), ClientCPU: spread(cli)})
	}
	return out
}

// spread returns the median, least and greatest of v, to two places.
func spread(v []float64) [3]float64 {
	if len(v) == 0 {
		return [3]float64{}
	}
	r2 := func(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }
	return [3]float64{r2(benchkit.Median(v)), r2(slices.Min(v)), r2(slices.Max(v))}
}

// spreadString writes a spread as "1.23× (1.10–1.40)", or "1.23×" for one round.
func spreadString(s [3]float64) string {
	if s[1] == s[2] {
		return strconv.FormatFloat(s[0], 'f', 2, 64) + "×"
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s[0], s[1], s[2])
}
