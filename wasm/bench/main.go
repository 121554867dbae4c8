//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/abi"
)

// t0 and the beats are those of shared.mjs.
const t0 = 1767225600000

func beats(n int) []core.Heartbeat {
	out := make([]core.Heartbeat, n)
	for i := range out {
		out[i] = core.Heartbeat{User: "user-" + strconv.Itoa(i), Device: "web", Kind: core.KindWeb, Token: "0123456789abcdef"}
	}
	return out
}

// warmUp is how many operations of times run before they are measured:
// half as many, and at least 20,000 heartbeats or 1,000 batches of 100.
// V8 compiles a WebAssembly function again, optimised, in the background,
// only once it has run a while: after a short warm-up the measured
// heartbeats still ran unoptimised code and paid for its compilation.
func warmUp(times, per int) int {
	if per == 1 {
		return max(times/2, 20000)
	}
	return max(times/2, 1000)
}

// settings are shared.mjs's config.
var settings = core.Config{Prefix: "bench", UserBuckets: 1}

func main() {
	runs := flag.Int("runs", 3, "rounds of every runtime; each figure is the median of its rounds")
	n := flag.Int("n", 2000, "single heartbeats a round (and n/100 batches of 100)")
	only := flag.String("runtimes", "node,deno,workerd", "the runtimes to measure, comma-separated")
	phases := flag.Bool("phases", false, "instead, measure a first request's parts in node and deno: the bytes of WebAssembly each compiles, and its CPU, beside Go's runtime alone")
	keep := flag.String("keep", "", "a directory to keep presence.wasm and replies.json in, for profiling run.mjs by hand")
	flag.Parse()
	if err := run(*runs, *n, strings.Split(*only, ","), *keep, *phases); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// round is one runtime's figures in one round.
type round struct {
	FirstRequestMS float64 `json:"first_request_cpu_ms"`
	InitMS         float64 `json:"init_ms"`
	ConfigureMS    float64 `json:"configure_ms"`
	FirstBeatMS    float64 `json:"first_beat_ms"`
	ReconfigureMS  float64 `json:"reconfigure_ms"`
	SingleNS       float64 `json:"single_cpu_ns"`
	BatchNS        float64 `json:"batch_cpu_ns"`
}

func run(runs, n int, runtimes []string, keep string, phases bool) error {
	ctx := context.Background()
	wasmDir, err := wasmDir()
	if err != nil {
		return err
	}
	tmp := keep
	if keep == "" {
		if tmp, err = os.MkdirTemp("", "presence-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
	} else if err := os.MkdirAll(keep, 0o755); err != nil {
		return err
	}
	module := filepath.Join(tmp, "presence.wasm")
	if err := wasm.Build(ctx, wasm.WASI, module); err != nil {
		return err
	}
	replies, results, err := record(ctx)
	if err != nil {
		return err
	}
	repliesFile := filepath.Join(tmp, "replies.json")
	if err := writeJSON(repliesFile, replies); err != nil {
		return err
	}
	if phases {
		return runPhases(ctx, runs, runtimes, wasmDir, module, repliesFile)
	}

	native := map[string][]float64{}
	got := map[string][]round{}
	for range runs {
		s, b := measureNative(ctx, results, n)
		native["single"] = append(native["single"], s)
		native["batch"] = append(native["batch"], b)
		for _, rt := range runtimes {
			var r round
			switch rt {
			case "node", "deno":
				r, err = runJS(ctx, rt, wasmDir, module, repliesFile, n)
			case "workerd":
				r, err = runWorkerd(ctx, wasmDir, tmp, n)
			default:
				err = errors.New("unknown runtime " + rt)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", rt, err)
			}
			got[rt] = append(got[rt], r)
			// The ratios are per round: the native figure of the same
			// minute, under the same load.
			r.SingleNS /= s
			r.BatchNS /= b
			got[rt+"/ratio"] = append(got[rt+"/ratio"], r)
		}
	}
	commit := gitCommit(wasmDir)
	load := loadAverage()
	line := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	line(map[string]any{"runtime": "native", "single_cpu_us": median(native["single"]) / 1e3,
		"batch_cpu_us": median(native["batch"]) / 1e3, "commit": commit, "runs": runs, "load": load})
	for _, rt := range runtimes {
		rs, ratios := got[rt], got[rt+"/ratio"]
		pick := func(f func(round) float64, from []round) float64 {
			var v []float64
			for _, r := range from {
				v = append(v, f(r))
			}
			return median(v)
		}
		line(map[string]any{
			"runtime":              rt,
			"single_ratio":         round1(pick(func(r round) float64 { return r.SingleNS }, ratios)),
			"batch_ratio":          round1(pick(func(r round) float64 { return r.BatchNS }, ratios)),
			"first_request_cpu_ms": round1(pick(func(r round) float64 { return r.FirstRequestMS }, rs)),
			"init_ms":              round1(pick(func(r round) float64 { return r.InitMS }, rs)),
			"configure_ms":         round1(pick(func(r round) float64 { return r.ConfigureMS }, rs)),
			"first_beat_ms":        round1(pick(func(r round) float64 { return r.FirstBeatMS }, rs)),
			"reconfigure_ms":       round2(pick(func(r round) float64 { return r.ReconfigureMS }, rs)),
			"single_cpu_us":        round1(pick(func(r round) float64 { return r.SingleNS }, rs) / 1e3),
			"batch_cpu_us":         round1(pick(func(r round) float64 { return r.BatchNS }, rs) / 1e3),
			"commit":               commit,
			"runs":                 runs,
			"load":                 load,
		})
	}
	return nil
}

// record runs the benchmark's heartbeats natively against a redis-server
// of its own and keeps the last reply to each shape of script call: as
// ABI result texts for the runtimes (replies.json), as results for the
// native engine. The server is stopped before anything is measured.
func record(ctx context.Context) (map[string]string, map[string]core.Result, error) {
	addr, stop, err := startRedis(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	rec := &recorder{inner: goredis.New(c), results: map[string]core.Result{}}
	clk := &clock{ms: t0}
	cfg := settings
	cfg.Clock = clk.Now
	e, err := core.New(rec, cfg)
	if err != nil {
		return nil, nil, err
	}
	// Twice: sessions, then beats that change nothing but liveness.
	for range 2 {
		clk.ms += 1000
		if _, err := e.Heartbeat(ctx, beats(1)[0]); err != nil {
			return nil, nil, err
		}
		if _, err := e.HeartbeatBatch(ctx, beats(100)); err != nil {
			return nil, nil, err
		}
	}
	texts := map[string]string{}
	for k, r := range rec.results {
		t, err := resultText(r)
		if err != nil {
			return nil, nil, err
		}
		texts[k] = t
	}
	return texts, rec.results, nil
}

// shape keys a script call as shared.mjs does: its script and its number
// of keys and arguments.
func shape(c core.Call) string {
	s := c.SHA
	if s == "" {
		s = c.Source
	}
	return s + "/" + strconv.Itoa(len(c.Keys)+len(c.Args))
}

// recorder is a core.Store that keeps the last good result of each shape.
type recorder struct {
	inner   core.Store
	results map[string]core.Result
}

func (r *recorder) Eval(ctx context.Context, calls []core.Call) []core.Result {
	out := r.inner.Eval(ctx, calls)
	for i, res := range out {
		if res.Err == nil {
			r.results[shape(calls[i])] = res
		}
	}
	return out
}

// replay is a core.Store that answers from recorded results.
type replay map[string]core.Result

func (r replay) Eval(_ context.Context, calls []core.Call) []core.Result {
	out := make([]core.Result, len(calls))
	for i, c := range calls {
		res, ok := r[shape(c)]
		if !ok {
			res = core.Result{Err: errors.New("bench: no recorded reply for " + shape(c))}
		}
		out[i] = res
	}
	return out
}

// resultText is a result's ABI text, as a resume request carries it.
func resultText(r core.Result) (string, error) {
	b, err := abi.EncodeRequest(abi.Request{Op: abi.OpResume, Now: t0, Args: &abi.Resume{Plan: 1, Results: abi.Results{r}}})
	if err != nil {
		return "", err
	}
	var req struct {
		Args struct {
			Results []json.RawMessage `json:"results"`
		} `json:"args"`
	}
	if err := json.Unmarshal(b, &req); err != nil || len(req.Args.Results) != 1 {
		return "", fmt.Errorf("reading back %s: %v", b, err)
	}
	return string(req.Args.Results[0]), nil
}

type clock struct{ ms int64 }

func (c *clock) Now() time.Time { return time.UnixMilli(c.ms) }

// measureNative returns the CPU per beat of the native engine over the
// replay: single heartbeats, then batches of 100. It runs at least 20,000
// heartbeats and 20,000 beats in batches, whatever n: the native engine is
// an order of magnitude faster than the runtimes, and n/100 batches of it
// take a few milliseconds, too few for the CPU time the kernel accounts.
func measureNative(ctx context.Context, results map[string]core.Result, n int) (single, batch float64) {
	clk := &clock{ms: t0}
	cfg := settings
	cfg.Clock = clk.Now
	e, err := core.New(replay(results), cfg)
	if err != nil {
		panic(err)
	}
	one, hundred := beats(1)[0], beats(100)
	measure := func(times, per int, op func() error) float64 {
		for range warmUp(times, per) {
			if err := op(); err != nil {
				panic(err)
			}
		}
		runtime.GC()
		c := cpuTime()
		for range times {
			clk.ms += 1000
			if err := op(); err != nil {
				panic(err)
			}
		}
		return float64(cpuTime()-c) / float64(times*per)
	}
	single = measure(max(n, 20000), 1, func() error { _, err := e.Heartbeat(ctx, one); return err })
	batch = measure(max(n/100, 200), 100, func() error { _, err := e.HeartbeatBatch(ctx, hundred); return err })
	return single, batch
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runJS runs run.mjs in a fresh node or deno process.
func runJS(ctx context.Context, rt, wasmDir, module, replies string, n int) (round, error) {
	var cmd *exec.Cmd
	args := []string{"run.mjs", "--wasm", module, "--replies", replies, "--n", strconv.Itoa(n),
		"--warm", strconv.Itoa(warmUp(n, 1)), "--warm-batches", strconv.Itoa(warmUp(max(1, n/100), 100))}
	if rt == "node" {
		cmd = exec.CommandContext(ctx, "node", args...)
	} else {
		cmd = exec.CommandContext(ctx, filepath.Join(wasmDir, "node_modules", ".bin", "deno"),
			append([]string{"run", "--allow-all"}, args...)...)
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "DENO_NO_UPDATE_CHECK=1")
	}
	cmd.Dir = filepath.Join(wasmDir, "bench")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return round{}, fmt.Errorf("%v\n%s", err, stderr.String())
	}
	var r round
	if err := json.Unmarshal(out, &r); err != nil {
		return round{}, fmt.Errorf("run.mjs printed %q: %v", out, err)
	}
	return r, nil
}

// runWorkerd serves worker.mjs in a fresh workerd and measures each
// request's CPU from /proc: workerd's clocks stand still inside a request.
func runWorkerd(ctx context.Context, wasmDir, tmp string, n int) (round, error) {
	dir := filepath.Join(tmp, "workerd")
	for _, f := range []string{"bench/worker.mjs", "bench/shared.mjs", "bench/config.capnp", "js/plans.mjs", "js/enums.mjs", "js/reactor.mjs", "js/resp.mjs", "js/wasi.mjs"} {
		if err := copyFile(filepath.Join(wasmDir, f), filepath.Join(dir, f)); err != nil {
			return round{}, err
		}
	}
	for _, f := range []string{"presence.wasm", "replies.json"} {
		if err := copyFile(filepath.Join(tmp, f), filepath.Join(dir, "bench", f)); err != nil {
			return round{}, err
		}
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return round{}, err
	}
	defer ctlR.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(wasmDir, "node_modules", ".bin", "workerd"),
		"serve", "config.capnp", "--socket-addr", "http=127.0.0.1:0", "--control-fd", "3")
	cmd.Dir = filepath.Join(dir, "bench")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.ExtraFiles = []*os.File{ctlW}
	if err := cmd.Start(); err != nil {
		ctlW.Close()
		return round{}, err
	}
	ctlW.Close()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	port, err := listenPort(ctlR)
	if err != nil {
		return round{}, fmt.Errorf("%v\n%s", err, logs.String())
	}
	pid := cmd.Process.Pid
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cpuOf := func(path string) (float64, error) {
		c0 := procCPU(pid)
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err
		}
		body := new(bytes.Buffer)
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s: %s\n%s", path, resp.Status, body, logs.String())
		}
		return float64(procCPU(pid) - c0), nil
	}
	var r round
	var noop, initNS, configure, beat, reconfigure float64
	steps := []struct {
		path string
		to   *float64
	}{{"/noop", &noop}, {"/noop", &noop}, {"/init", &initNS}, {"/configure", &configure}, {"/beat", &beat}, {"/configure", &reconfigure}}
	for _, s := range steps {
		if *s.to, err = cpuOf(s.path); err != nil {
			return r, err
		}
	}
	// One request's own cost stays in: three requests did what one would.
	r.FirstRequestMS = (initNS + configure + beat - 2*noop) / 1e6
	r.InitMS = (initNS - noop) / 1e6
	r.ConfigureMS = (configure - noop) / 1e6
	r.FirstBeatMS = (beat - noop) / 1e6
	r.ReconfigureMS = (reconfigure - noop) / 1e6
	for _, m := range []struct {
		op    string
		n, by int
		to    *float64
	}{{"heartbeat", n, 1, &r.SingleNS}, {"heartbeat_batch", max(1, n/100), 100, &r.BatchNS}} {
		if _, err := cpuOf(fmt.Sprintf("/bench?op=%s&n=%d", m.op, warmUp(m.n, m.by))); err != nil {
			return r, err
		}
		zero, err := cpuOf(fmt.Sprintf("/bench?op=%s&n=0", m.op))
		if err != nil {
			return r, err
		}
		all, err := cpuOf(fmt.Sprintf("/bench?op=%s&n=%d", m.op, m.n))
		if err != nil {
			return r, err
		}
		*m.to = (all - zero) / float64(m.n*m.by)
	}
	return r, nil
}

// listenPort reads workerd's control descriptor until its http socket
// listens.
func listenPort(ctl *os.File) (int, error) {
	port := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(ctl)
		for sc.Scan() {
			var ev struct {
				Event, Socket string
				Port          int
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "listen" && ev.Socket == "http" {
				port <- ev.Port
				return
			}
		}
		close(port)
	}()
	select {
	case p, ok := <-port:
		if !ok {
			return 0, errors.New("workerd exited before listening")
		}
		return p, nil
	case <-time.After(2 * time.Minute):
		return 0, errors.New("workerd did not listen within 2 minutes")
	}
}

// procCPU is the CPU time of every thread of process pid so far, in ns,
// from /proc/PID/task/*/schedstat.
func procCPU(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			ns += v
		}
	}
	return ns
}

// startRedis starts a redis-server on a free loopback port, without
// persistence, and returns its address and how to stop it.
func startRedis(ctx context.Context) (string, func(), error) {
	bin := "redis-server"
	if dir := os.Getenv("PRESENCE_REDIS_BIN"); dir != "" {
		bin = filepath.Join(dir, "redis-server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c.Ping(ctx).Err() == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("redis-server did not answer within 10 s")
		}
	}
}

// wasmDir is the wasm/ directory of the checkout the command runs in.
func wasmDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "wasm", "bench", "run.mjs")); err == nil {
			return filepath.Join(dir, "wasm"), nil
		}
		if _, err := os.Stat(filepath.Join(dir, "bench", "run.mjs")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it inside the presence checkout (wasm/bench/run.mjs not found)")
		}
		dir = parent
	}
}

func gitCommit(dir string) string {
	out, err := exec.Command("git", "-C", dir, "describe", "--always", "--dirty", "--abbrev=7").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }
