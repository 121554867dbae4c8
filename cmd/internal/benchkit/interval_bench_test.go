package benchkit_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
)

// BenchmarkBeatAtTheInterval measures what a device beating at its
// interval costs the server, in instructions (callgrind) rather than time,
// so that the figure does not depend on the host: each round, in virtual
// time 30.2 s after the last (a web device's interval, and a little
// jitter), every user's one device beats. It reports the server's
// instructions per beat and the share of beats that took heartbeat_full.lua
// (which reads the whole user with HGETALL). It starts its own redis-server
// under valgrind --tool=callgrind, and skips where valgrind is not
// installed.
func BenchmarkBeatAtTheInterval(b *testing.B) {
	addr, pid := callgrindServer(b)
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute})
	defer c.Close()
	ctx := context.Background()
	clk := benchkit.NewVirtualClock(time.UnixMilli(1_764_590_000_000))
	e, err := core.New(goredis.New(c), core.Config{Clock: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	const users = 16
	tokens := make([]string, users)
	round := func() {
		for u := range tokens {
			ack, err := e.Heartbeat(ctx, core.Heartbeat{User: "user-" + strconv.Itoa(u), Device: "web", Kind: core.KindWeb, Token: tokens[u], Active: true})
			if err != nil {
				b.Fatal(err)
			}
			tokens[u] = ack.Token
		}
	}
	// logged in, and the coalesced change to ONLINE published
	round()
	clk.Advance(5 * time.Second)
	round()
	admin := benchkit.NewAdmin(c)
	count := benchkit.Callgrind(pid)
	full0 := hgetallCalls(b, admin)
	instr0, err := count(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		clk.Advance(30*time.Second + 200*time.Millisecond)
		round()
	}
	b.StopTimer()
	instr1, err := count(ctx)
	if err != nil {
		b.Fatal(err)
	}
	beats := float64(b.N * users)
	b.ReportMetric(float64(instr1-instr0)/beats, "instructions/beat")
	b.ReportMetric(float64(hgetallCalls(b, admin)-full0)/beats, "full/beat")
}

func hgetallCalls(b *testing.B, admin *benchkit.Admin) int64 {
	st, err := admin.CommandStats(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return st["hgetall"].Calls
}

// callgrindServer starts redis-server (default configuration, no
// persistence) under callgrind on a free loopback port, stops it when b
// ends, and returns its address and pid.
func callgrindServer(b *testing.B) (addr string, pid int) {
	b.Helper()
	for _, tool := range []string{"valgrind", "callgrind_control", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed: instructions are counted by valgrind's callgrind", tool)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
		"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return addr, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			b.Fatalf("redis-server under callgrind did not listen on %s within 30 s", addr)
		}
	}
}
