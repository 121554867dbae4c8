package workerd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/lanes"
)

// server is a workerd process serving the presence Worker.
type server struct {
	cmd  *exec.Cmd
	url  string
	logs *bytes.Buffer
}

// start serves config.capnp with the module at wasmPath, the bindings in
// env (PRESENCE_REDIS_HOST and so on, from workerd's environment) and,
// where ca is not empty, that CA trusted for TLS, on a free loopback
// port, and waits until workerd listens. The process is stopped when the
// test ends.
func start(t testing.TB, wasmPath string, env map[string]string, ca string) *server {
	t.Helper()
	bin := lanes.NPMBin(t, "workerd")
	// The Worker's files, laid out as in wasm/, next to the module.
	dir := t.TempDir()
	src := lanes.Dir()
	for _, f := range []string{"js/plans.mjs", "js/enums.mjs", "js/resp.mjs", "js/wasi.mjs", "workerd/worker.mjs", "js/reactor.mjs", "workerd/config.capnp"} {
		copyFile(t, filepath.Join(src, f), filepath.Join(dir, f))
	}
	copyFile(t, wasmPath, filepath.Join(dir, "workerd", "presence.wasm"))
	cfgPath := filepath.Join(dir, "workerd", "config.capnp")
	if ca != "" {
		cfg, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		const tlsOptions = "tlsOptions = (trustBrowserCas = true)"
		if bytes.Count(cfg, []byte(tlsOptions)) != 1 {
			t.Fatalf("config.capnp: want one %s", tlsOptions)
		}
		pemText := strings.ReplaceAll(strings.TrimSpace(ca), "\n", `\n`)
		cfg = bytes.Replace(cfg, []byte(tlsOptions), []byte(`tlsOptions = (trustBrowserCas = true, trustedCertificates = ["`+pemText+`"])`), 1)
		if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// workerd writes {"event":"listen","socket":"http","port":N} to the
	// control descriptor once it listens.
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ctlR.Close()
	s := &server{logs: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "serve", "config.capnp", "--socket-addr", "http=127.0.0.1:0", "--control-fd", "3")
	s.cmd.Dir = filepath.Dir(cfgPath)
	s.cmd.Env = os.Environ()
	for k, v := range env {
		s.cmd.Env = append(s.cmd.Env, k+"="+v)
	}
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	s.cmd.ExtraFiles = []*os.File{ctlW}
	if err := s.cmd.Start(); err != nil {
		ctlW.Close()
		t.Fatal(err)
	}
	ctlW.Close()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	t.Cleanup(func() { s.stop(t, exited) })

	port := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(ctlR)
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
	}()
	select {
	case p := <-port:
		s.url = "http://127.0.0.1:" + strconv.Itoa(p)
	case err := <-exited:
		exited <- err
		t.Fatalf("workerd exited before listening: %v\n%s", err, s.logs)
	case <-time.After(time.Minute):
		t.Fatalf("workerd did not listen within a minute:\n%s", s.logs)
	}
	return s
}

// stop ends workerd (SIGTERM, then SIGKILL after 10 s).
func (s *server) stop(t testing.TB, exited chan error) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-exited
	}
	if t.Failed() {
		t.Logf("workerd's output:\n%s", s.logs)
	}
}

// do sends a request to the Worker and returns its body, failing the
// test unless the status is 200.
func (s *server) do(t testing.TB, method, path string, body []byte) []byte {
	t.Helper()
	status, out := s.request(t, method, path, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s: %d\n%s\n%s", method, path, status, out, s.logs)
	}
	return out
}

// request sends a request to the Worker and returns its status and body.
func (s *server) request(t testing.TB, method, path string, body []byte) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, path, err, s.logs)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// plainRedis is the environment of a Worker that reaches the Redis at
// addr ("127.0.0.1:PORT") over TCP, without AUTH.
func plainRedis(t testing.TB, addr string) map[string]string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"PRESENCE_REDIS_HOST": host, "PRESENCE_REDIS_PORT": port, "PRESENCE_PREFIX": "presence-workerd"}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerdLane runs the lanes' sequence through the Worker in workerd,
// against a real redis-server over cloudflare:sockets, the hot path in the
// compact form and with every message as JSON, and compares every
// response with native Go's; then it runs the example of GET / and the
// benchmark's endpoint.
func TestWorkerdLane(t *testing.T) {
	lanes.NPMBin(t, "workerd")
	seq, want := lanes.Want(t)
	module := lanes.Module(t, wasm.WASI)
	body, err := os.ReadFile(lanes.Path())
	if err != nil {
		t.Fatal(err)
	}
	// The JSON form on a Redis of its own: the sequence expects an empty one.
	j := start(t, module, plainRedis(t, lanes.Redis(t)), "")
	lanes.Compare(t, "workerd (json)", seq, string(j.do(t, http.MethodPost, "/sequence?form=json", body)), want)
	s := start(t, module, plainRedis(t, lanes.Redis(t)), "")
	lanes.Compare(t, "workerd", seq, string(s.do(t, http.MethodPost, "/sequence", body)), want)

	out := string(s.do(t, http.MethodGet, "/", nil))
	t.Logf("GET /:\n%s", out)
	for _, w := range []string{`configure {"abi":2,"clock":"host"}`, "status ONLINE web-1:ONLINE", `count {"n":3,`, "module memory "} {
		if !strings.Contains(out, w) {
			t.Errorf("GET / lacks %q", w)
		}
	}

	// The benchmark's endpoint, briefly: once warm, nothing reaches Redis.
	var b struct {
		N             int `json:"n"`
		RedisCommands int `json:"redis_commands"`
	}
	out = string(s.do(t, http.MethodPost, "/bench?op=heartbeat_batch&n=3", nil))
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.N != 3 || b.RedisCommands != 0 {
		t.Errorf("POST /bench: %s (%v)", out, err)
	}
}

// TestRESPCodec runs the tests of wasm/js/resp.mjs, the RESP2 client the
// Worker speaks to Redis with, under node --test and deno test, against
// a redis-server with a password, an ACL user and a TLS port.
func TestRESPCodec(t *testing.T) {
	node := lanes.Node(t)
	redis := startSecureRedis(t)
	for _, run := range []struct {
		name, ranAll string
		argv         []string
	}{
		{"node", "# skipped 0", []string{node, "--test", "resp_test.mjs"}},
		{"deno", "0 failed (", []string{"", "test", "--quiet", "--no-check", "--no-lock", "--allow-net=127.0.0.1", "--allow-read", "--allow-env", "resp_test.mjs"}},
	} {
		t.Run(run.name, func(t *testing.T) {
			if run.argv[0] == "" {
				run.argv[0] = lanes.NPMBin(t, "deno")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, run.argv[0], run.argv[1:]...)
			cmd.Dir = filepath.Join(lanes.Dir(), "js")
			cmd.Env = append(os.Environ(), append(redis.env(), "NO_COLOR=1")...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(run.argv, " "), err, out)
			}
			// Every test ran: none skipped for want of the live server.
			if !bytes.Contains(out, []byte(run.ranAll)) {
				t.Errorf("%s skipped tests (want %q in its output):\n%s", run.name, run.ranAll, out)
			}
		})
	}
}

// cpuTime returns the user and system CPU time of process pid so far, from
// /proc (Linux), or false.
func cpuTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command's closing parenthesis: state is the 3rd
	// field of the line, utime and stime the 14th and 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ
	return time.Duration(u+s) * time.Second / ticks, true
}

// BenchmarkHeartbeatWorkerd measures heartbeats through the module inside
// the Worker, against a replay of Redis's replies (no network once warm),
// as wasm/host's BenchmarkHeartbeatWASM does on its replay store: one
// heartbeat ("single") or one heartbeat_batch of 100 ("batch") per
// iteration, all b.N in one request. Per beat: ns/beat is the Worker's
// own clock around its loop (ms resolution), cpu-ns/beat the CPU time of
// the whole workerd process for the request, less that of a request of
// no iterations. Compare with go test -bench HeartbeatNative ./wasm/host.
func BenchmarkHeartbeatWorkerd(b *testing.B) {
	lanes.NPMBin(b, "workerd")
	s := start(b, lanes.Module(b, wasm.WASI), plainRedis(b, lanes.Redis(b)), "")
	pid := s.cmd.Process.Pid
	for _, c := range []struct {
		name, op string
		beats    int
	}{{"single=1", "heartbeat", 1}, {"batch=100", "heartbeat_batch", 100}} {
		b.Run(c.name, func(b *testing.B) {
			run := func(n int) (ms float64, cpu time.Duration) {
				c0, _ := cpuTime(pid)
				out := s.do(b, http.MethodPost, fmt.Sprintf("/bench?op=%s&n=%d", c.op, n), nil)
				c1, _ := cpuTime(pid)
				var r struct {
					MS            float64 `json:"ms"`
					RedisCommands int     `json:"redis_commands"`
				}
				if err := json.Unmarshal(out, &r); err != nil {
					b.Fatalf("%s: %v", out, err)
				}
				if r.RedisCommands != 0 {
					b.Fatalf("the replay sent %d commands to Redis once warm", r.RedisCommands)
				}
				return r.MS, c1 - c0
			}
			_, base := run(0) // instantiating, configuring, warming up
			b.ResetTimer()
			ms, cpu := run(b.N)
			beats := float64(b.N * c.beats)
			b.ReportMetric(ms*1e6/beats, "ns/beat")
			if _, ok := cpuTime(pid); ok {
				b.ReportMetric(float64((cpu-base).Nanoseconds())/beats, "cpu-ns/beat")
			}
		})
	}
}
