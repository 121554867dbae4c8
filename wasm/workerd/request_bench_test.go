package workerd_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/lanes"
)

// BenchmarkWorkerRequest measures warm POST /heartbeat requests, one
// steady beat each, end to end against a real redis-server that asks
// for an ACL user's password: a connection per request (TCP connect,
// TLS handshake where on, and AUTH, each time) against the one
// connection the RedisHub Durable Object keeps. cpu-ms/req is the CPU
// time of the whole workerd process (HTTP, the Worker, the module, RESP,
// TLS) over b.N requests; ms/req the wall time the client saw.
func BenchmarkWorkerRequest(b *testing.B) {
	lanes.NPMBin(b, "workerd")
	r := startSecureRedis(b)
	module := lanes.Module(b, wasm.WASI)
	for _, c := range []struct {
		mode string
		tls  bool
	}{{"request", false}, {"request", true}, {"durable-object", false}, {"durable-object", true}} {
		b.Run(fmt.Sprintf("conn=%s/tls=%v", c.mode, c.tls), func(b *testing.B) {
			env := secureEnv(r, c.mode)
			if !c.tls {
				env["PRESENCE_REDIS_PORT"], env["PRESENCE_REDIS_TLS"] = strconv.Itoa(r.Port), "off"
			}
			s := start(b, module, env, r.CA)
			pid := s.cmd.Process.Pid
			beat := []byte(`{"user":"alice","device":"web-1","kind":"web","active":true}`)
			// Warm up: the isolate's instance, its first session, V8's tiers.
			for range 200 {
				s.do(b, http.MethodPost, "/heartbeat", beat)
			}
			c0, ok := cpuTime(pid)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				out := s.do(b, http.MethodPost, "/heartbeat", beat)
				if !strings.HasPrefix(string(out), `{"v":2,"result":{"token":`) {
					b.Fatalf("POST /heartbeat: %s", out)
				}
			}
			wall := time.Since(start)
			b.StopTimer()
			c1, _ := cpuTime(pid)
			b.ReportMetric(float64(wall.Microseconds())/1e3/float64(b.N), "ms/req")
			if ok {
				b.ReportMetric(float64((c1-c0).Microseconds())/1e3/float64(b.N), "cpu-ms/req")
			}
			if kb, ok := peakRSS(pid); ok {
				b.ReportMetric(float64(kb)/1024, "peak-rss-MiB")
			}
		})
	}
}

// peakRSS returns the most resident memory process pid has used, in KiB,
// from /proc (Linux), or false.
func peakRSS(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n, err == nil
		}
	}
	return 0, false
}
