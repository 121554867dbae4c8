package rig

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/presencekit/presence/internal/redistest"
)

// Info returns one numeric field of the server's INFO, such as
// "used_memory".
func Info(tb testing.TB, srv *redistest.Instance, section, field string) int64 {
	tb.Helper()
	reply, err := srv.Do("INFO", section)
	if err != nil {
		tb.Fatalf("rig: INFO %s: %v", section, err)
	}
	for _, line := range strings.Split(fmt.Sprint(reply), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatalf("rig: INFO %s: %s is %q", section, field, v)
			}
			return n
		}
	}
	tb.Fatalf("rig: INFO %s has no %s", section, field)
	return 0
}

// Keys returns every key of the server's database 0 (with SCAN: for
// tests, never for the engine).
func Keys(tb testing.TB, srv *redistest.Instance) []string {
	tb.Helper()
	var keys []string
	cursor := "0"
	for {
		reply, err := srv.Do("SCAN", cursor, "COUNT", "1000")
		if err != nil {
			tb.Fatalf("rig: SCAN: %v", err)
		}
		parts, ok := reply.([]any)
		if !ok || len(parts) != 2 {
			tb.Fatalf("rig: SCAN reply %v", reply)
		}
		cursor = fmt.Sprint(parts[0])
		batch, _ := parts[1].([]any)
		for _, k := range batch {
			keys = append(keys, fmt.Sprint(k))
		}
		if cursor == "0" {
			return keys
		}
	}
}

// PTTL returns the key's remaining lifetime in ms: -1 for none, -2 for a
// missing key.
func PTTL(tb testing.TB, srv *redistest.Instance, key string) int64 {
	tb.Helper()
	reply, err := srv.Do("PTTL", key)
	if err != nil {
		tb.Fatalf("rig: PTTL %q: %v", key, err)
	}
	n, ok := reply.(int64)
	if !ok {
		tb.Fatalf("rig: PTTL %q: %v", key, reply)
	}
	return n
}

// Do sends one command and fails the test on an error.
func Do(tb testing.TB, srv *redistest.Instance, args ...string) any {
	tb.Helper()
	reply, err := srv.Do(args...)
	if err != nil {
		tb.Fatalf("rig: %s: %v", strings.Join(args, " "), err)
	}
	return reply
}
