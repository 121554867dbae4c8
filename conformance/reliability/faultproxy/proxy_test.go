package faultproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/faultproxy"
)

// waitFor bounds every blocking step of these tests.
const waitFor = 5 * time.Second

// echo starts a line echo server and returns its address; it counts the
// lines it has answered.
func echo(tb testing.TB) (string, func() int) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	lines := 0
	var wg sync.WaitGroup
	conns := map[net.Conn]struct{}{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					mu.Lock()
					lines++
					mu.Unlock()
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), func() int {
		mu.Lock()
		defer mu.Unlock()
		return lines
	}
}

func dial(tb testing.TB, addr string) (net.Conn, *bufio.Reader) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip writes line and reads the answer within d.
func roundTrip(c net.Conn, r *bufio.Reader, line string, d time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	s, err := r.ReadString('\n')
	if len(s) > 0 {
		s = s[:len(s)-1]
	}
	return s, err
}

func TestForwards(t *testing.T) {
	addr, _ := echo(t)
	p := faultproxy.Start(t, addr)
	c, r := dial(t, p.Addr())
	for _, s := range []string{"a", "bb", "ccc"} {
		if got, err := roundTrip(c, r, s, waitFor); err != nil || got != s {
			t.Fatalf("echo %q: %q, %v", s, got, err)
		}
	}
	if p.Accepted() != 1 {
		t.Fatalf("accepted %d connections, want 1", p.Accepted())
	}
}

func TestBlackholeHoldsThenDelivers(t *testing.T) {
	addr, lines := echo(t)
	p := faultproxy.Start(t, addr)
	c, r := dial(t, p.Addr())
	if _, err := roundTrip(c, r, "warm", waitFor); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	_, err := roundTrip(c, r, "held", 200*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("through the black hole: %v, want a timeout", err)
	}
	if p.Held() != 1 {
		t.Fatalf("the black hole holds %d chunks, want 1", p.Held())
	}
	if n := lines(); n != 1 {
		t.Fatalf("the server saw %d lines, want 1: the black hole let one through", n)
	}
	p.Blackhole(false)
	c.SetReadDeadline(time.Now().Add(waitFor))
	if s, err := r.ReadString('\n'); err != nil || s != "held\n" {
		t.Fatalf("after the black hole: %q, %v; want the held line", s, err)
	}
}

func TestCutResets(t *testing.T) {
	addr, _ := echo(t)
	p := faultproxy.Start(t, addr)
	c, r := dial(t, p.Addr())
	if _, err := roundTrip(c, r, "warm", waitFor); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	_, err := roundTrip(c, r, "after", waitFor)
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("after Cut: %v, want a reset", err)
	}
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(c2, r2, "again", waitFor); err != nil || got != "again" {
		t.Fatalf("a new connection after Cut: %q, %v", got, err)
	}
}

func TestLoseNextReply(t *testing.T) {
	addr, lines := echo(t)
	p := faultproxy.Start(t, addr)
	c, r := dial(t, p.Addr())
	p.LoseNextReply()
	if _, err := roundTrip(c, r, "lost", waitFor); err == nil {
		t.Fatal("the reply was not lost")
	}
	if lines() != 1 || p.Lost() != 1 {
		t.Fatalf("server saw %d lines, proxy lost %d replies; want 1, 1", lines(), p.Lost())
	}
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(c2, r2, "kept", waitFor); err != nil || got != "kept" {
		t.Fatalf("the next reply: %q, %v", got, err)
	}
}

func TestDelay(t *testing.T) {
	addr, _ := echo(t)
	p := faultproxy.Start(t, addr)
	c, r := dial(t, p.Addr())
	p.SetDelay(100 * time.Millisecond)
	start := time.Now()
	if _, err := roundTrip(c, r, "slow", waitFor); err != nil {
		t.Fatal(err)
	}
	// Two directions, each delayed: the round trip cannot be faster.
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("round trip took %v with 100ms each way", d)
	}
	p.SetDelay(0)
	if _, err := roundTrip(c, r, "fast", waitFor); err != nil {
		t.Fatal(err)
	}
}

func TestLoseReplyTo(t *testing.T) {
	addr, lines := echo(t)
	p := faultproxy.Start(t, addr)
	c, r := dial(t, p.Addr())
	p.LoseReplyTo([]byte("target"))
	if got, err := roundTrip(c, r, "other", waitFor); err != nil || got != "other" {
		t.Fatalf("a request that does not match: %q, %v", got, err)
	}
	if _, err := roundTrip(c, r, "the target", waitFor); err == nil {
		t.Fatal("the reply to the matching request was not lost")
	}
	if lines() != 2 || p.Lost() != 1 {
		t.Fatalf("server saw %d lines, proxy lost %d replies; want 2, 1", lines(), p.Lost())
	}
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(c2, r2, "target again", waitFor); err != nil || got != "target again" {
		t.Fatalf("the fault is one-shot: %q, %v", got, err)
	}
}
