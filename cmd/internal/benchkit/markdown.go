package benchkit

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes the report as Markdown tables, for
// docs/performance.md.
func (r *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "Run %s, Redis %s (default configuration, no persistence) at %s, %s, %d CPUs shared by client and server, load average %.2f at start, %.2f at end.\n",
		r.Started.Format("2006-01-02 15:04 MST"), r.Server.Version, r.Server.Addr, r.Host.Go, r.Host.CPUs, r.Host.LoadStart[0], r.Host.LoadEnd[0])
	if len(r.Throughput) > 0 {
		fmt.Fprintln(w, "\n| workload | adapter | workers | batch | items/s | p50 µs | p99 µs | server CPU µs/item | client CPU µs/item | client allocs/item | top server commands per item (calls × / µs) |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|")
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f | %s |\n", t.Workload, t.Adapter, t.Concurrency, t.Batch,
				t.ItemsPerSec, t.P50us, t.P99us, t.ServerCPUus, t.ClientCPUus, t.ClientAllocs, topCommands(t.Commands, 4))
		}
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w, "\n| memory | items | bytes/item | keys | encodings | notes |")
		fmt.Fprintln(w, "|---|--:|--:|--:|---|---|")
		for _, m := range r.Memory {
			note := m.Note
			if len(m.SampleBytes) > 0 {
				var parts []string
				for k, v := range m.SampleBytes {
					parts = append(parts, fmt.Sprintf("%s %d B", k, v))
				}
				sortSlice(parts, func(a, b string) bool { return a < b })
				note += "; " + strings.Join(parts, ", ")
			}
			fmt.Fprintf(w, "| %s | %d | %.1f | %d | %s | %s |\n", m.Workload, m.Items, m.BytesPerItem, m.Keys, mapString(m.Encodings), note)
		}
	}
	if len(r.Sweeps) > 0 {
		fmt.Fprintln(w, "\n| sweep | backlog | shards | steps | wall ms | scripts ms | server CPU ms | CPU ms/step | publish ms (messages) | longest call µs | p99 call µs | longest PING µs | shard encodings |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
		for _, s := range r.Sweeps {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %.1f | %.1f | %.1f | %.2f | %.1f (%d) | %.0f | %.0f | %.0f | %s |\n", s.Workload, s.Backlog, s.Shards, s.Steps,
				s.WallMs, s.EvalMs, s.ServerCPUms, s.ServerCPUms/float64(max(s.Steps, 1)), s.PublishMs, s.Published, s.MaxCallus, s.P99Callus, s.MaxPingus, s.Encoding)
		}
	}
	if len(r.Cache) > 0 {
		fmt.Fprintln(w, "\n| hot count read | reads | ns/read | cache hits | misses |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|")
		for _, c := range r.Cache {
			fmt.Fprintf(w, "| %s | %d | %.0f | %d | %d |\n", c.Workload, c.Reads, c.NsPerRead, c.Hits, c.Misses)
		}
	}
	if len(r.Stalls) > 0 {
		fmt.Fprintln(w, "\n| PING every 10 ms while | items | shards | ops | s | PINGs | p50 µs | p99 µs | max µs | call p99 µs | longest call µs |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, s := range r.Stalls {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %.2f | %d | %.0f | %.0f | %.0f | %.0f | %.0f |\n", s.Workload, s.Items, s.Shards, s.Ops, s.Seconds, s.Pings,
				s.P50Pingus, s.P99Pingus, s.MaxPingus, s.P99Callus, s.MaxCallus)
		}
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w)
		WriteTargetsMarkdown(w, r.Targets)
	}
	return nil
}

// WriteTargetsMarkdown writes target rows as a Markdown table.
func WriteTargetsMarkdown(w io.Writer, rows []TargetRow) {
	fmt.Fprintln(w, "| target | wanted | measured | met | note |")
	fmt.Fprintln(w, "|---|---|--:|---|---|")
	for _, t := range rows {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s %s | %s | %s |\n", t.Name, t.Target, fmtNum(t.Measured), t.Unit, met, t.Note)
	}
}
