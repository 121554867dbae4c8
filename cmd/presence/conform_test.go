package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

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
