package core

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/internal/redistest"
)

// TestShardVectors holds the placement of members among a self-sized
// compact scope's shards, which lives in Go (memberHash, linearShard: the
// engine hashes, the model places) and in scopelib.lua (memberHash, shardOf:
// touches, splits and merges place), to testdata/shards.json, on miniredis
// and a real server.
func TestShardVectors(t *testing.T) {
	var f struct {
		Hashes []struct {
			Member string `json:"member"`
			Hash   uint32 `json:"hash"`
		} `json:"hashes"`
		Shards []struct {
			Hash                uint32 `json:"hash"`
			Level, Split, Shard int
		} `json:"shards"`
	}
	b, err := os.ReadFile("testdata/shards.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, h := range f.Hashes {
		if got := memberHash(h.Member); got != h.Hash {
			t.Errorf("memberHash(%q) = %d, want %d", h.Member, got, h.Hash)
		}
	}
	for _, s := range f.Shards {
		if got := linearShard(s.Hash, s.Level, s.Split); got != s.Shard {
			t.Errorf("linearShard(%d, %d, %d) = %d, want %d", s.Hash, s.Level, s.Split, got, s.Shard)
		}
	}
	src := inlineLua(t, joinLua("recordlib", "userlib", "scopelib")) + `
if ARGV[1] == 'hash' then return tostring(memberHash(ARGV[2])) end
local c = { lv = tonumber(ARGV[3]), sp = tonumber(ARGV[4]) }
c.p = 2 ^ c.lv
return tostring(shardOf(c, tonumber(ARGV[2])))
`
	for name, open := range map[string]func(t *testing.T) *redis.Client{
		"miniredis": func(t *testing.T) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
		},
		"redis-server": func(t *testing.T) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: redistest.Server(t).Addr})
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			t.Cleanup(func() { c.Close() })
			ctx := context.Background()
			for _, h := range f.Hashes {
				got, err := c.Eval(ctx, src, nil, "hash", h.Member).Text()
				if err != nil || got != strconv.FormatUint(uint64(h.Hash), 10) {
					t.Errorf("scopelib.lua memberHash(%q) = %s, %v, want %d", h.Member, got, err, h.Hash)
				}
			}
			for _, s := range f.Shards {
				got, err := c.Eval(ctx, src, nil, "shard", s.Hash, s.Level, s.Split).Text()
				if err != nil || got != strconv.Itoa(s.Shard) {
					t.Errorf("scopelib.lua shardOf(%d, %d, %d) = %s, %v, want %d", s.Hash, s.Level, s.Split, got, err, s.Shard)
				}
			}
		})
	}
}
