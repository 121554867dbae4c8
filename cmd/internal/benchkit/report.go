package benchkit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// SchemaVersion names the JSON layout of Report.
const SchemaVersion = "presence-bench/1"

// Report is the outcome of a Suite run. Encoded as JSON (encoding/json),
// its fields are, by JSON name:
//
//	schema       "presence-bench/1"
//	started      RFC 3339 start time
//	host         {go, goos, goarch, cpus, load_start [1,5,15 min], load_end}
//	server       {version, addr, miniredis, config {setting: value}}
//	settings     the Suite's effective settings (durations in ns)
//	throughput   rows {workload, adapter, concurrency, batch, ops, items,
//	             errors, seconds, ops_per_sec, items_per_sec, p50_us, p99_us,
//	             max_us, server_cpu_us_per_item, client_cpu_us_per_item,
//	             client_allocs_per_item, runs, commands [{command,
//	             calls_per_item, usec_per_item}]}
//	             (server_cpu_us_per_item: the server main thread's CPU time
//	             per item, INFO cpu deltas; unlike latencies it holds on a
//	             busy host; client_cpu_us_per_item: this process's CPU
//	             time per item, getrusage deltas; client_allocs_per_item:
//	             its heap allocations per item; runs: rounds folded into
//	             a median row)
//	             (commands: INFO commandstats deltas per item, commands run
//	             inside scripts included: what one beat, touch or read costs
//	             the server)
//	memory       rows {workload, items, bytes, bytes_per_item, keys,
//	             encodings {encoding: keys}, sample_key_bytes {key kind: bytes},
//	             note}
//	sweeps       rows {workload, backlog, shards, removed, steps, wall_ms,
//	             eval_ms, server_cpu_ms, publish_ms, rounds, published,
//	             calls, max_call_us, max_call, p99_call_us,
//	             slowlog_truncated, max_ping_us, p99_ping_us, encoding,
//	             fill_ms}
//	             (wall_ms: the whole Sweep call; eval_ms: its pipelined
//	             script rounds; server_cpu_ms: the server main thread's CPU
//	             time meanwhile, robust on a busy host; publish_ms: its
//	             PUBLISH round trips, one per change; calls and their
//	             durations: SLOWLOG, every call of SlowlogFloor (10 µs) or
//	             more; pings: a PING every 1 ms on a connection of its own,
//	             what any other client waited)
//	cache        rows {workload, reads, ns_per_read, hits, misses}
//	stalls       rows {workload, items, shards, ops, seconds, pings,
//	             p50_ping_us, p99_ping_us, max_ping_us, p99_call_us,
//	             max_call_us, max_call} (a PING every 10 ms on a
//	             connection of its own while the workload ran: what any
//	             other client waited; calls: the script calls SLOWLOG kept)
//	targets      rows {name, target, measured, unit, met, note}
//
// Latencies are in microseconds, sizes in bytes, rates per second.
type Report struct {
	Schema     string          `json:"schema"`
	Started    time.Time       `json:"started"`
	Host       HostInfo        `json:"host"`
	Server     ServerInfo      `json:"server"`
	Settings   Settings        `json:"settings"`
	Throughput []ThroughputRow `json:"throughput"`
	Memory     []MemoryRow     `json:"memory"`
	Sweeps     []SweepRow      `json:"sweeps"`
	Cache      []CacheRow      `json:"cache"`
	Stalls     []StallRow      `json:"stalls"`
	Targets    []TargetRow     `json:"targets"`
}

// HostInfo describes the client machine.
type HostInfo struct {
	Go        string     `json:"go"`
	GOOS      string     `json:"goos"`
	GOARCH    string     `json:"goarch"`
	CPUs      int        `json:"cpus"`
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
}

// Host returns this machine's description with its load average now.
func Host() HostInfo {
	return HostInfo{Go: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), LoadStart: LoadAvg()}
}

// LoadAvg returns the 1, 5 and 15 minute load averages (Linux), or zeros.
func LoadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// ThroughputRow is one throughput workload through one client.
type ThroughputRow struct {
	Workload    string  `json:"workload"`
	Adapter     string  `json:"adapter"`
	Concurrency int     `json:"concurrency"`
	Batch       int     `json:"batch"`
	Ops         int     `json:"ops"`
	Items       int     `json:"items"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	ItemsPerSec float64 `json:"items_per_sec"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	Maxus       float64 `json:"max_us"`
	ServerCPUus float64 `json:"server_cpu_us_per_item"`
	ServerInstr float64 `json:"server_instructions_per_item,omitempty"` // when the Admin counts them
	// ClientCPUus is this process's CPU time (user and system, every
	// goroutine and the garbage collector) over the run, per item: what the
	// caller pays, measured as ServerCPUus is for the server.
	ClientCPUus float64 `json:"client_cpu_us_per_item"`
	// ClientAllocs is this process's heap allocations over the run, per
	// item.
	ClientAllocs float64 `json:"client_allocs_per_item"`
	// Runs is how many rounds MedianRow folded into the row (0: one run).
	Runs     int            `json:"runs,omitempty"`
	Commands []CommandDelta `json:"commands,omitempty"`
}

// NewThroughputRow fills a row from a Result.
func NewThroughputRow(workload, adapter string, concurrency, batch int, r *Result) ThroughputRow {
	return ThroughputRow{
		Workload: workload, Adapter: adapter, Concurrency: concurrency, Batch: batch,
		Ops: r.Ops, Items: r.Items, Errors: r.Errors, Seconds: r.Elapsed.Seconds(),
		OpsPerSec: round(r.OpsPerSec(), 0), ItemsPerSec: round(r.ItemsPerSec(), 0),
		P50us: us(r.Latency.Quantile(0.50)), P99us: us(r.Latency.Quantile(0.99)), Maxus: us(r.Latency.Max()),
	}
}

// MemoryRow is the Redis memory one kind of entry takes.
type MemoryRow struct {
	Workload     string           `json:"workload"`
	Items        int              `json:"items"`
	Bytes        int64            `json:"bytes"`
	BytesPerItem float64          `json:"bytes_per_item"`
	Keys         int              `json:"keys"`
	Encodings    map[string]int   `json:"encodings,omitempty"`
	SampleBytes  map[string]int64 `json:"sample_key_bytes,omitempty"`
	Note         string           `json:"note,omitempty"`
}

// SweepRow is one sweep of an expired backlog.
type SweepRow struct {
	Workload    string  `json:"workload"`
	Backlog     int     `json:"backlog"`
	Shards      int     `json:"shards,omitempty"`
	Removed     int     `json:"removed"`
	Steps       int     `json:"steps"`
	WallMs      float64 `json:"wall_ms"`
	EvalMs      float64 `json:"eval_ms"`
	ServerCPUms float64 `json:"server_cpu_ms"`
	PublishMs   float64 `json:"publish_ms"`
	Rounds      int     `json:"rounds"`
	Published   int     `json:"published"`
	Calls       int     `json:"calls"`
	MaxCallus   float64 `json:"max_call_us"`
	MaxCall     string  `json:"max_call"`
	P99Callus   float64 `json:"p99_call_us"`
	Truncated   bool    `json:"slowlog_truncated"`
	MaxPingus   float64 `json:"max_ping_us"`
	P99Pingus   float64 `json:"p99_ping_us"`
	Encoding    string  `json:"encoding,omitempty"`
	FillMillis  float64 `json:"fill_ms"`
}

// CacheRow is one way of reading a hot count.
type CacheRow struct {
	Workload  string  `json:"workload"`
	Reads     int     `json:"reads"`
	NsPerRead float64 `json:"ns_per_read"`
	Hits      uint64  `json:"hits"`
	Misses    uint64  `json:"misses"`
}

// TargetRow is one target of issue 8 against its measured figure.
type TargetRow struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
	Note     string  `json:"note,omitempty"`
}

func us(d time.Duration) float64 { return round(float64(d)/1e3, 1) }

func round(v float64, places int) float64 {
	p := 1.0
	for i := 0; i < places; i++ {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as aligned text tables.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "presence bench  %s  redis %s at %s  go %s  %d CPUs  load %.2f→%.2f\n",
		r.Started.Format(time.RFC3339), r.Server.Version, r.Server.Addr, r.Host.Go, r.Host.CPUs, r.Host.LoadStart[0], r.Host.LoadEnd[0])
	if r.Server.Miniredis {
		fmt.Fprintln(w, "WARNING: embedded miniredis: these figures say nothing about a real Redis")
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	if len(r.Throughput) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "workload\tadapter\tconc\tbatch\tops/s\titems/s\tp50 µs\tp99 µs\tmax µs\tsrv CPU µs/item\tcli CPU µs/item\tcli allocs/item\terrors\ttop server time per item\t")
		for _, t := range r.Throughput {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t%s\t\n", t.Workload, t.Adapter, t.Concurrency, t.Batch,
				t.OpsPerSec, t.ItemsPerSec, t.P50us, t.P99us, t.Maxus, t.ServerCPUus, t.ClientCPUus, t.ClientAllocs, t.Errors, topCommands(t.Commands, 3))
		}
		tw.Flush()
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "memory\titems\tbytes\tbytes/item\tkeys\tencodings\t")
		for _, m := range r.Memory {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%d\t%s\t\n", m.Workload, m.Items, m.Bytes, m.BytesPerItem, m.Keys, mapString(m.Encodings))
		}
		tw.Flush()
	}
	if len(r.Sweeps) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "sweep\tbacklog\tshards\tremoved\tsteps\twall ms\tscripts ms\tsrv CPU ms\tpublish ms (msgs)\tcalls ≥10µs\tmax call µs\tp99 call µs\tmax ping µs\tlongest call\t")
		for _, s := range r.Sweeps {
			trunc := ""
			if s.Truncated {
				trunc = " (slowlog full)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f (%d)\t%d\t%.0f\t%.0f\t%.0f\t%s%s\t\n", s.Workload, s.Backlog, s.Shards, s.Removed, s.Steps,
				s.WallMs, s.EvalMs, s.ServerCPUms, s.PublishMs, s.Published, s.Calls, s.MaxCallus, s.P99Callus, s.MaxPingus, s.MaxCall, trunc)
		}
		tw.Flush()
	}
	if len(r.Cache) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "hot count read\treads\tns/read\thits\tmisses\t")
		for _, c := range r.Cache {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%d\t\n", c.Workload, c.Reads, c.NsPerRead, c.Hits, c.Misses)
		}
		tw.Flush()
	}
	if len(r.Stalls) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "while\titems\tshards\tops\ts\tpings\tPING p50 µs\tp99 µs\tmax µs\tcall p99 µs\tlongest call µs\t")
		for _, s := range r.Stalls {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f %s\t\n", s.Workload, s.Items, s.Shards, s.Ops, s.Seconds, s.Pings,
				s.P50Pingus, s.P99Pingus, s.MaxPingus, s.P99Callus, s.MaxCallus, s.MaxCall)
		}
		tw.Flush()
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w)
		WriteTargets(tw, r.Targets)
		tw.Flush()
	}
	return nil
}

// WriteTargets writes target rows as a table to w.
func WriteTargets(w io.Writer, rows []TargetRow) {
	fmt.Fprintln(w, "target\twanted\tmeasured\tmet\tnote\t")
	for _, t := range rows {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s %s\t%s\t%s\t\n", t.Name, t.Target, fmtNum(t.Measured), t.Unit, met, t.Note)
	}
}

func fmtNum(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func topCommands(c []CommandDelta, n int) string {
	var parts []string
	for i := 0; i < len(c) && i < n; i++ {
		parts = append(parts, fmt.Sprintf("%s %.2f×/%.1fµs", c[i].Command, c[i].CallsPerItem, c[i].UsecPerItem))
	}
	return strings.Join(parts, ", ")
}

func mapString(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+":"+strconv.Itoa(v))
	}
	sortSlice(parts, func(a, b string) bool { return a < b })
	return strings.Join(parts, " ")
}

// WriteFile creates path and fills it with write (a report's WriteJSON or
// WriteMarkdown).
func WriteFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
