package benchkit

import (
	"fmt"
	"strings"
)

// Targets of issue 8, as EvaluateTargets checks them.
const (
	TargetBatchedBeats   = 300_000 // beats/s, batched, one server
	TargetCompactBytes   = 16      // bytes per compact scope member at 100,000 members
	TargetDeviceBytes    = 120     // bytes per online device
	TargetSweepCallMicro = 2000    // µs, longest single call while sweeping
	TargetSweep50kMillis = 150     // ms to sweep 50,000 expired members
	TargetCacheSpeedup   = 50      // cached hot count read vs a round trip
	TargetVsCentrifuge   = 1.2     // heartbeat rate / Centrifuge AddPresence rate
)

// EvaluateTargets checks the targets that rep has figures for.
func EvaluateTargets(rep *Report) []TargetRow {
	var out []TargetRow
	best, bestAdapter, cpu := 0.0, "", 0.0
	for _, t := range rep.Throughput {
		if t.Workload == "heartbeat-batch" && t.ItemsPerSec > best {
			best, bestAdapter, cpu = t.ItemsPerSec, t.Adapter, t.ServerCPUus
		}
	}
	if bestAdapter != "" {
		note := "best adapter: " + bestAdapter
		if cpu > 0 {
			note += fmt.Sprintf("; server CPU %.1f µs/beat, so at most %.0f beats/s per Redis core", cpu, 1e6/cpu)
		}
		out = append(out, TargetRow{Name: "batched ingest", Target: fmt.Sprintf("≥ %d beats/s", TargetBatchedBeats),
			Measured: best, Unit: "beats/s", Met: best >= TargetBatchedBeats, Note: note})
	}
	for _, m := range rep.Memory {
		switch m.Workload {
		case "scope-compact":
			note := fmt.Sprintf("at %d members, %s", m.Items, m.Note)
			if m.Items < 100_000 {
				note += " (target is stated at 100,000)"
			}
			out = append(out, TargetRow{Name: "compact scope memory", Target: fmt.Sprintf("≤ %d B/member", TargetCompactBytes),
				Measured: m.BytesPerItem, Unit: "B/member", Met: m.BytesPerItem <= TargetCompactBytes, Note: note + "; encodings " + mapString(m.Encodings)})
		case "user-device":
			out = append(out, TargetRow{Name: "user presence memory", Target: fmt.Sprintf("≤ %d B/device", TargetDeviceBytes),
				Measured: m.BytesPerItem, Unit: "B/device", Met: m.BytesPerItem <= TargetDeviceBytes, Note: fmt.Sprintf("at %d devices", m.Items)})
		}
	}
	// Every sweep counts, shards past the listpack size included: a step
	// walks a shard with HSCAN, so no shard size makes a call long.
	var worst SweepRow
	for _, s := range rep.Sweeps {
		if s.MaxCallus >= worst.MaxCallus {
			worst = s
		}
		if s.Backlog == 50_000 {
			name := "sweep 50,000 expired " + strings.TrimPrefix(s.Workload, "scope-")
			if s.Workload != "users" {
				name += " members"
			}
			if s.Shards > 0 {
				name += fmt.Sprintf(" (%d shards)", s.Shards)
			}
			out = append(out, TargetRow{Name: name, Target: fmt.Sprintf("< %d ms", TargetSweep50kMillis),
				Measured: s.WallMs, Unit: "ms", Met: s.WallMs < TargetSweep50kMillis, Note: fmt.Sprintf("%d calls, longest %.0f µs; scripts %.1f ms, publishing %d changes %.1f ms", s.Calls, s.MaxCallus, s.EvalMs, s.Published, s.PublishMs)})
		}
	}
	if worst.Workload != "" {
		note := fmt.Sprintf("%s, backlog %d: %s", worst.Workload, worst.Backlog, worst.MaxCall)
		if worst.Shards > 0 {
			note += fmt.Sprintf(" (%d shards, %s)", worst.Shards, worst.Encoding)
		}
		out = append(out, TargetRow{Name: "longest call while sweeping", Target: fmt.Sprintf("≤ %d µs", TargetSweepCallMicro),
			Measured: worst.MaxCallus, Unit: "µs", Met: worst.MaxCallus <= TargetSweepCallMicro, Note: note})
	}
	for _, s := range rep.Stalls {
		if s.Pings == 0 || s.Items == 0 { // the baseline is no target
			continue
		}
		out = append(out, TargetRow{Name: "PING p99 while " + s.Workload, Target: fmt.Sprintf("≤ %d µs", TargetStallPingP99),
			Measured: s.P99Pingus, Unit: "µs", Met: s.P99Pingus <= TargetStallPingP99,
			Note: fmt.Sprintf("%d items; %d PINGs, p50 %.0f µs, max %.0f µs; longest call %.0f µs", s.Items, s.Pings, s.P50Pingus, s.MaxPingus, s.MaxCallus)})
	}
	var cached, trip float64
	for _, c := range rep.Cache {
		switch {
		case strings.HasPrefix(c.Workload, "Count via rueidis"):
			cached = c.NsPerRead
		case strings.HasPrefix(c.Workload, "GET round trip"):
			trip = c.NsPerRead
		}
	}
	if cached > 0 && trip > 0 {
		ratio := round(trip/cached, 1)
		out = append(out, TargetRow{Name: "rueidis cached count", Target: fmt.Sprintf("≥ %d× a round trip", TargetCacheSpeedup),
			Measured: ratio, Unit: "×", Met: ratio >= TargetCacheSpeedup, Note: fmt.Sprintf("%.0f ns cached Count vs %.0f ns GET", cached, trip)})
	}
	return out
}
