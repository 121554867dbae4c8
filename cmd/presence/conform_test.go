package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/internal/redistest"
)

// TestConformEmbedded runs "presence conform" on the embedded miniredis:
// a table row per adapter, all passing.
func TestConformEmbedded(t *testing.T) {
	var out, errw bytes.Buffer
	code := run(context.Background(), []string{"conform", "--sequences", "20", "--seed", "7"}, &out, &errw)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errw.String())
	}
	for _, a := range []string{"goredis", "redigo", "rueidis"} {
		if !strings.Contains(out.String(), a+" ") || strings.Count(out.String(), "PASS") != 3 {
			t.Fatalf("no passing row for %s:\n%s", a, out.String())
		}
	}
}

// TestConformServer runs it against a real server, race run included, and
// checks that it leaves no key behind.
func TestConformServer(t *testing.T) {
	srv := redistest.Server(t)
	var out, errw bytes.Buffer
	code := run(context.Background(), []string{"conform", "--redis", "redis://" + srv.Addr, "--sequences", "20", "--race", "1s"}, &out, &errw)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errw.String())
	}
	if !strings.Contains(out.String(), "race (all)") || strings.Count(out.String(), "PASS") != 4 {
		t.Fatalf("want four passing rows:\n%s", out.String())
	}
	if n, err := srv.Do("DBSIZE"); err != nil || n != int64(0) {
		t.Fatalf("keys left behind: DBSIZE = %v, %v", n, err)
	}
}

// TestConformUsage: bad flags are usage errors (exit 2).
func TestConformUsage(t *testing.T) {
	for _, args := range [][]string{
		{"conform", "--redis", "http://x"},
		{"conform", "--adapters", "nope"},
		{"conform", "--sequences", "0"},
		{"conform", "extra"},
	} {
		var out, errw bytes.Buffer
		if code := run(context.Background(), args, &out, &errw); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %s", args, code, errw.String())
		}
	}
}

// TestConformServerLost: a server that dies during the suite is reported as
// lost, exit 1, and its failed operations are not called conformance
// failures; the adapters left are not run against it.
func TestConformServerLost(t *testing.T) {
	srv := redistest.Server(t)
	var out, errw syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"conform", "--redis", "redis://" + srv.Addr, "--sequences", "1000000",
			"--race", "0"}, &out, &errw)
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "presence conform on"); {
		if time.Now().After(deadline) {
			t.Fatalf("no header line; stdout %q, stderr %q", out.String(), errw.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // into the first adapter's sequences
	srv.Kill()
	var c int
	select {
	case c = <-code:
	case <-time.After(time.Minute):
		t.Fatal("conform did not stop after the server died")
	}
	want := "presence conform: cannot reach Redis at " + srv.Addr + ": connection refused (lost during the run: the rows above are not conformance results)\n"
	if c != 1 || errw.String() != want {
		t.Fatalf("exit %d, stderr %q; want exit 1 and %q", c, errw.String(), want)
	}
	if strings.Contains(out.String(), "redigo ") || strings.Contains(out.String(), "rueidis ") {
		t.Errorf("the other adapters ran against the dead server:\n%s", out.String())
	}
}
