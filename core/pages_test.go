package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
)

// TestUserPagesKeepTheirInvariants drives 100 users of one bucket through a
// seeded mix of logins, beats (steady or not), backgrounding, disconnects,
// logouts, manual statuses and sweeps, some with metadata too long for a
// page, and checks after every step what lua/recordlib.lua promises of
// the key layout: each user's records are in the page its hash names, or
// in the big hash, never both; a page stays a listpack (at most 60 users,
// values of at most 64 bytes); every page and big-hash user with records
// is in the due index; every page and the big hash expire.
func TestUserPagesKeepTheirInvariants(t *testing.T) {
	mr := miniredis.RunT(t)
	mini := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { mini.Close() })
	t.Run("miniredis", func(t *testing.T) { checkPages(t, mini, mr.SetTime, false) })
	t.Run("redis-server", func(t *testing.T) {
		_, c := realClient(t)
		checkPages(t, c, func(time.Time) {}, true)
	})
}

func checkPages(t *testing.T, c *redis.Client, move func(time.Time), encodings bool) {
	ctx := context.Background()
	clk := &manualClock{t: t0}
	move(clk.t)
	e, err := core.New(goredis.New(c), core.Config{Clock: clk.Now, UserBuckets: 1})
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	beats := make([]core.Heartbeat, 0, 100)
	for i := range 100 {
		users = append(users, "user-"+strconv.Itoa(i))
		beats = append(beats, core.Heartbeat{User: users[i], Device: "web", Kind: core.KindWeb, Active: true})
	}
	if _, err := e.HeartbeatBatch(ctx, beats); err != nil {
		t.Fatal(err)
	}
	if msg := pagesMismatch(ctx, t, c, core.Keys(e), encodings); msg != "" {
		t.Fatalf("after 100 logins: %s", msg)
	}
	if level := c.HGet(ctx, core.Keys(e).Meta(0), "L").Val(); level < "2" {
		t.Fatalf("100 users in one bucket: page level %s, want the pages split to level 2 or more", level)
	}
	devices := []struct {
		id   string
		kind core.Kind
	}{{"web", core.KindWeb}, {"phone", core.KindIOS}}
	tokens := map[string]string{}
	rng := rand.New(rand.NewPCG(7, 11))
	for step := range 300 {
		clk.t = clk.t.Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
		move(clk.t)
		u := users[rng.IntN(len(users))]
		d := devices[rng.IntN(len(devices))]
		hb := core.Heartbeat{User: u, Device: d.id, Kind: d.kind, Token: tokens[u+d.id], Active: rng.IntN(2) == 0}
		if rng.IntN(8) == 0 {
			hb.Meta = bigMeta
		}
		var what string
		switch op := rng.IntN(20); {
		case op < 11:
			what = "beat"
			if ack, err := e.Heartbeat(ctx, hb); err == nil {
				tokens[u+d.id] = ack.Token
			}
		case op < 13:
			what = "background beat"
			hb.Background = true
			if ack, err := e.Heartbeat(ctx, hb); err == nil {
				tokens[u+d.id] = ack.Token
			}
		case op < 15:
			what = "login"
			if res, err := e.Login(ctx, core.Login{User: u, Device: d.id, Kind: d.kind}); err == nil {
				tokens[u+d.id] = res.Token
			}
		case op < 16:
			what = "disconnect"
			e.Disconnect(ctx, u, d.id, tokens[u+d.id])
		case op < 17:
			what = "logout"
			e.Logout(ctx, u, d.id, tokens[u+d.id])
		case op < 18:
			what = "manual"
			e.SetManual(ctx, u, core.Manual(rng.IntN(3)), time.Duration(rng.IntN(3))*time.Minute)
		default:
			what = "sweep"
			if _, err := e.SweepUsers(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if msg := pagesMismatch(ctx, t, c, core.Keys(e), encodings); msg != "" {
			t.Fatalf("step %d (%s of %s/%s at t0+%v): %s", step, what, u, d.id, clk.t.Sub(t0), msg)
		}
	}
}

// pageOf is the page of user at level, split pointer split, as the engine's
// page hints compute it; pagesMismatch checks it against where the scripts
// put each user.
var pageOf = core.PageOf

// pagesMismatch checks bucket 0's user keys, and returns what is wrong
// ("" when nothing is).
func pagesMismatch(ctx context.Context, t *testing.T, c *redis.Client, k keyspace.Layout, encodings bool) string {
	t.Helper()
	meta, err := c.HGetAll(ctx, k.Meta(0)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if meta["v"] != "2" {
		return fmt.Sprintf("meta %v: want layout 2", meta)
	}
	level, _ := strconv.Atoi(meta["L"])
	split, _ := strconv.Atoi(meta["s"])
	due := map[string]bool{}
	members, err := c.ZRange(ctx, k.Due(0), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		due[m] = true
	}
	seen := map[string]string{}
	for n := range 2 << level {
		key := k.Page(0, n)
		fields, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(fields) == 0 {
			continue
		}
		if len(fields) > 2*pageUsers {
			return fmt.Sprintf("%s holds %d fields", key, len(fields))
		}
		if !due["\x01"+strconv.Itoa(n)] {
			return fmt.Sprintf("%s is not in the due index", key)
		}
		if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 {
			return fmt.Sprintf("%s does not expire (PTTL %v)", key, ttl)
		}
		if encodings {
			if enc := c.ObjectEncoding(ctx, key).Val(); enc != "listpack" {
				return fmt.Sprintf("%s is a %s", key, enc)
			}
		}
		for f, v := range fields {
			if len(v) > 64 {
				return fmt.Sprintf("%s: %q holds %d bytes", key, f, len(v))
			}
			user, dyn := strings.CutPrefix(f, "\x01")
			if _, ok := fields[user]; dyn && !ok {
				return fmt.Sprintf("%s: %q without its static record", key, f)
			}
			if _, ok := fields["\x01"+user]; !dyn && !ok {
				return fmt.Sprintf("%s: %q without its dynamic record", key, f)
			}
			if p := pageOf(user, level, split); p != n {
				return fmt.Sprintf("%s holds %q, whose page is %d", key, user, p)
			}
			seen[user] = key
		}
	}
	big, err := c.HGetAll(ctx, k.Big(0)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(big) > 0 {
		if ttl := c.PTTL(ctx, k.Big(0)).Val(); ttl <= 0 {
			return fmt.Sprintf("the big hash does not expire (PTTL %v)", ttl)
		}
	}
	for f := range big {
		user, _ := strings.CutPrefix(f, "\x01")
		if where, ok := seen[user]; ok {
			return fmt.Sprintf("%q is both in %s and in the big hash", user, where)
		}
		if !due[user] {
			return fmt.Sprintf("%q of the big hash is not in the due index", user)
		}
	}
	return ""
}
