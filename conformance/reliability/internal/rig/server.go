package rig

import (
	"fmt"
	"sort"
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

// snapshotScript returns every key matching ARGV[1] with its type and
// content (hash fields sorted), in one call.
const snapshotScript = `
local out, cursor = {}, '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    local t = redis.call('TYPE', k)['ok']
    local v
    if t == 'string' then
      v = redis.call('GET', k)
    elseif t == 'hash' then
      local flat, pairs = redis.call('HGETALL', k), {}
      for i = 1, #flat, 2 do pairs[#pairs + 1] = flat[i] .. '=' .. flat[i + 1] end
      table.sort(pairs)
      v = table.concat(pairs, ' ')
    elseif t == 'zset' then
      v = table.concat(redis.call('ZRANGE', k, 0, -1, 'WITHSCORES'), ' ')
    else
      v = redis.call('DUMP', k)
    end
    out[#out + 1] = k
    out[#out + 1] = t .. ' ' .. v
  end
until cursor == '0'
return out`

// Snapshot returns the type and content of every key that starts with
// prefix (lifetimes left out), read by one script so that it is quick and
// consistent.
func Snapshot(tb testing.TB, srv *redistest.Instance, prefix string) map[string]string {
	tb.Helper()
	flat, ok := Do(tb, srv, "EVAL", snapshotScript, "0", prefix+"*").([]any)
	if !ok {
		tb.Fatalf("rig: snapshot: unexpected reply")
	}
	out := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		out[fmt.Sprint(flat[i])] = fmt.Sprint(flat[i+1])
	}
	return out
}

// Diff describes how snapshot b differs from a, one key a line; "" when
// they are equal.
func Diff(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "deleted "+k)
		} else if v != w {
			out = append(out, fmt.Sprintf("changed %s: %s → %s", k, v, w))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "added "+k+": "+b[k])
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// dumpScript returns key, lifetime ms (0: none) and DUMP of every key
// matching ARGV[1].
const dumpScript = `
local out, cursor = {}, '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    local ttl = redis.call('PTTL', k)
    if ttl < 0 then ttl = 0 end
    out[#out + 1] = k
    out[#out + 1] = tostring(ttl)
    out[#out + 1] = redis.call('DUMP', k)
  end
until cursor == '0'
return out`

// restoreScript deletes every key matching ARGV[1], then restores the
// key, lifetime, dump triples that follow.
const restoreScript = `
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ARGV[1], 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do redis.call('DEL', k) end
until cursor == '0'
for i = 2, #ARGV, 3 do redis.call('RESTORE', ARGV[i], ARGV[i + 1], ARGV[i + 2], 'REPLACE') end
return #ARGV`

// CopyKeys makes the keys that start with prefix on dst exactly those of
// src, lifetimes kept.
func CopyKeys(tb testing.TB, src, dst *redistest.Instance, prefix string) {
	tb.Helper()
	flat, ok := Do(tb, src, "EVAL", dumpScript, "0", prefix+"*").([]any)
	if !ok {
		tb.Fatalf("rig: copy: unexpected reply")
	}
	args := []string{"EVAL", restoreScript, "0", prefix + "*"}
	for _, v := range flat {
		args = append(args, fmt.Sprint(v))
	}
	Do(tb, dst, args...)
}
