package core_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestKeyNamesOutbox checks that keyspace's Outbox names the hash a change's script
// writes its event to, and that once the event is delivered the hash
// keeps only its two bookkeeping fields ("#" and "@"), the figure that
// tools subtract from its length.
func TestKeyNamesOutbox(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	e, err := core.New(goredis.New(c), core.Config{Prefix: "kno", Clock: clk.Now, CoalesceWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := e.Heartbeat(context.Background(), core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Active: true})
	if err != nil || len(ack.Changes) != 1 {
		t.Fatalf("heartbeat: %+v, %v; want one change", ack, err)
	}
	k := core.Keys(e)
	key := k.Outbox(k.UserBucket("alice"))
	fields, err := mr.HKeys(key)
	if err != nil || len(fields) != 2 || fields[0] != "#" || fields[1] != "@" {
		t.Fatalf("Outbox = %q: fields %v, %v; want the bookkeeping fields # and @ alone, the change delivered; keys: %v",
			key, fields, err, mr.Keys())
	}
	for b := range k.UserBuckets {
		if b != k.UserBucket("alice") && mr.Exists(k.Outbox(b)) {
			t.Errorf("Outbox(%d) = %q written, but alice is in bucket %d", b, k.Outbox(b), k.UserBucket("alice"))
		}
	}
}
