package benchkit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Admin reads what a Redis server reports about itself. It has a client of
// its own, so that its reads never queue behind a workload's.
type Admin struct {
	c     *redis.Client
	instr InstructionCounter
}

// NewAdmin returns an Admin over c. It does not own c.
func NewAdmin(c *redis.Client) *Admin { return &Admin{c: c} }

// CountInstructions makes Measure report the server's instructions per
// item, read from count (nil: none, the default).
func (a *Admin) CountInstructions(count InstructionCounter) { a.instr = count }

// Client returns the Admin's client.
func (a *Admin) Client() *redis.Client { return a.c }

// Info returns the fields of INFO section as a map.
func (a *Admin) Info(ctx context.Context, section string) (map[string]string, error) {
	s, err := a.c.Info(ctx, section).Result()
	if err != nil {
		return nil, &ServerError{Op: "INFO " + section, Err: err}
	}
	return parseInfo(s), nil
}

func parseInfo(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// ServerInfo describes the server a report was taken on.
type ServerInfo struct {
	Version string `json:"version"`
	Addr    string `json:"addr"`
	// Miniredis is set when the target is the embedded miniredis, whose
	// figures say nothing about a real server.
	Miniredis bool `json:"miniredis"`
	// Config holds the server settings that shape the figures
	// (hash-max-listpack-entries, zset-max-listpack-entries, ...).
	Config map[string]string `json:"config"`
}

// Describe returns the server's version and the settings that matter here.
func (a *Admin) Describe(ctx context.Context) (ServerInfo, error) {
	info, err := a.Info(ctx, "server")
	if err != nil {
		return ServerInfo{}, err
	}
	si := ServerInfo{Version: info["redis_version"], Addr: a.c.Options().Addr, Config: map[string]string{}}
	for _, k := range []string{"hash-max-listpack-entries", "hash-max-listpack-value",
		"zset-max-listpack-entries", "zset-max-listpack-value", "maxmemory", "save", "appendonly", "io-threads"} {
		if v, err := a.c.ConfigGet(ctx, k).Result(); err == nil {
			si.Config[k] = v[k]
		}
	}
	return si, nil
}

// DataMemory returns used_memory less the memory of client buffers (query
// and output buffers vary with what the clients last sent, not with the
// data held).
func (a *Admin) DataMemory(ctx context.Context) (int64, error) {
	info, err := a.Info(ctx, "memory")
	if err != nil {
		return 0, err
	}
	used, err := strconv.ParseInt(info["used_memory"], 10, 64)
	if err != nil {
		return 0, &ServerError{Op: "INFO memory", Err: fmt.Errorf("used_memory %q: %w", info["used_memory"], err)}
	}
	clients, _ := strconv.ParseInt(info["mem_clients_normal"], 10, 64)
	replicas, _ := strconv.ParseInt(info["mem_clients_slaves"], 10, 64)
	return used - clients - replicas, nil
}

// ServerCPU returns the CPU time the server's main thread has used (INFO
// cpu, user and system): unlike command latencies, it does not grow when
// other processes preempt the server, so it measures cost on a busy host.
func (a *Admin) ServerCPU(ctx context.Context) (time.Duration, error) {
	info, err := a.Info(ctx, "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, k := range []string{"used_cpu_user_main_thread", "used_cpu_sys_main_thread"} {
		v, ok := info[k]
		if !ok { // before Redis 7: the whole process
			v = info[strings.TrimSuffix(k, "_main_thread")]
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, &ServerError{Op: "INFO cpu", Err: fmt.Errorf("%s %q: %w", k, v, err)}
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

// SteadyMemory waits (a bounded number of tries) until DataMemory stops
// moving, so that lazy frees have finished, and returns it with the
// number of keys (DBSIZE).
func (a *Admin) SteadyMemory(ctx context.Context) (bytes, keys int64, err error) {
	var last int64 = -1
	for range 20 {
		m, err := a.DataMemory(ctx)
		if err != nil {
			return 0, 0, err
		}
		if m == last {
			break
		}
		last = m
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	keys, err = a.c.DBSize(ctx).Result()
	if err != nil {
		return 0, 0, &ServerError{Op: "DBSIZE", Err: err}
	}
	return last, keys, nil
}

// CommandStats returns the calls of each command (INFO commandstats),
// commands run from scripts included.
func (a *Admin) CommandStats(ctx context.Context) (map[string]CommandStat, error) {
	info, err := a.Info(ctx, "commandstats")
	if err != nil {
		return nil, err
	}
	out := map[string]CommandStat{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		var cs CommandStat
		for _, f := range strings.Split(v, ",") {
			fk, fv, _ := strings.Cut(f, "=")
			switch fk {
			case "calls":
				cs.Calls, _ = strconv.ParseInt(fv, 10, 64)
			case "usec":
				cs.Usec, _ = strconv.ParseInt(fv, 10, 64)
			}
		}
		out[name] = cs
	}
	return out, nil
}

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct {
	Calls int64 `json:"calls"`
	Usec  int64 `json:"usec"`
}

// CommandDelta is the per-item share of one command between two
// commandstats readings.
type CommandDelta struct {
	Command      string  `json:"command"`
	CallsPerItem float64 `json:"calls_per_item"`
	UsecPerItem  float64 `json:"usec_per_item"`
}

// DiffCommands returns, per item, the calls and server time of every
// command whose calls grew from before to after, largest time first,
// leaving out the probes' own commands (info, ping, config, slowlog).
func DiffCommands(before, after map[string]CommandStat, items int) []CommandDelta {
	if items < 1 {
		items = 1
	}
	var out []CommandDelta
	for name, a := range after {
		switch name {
		case "info", "ping", "config|get", "config|set", "slowlog|get", "slowlog|reset", "slowlog|len", "client|setinfo", "hello", "client|tracking", "memory|usage", "object|encoding":
			continue
		}
		b := before[name]
		if a.Calls <= b.Calls {
			continue
		}
		out = append(out, CommandDelta{Command: name, CallsPerItem: float64(a.Calls-b.Calls) / float64(items),
			UsecPerItem: float64(a.Usec-b.Usec) / float64(items)})
	}
	sortSlice(out, func(x, y CommandDelta) bool {
		if x.UsecPerItem != y.UsecPerItem {
			return x.UsecPerItem > y.UsecPerItem
		}
		return x.Command < y.Command
	})
	return out
}

// SlowlogEntry is one SLOWLOG entry.
type SlowlogEntry struct {
	Duration time.Duration `json:"duration_ns"`
	Command  string        `json:"command"` // name and first arguments, shortened
}

// StartSlowlog logs every command of at least slower (slowlog-log-slower-than,
// 0 for every command) from now on, with room for maxLen entries, and
// empties the log. The returned function reads
// the log and restores the previous settings; call it exactly once.
func (a *Admin) StartSlowlog(ctx context.Context, slower time.Duration, maxLen int) (func(context.Context) ([]SlowlogEntry, error), error) {
	prev, err := a.c.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		return nil, &ServerError{Op: "CONFIG GET slowlog-*", Err: err}
	}
	if err := a.c.ConfigSet(ctx, "slowlog-max-len", strconv.Itoa(maxLen)).Err(); err != nil {
		return nil, &ServerError{Op: "CONFIG SET slowlog-max-len", Err: err}
	}
	if err := a.c.ConfigSet(ctx, "slowlog-log-slower-than", strconv.FormatInt(slower.Microseconds(), 10)).Err(); err != nil {
		return nil, &ServerError{Op: "CONFIG SET slowlog-log-slower-than", Err: err}
	}
	if err := a.c.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		return nil, &ServerError{Op: "SLOWLOG RESET", Err: err}
	}
	return func(ctx context.Context) ([]SlowlogEntry, error) {
		defer func() {
			for k, v := range prev {
				_ = a.c.ConfigSet(context.WithoutCancel(ctx), k, v).Err()
			}
		}()
		// Turn logging off first so that reading the log is not logged.
		if err := a.c.ConfigSet(ctx, "slowlog-log-slower-than", "-1").Err(); err != nil {
			return nil, &ServerError{Op: "CONFIG SET slowlog-log-slower-than", Err: err}
		}
		logs, err := a.c.SlowLogGet(ctx, -1).Result()
		if err != nil {
			return nil, &ServerError{Op: "SLOWLOG GET", Err: err}
		}
		out := make([]SlowlogEntry, 0, len(logs))
		for _, l := range logs {
			out = append(out, SlowlogEntry{Duration: l.Duration, Command: shortCommand(l.Args)})
		}
		return out, nil
	}, nil
}

// shortCommand names a logged command: its name, and for EVALSHA the SHA's
// first 8 digits.
func shortCommand(args []string) string {
	if len(args) == 0 {
		return ""
	}
	name := strings.ToLower(args[0])
	if (name == "evalsha" || name == "evalsha_ro") && len(args) > 1 {
		sha := args[1]
		if len(sha) > 8 {
			sha = sha[:8]
		}
		return name + " " + sha
	}
	return name
}

// Encodings returns how many of keys have each OBJECT ENCODING; keys that
// do not exist are counted under "missing".
func (a *Admin) Encodings(ctx context.Context, keys []string) (map[string]int, error) {
	out := map[string]int{}
	pipe := a.c.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.ObjectEncoding(ctx, k)
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range cmds {
		enc, err := c.Result()
		switch {
		case err == redis.Nil:
			out["missing"]++
		case err != nil:
			return nil, &ServerError{Op: "OBJECT ENCODING", Err: err}
		default:
			out[enc]++
		}
	}
	return out, nil
}

// MemoryUsage returns MEMORY USAGE of each key (0 for a missing key).
func (a *Admin) MemoryUsage(ctx context.Context, keys []string) ([]int64, error) {
	out := make([]int64, len(keys))
	for i, k := range keys {
		n, err := a.c.MemoryUsage(ctx, k, 0).Result()
		if err != nil && err != redis.Nil {
			return nil, &ServerError{Op: "MEMORY USAGE", Err: err}
		}
		out[i] = n
	}
	return out, nil
}

// Probe PINGs the server on its own connection every interval until the
// returned stop is called, and stop returns the round-trip latencies: what
// any other client would have waited while a workload ran (the figure
// redis-cli --latency prints).
func (a *Admin) Probe(ctx context.Context, interval time.Duration) (stop func() *Hist) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		h    Hist
		done = make(chan struct{})
		once sync.Once
	)
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			t0 := time.Now()
			if err := a.c.Ping(ctx).Err(); err != nil {
				if ctx.Err() != nil {
					return
				}
				continue
			}
			h.Record(time.Since(t0))
		}
	}()
	return func() *Hist {
		once.Do(cancel)
		<-done
		return &h
	}
}

// ServerError is a failed administrative read or setting.
type ServerError struct {
	Op  string
	Err error
}

// Error names the command.
func (e *ServerError) Error() string { return "benchkit: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the driver's error.
func (e *ServerError) Unwrap() error { return e.Err }
