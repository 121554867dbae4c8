package core_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestSteadyCopyFollowsTheState drives users through a seeded mix of
// logins, beats (steady or not), backgrounding, disconnects, logouts,
// manual statuses and sweeps, and checks after every step that each
// device hash's copy of the due score (field "\x03", which the steady beat
// reads instead of the state entry) says what the state entry says: the
// user's score while no change is pending, else nothing; and that it is
// kept only on a key that holds a record or a fence (so that it has an
// expiry).
func TestSteadyCopyFollowsTheState(t *testing.T) {
	mr := miniredis.RunT(t)
	mini := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { mini.Close() })
	t.Run("miniredis", func(t *testing.T) { checkSteadyCopy(t, mini, mr.SetTime) })
	t.Run("redis-server", func(t *testing.T) {
		_, c := realClient(t)
		checkSteadyCopy(t, c, func(time.Time) {})
	})
}

func checkSteadyCopy(t *testing.T, c *redis.Client, move func(time.Time)) {
	ctx := context.Background()
	clk := &manualClock{t: t0}
	move(clk.t)
	e, err := core.New(goredis.New(c), core.Config{Clock: clk, UserBuckets: 2})
	if err != nil {
		t.Fatal(err)
	}
	users := []string{"u1", "u2", "u3"}
	devices := []struct {
		id   string
		kind core.Kind
	}{{"web", core.KindWeb}, {"phone", core.KindIOS}}
	tokens := map[string]string{}
	rng := rand.New(rand.NewPCG(7, 11))
	for step := range 400 {
		clk.t = clk.t.Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
		move(clk.t)
		u := users[rng.IntN(len(users))]
		d := devices[rng.IntN(len(devices))]
		hb := core.Heartbeat{User: u, Device: d.id, Kind: d.kind, Token: tokens[u+d.id], Active: rng.IntN(2) == 0}
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
		for _, user := range users {
			if msg := steadyCopyMismatch(ctx, t, c, e.Keys(), user); msg != "" {
				t.Fatalf("step %d (%s of %s/%s at t0+%v): %s", step, what, u, d.id, clk.t.Sub(t0), msg)
			}
		}
	}
}

// steadyCopyMismatch compares user's copy of the due score with the state
// entry, and returns what differs ("" when nothing does).
func steadyCopyMismatch(ctx context.Context, t *testing.T, c *redis.Client, k core.KeyNames, user string) string {
	t.Helper()
	fields, err := c.HGetAll(ctx, k.Devices(user)).Result()
	if err != nil {
		t.Fatal(err)
	}
	copyScore, hasCopy := fields["\x03"]
	if hasCopy && len(fields) == 1 {
		return "the copy is the key's only field"
	}
	entry, err := c.HGet(ctx, k.UserState(k.UserBucket(user)), user).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	want, wantCopy := "", false
	if f := strings.Split(entry, "\x1f"); len(f) == 6 && f[1] == "" && f[5] != "" {
		want, wantCopy = f[5], true
	}
	if len(fields) > 0 && (hasCopy != wantCopy || copyScore != want) {
		return "copy " + copyScore + ", state entry " + strings.ReplaceAll(entry, "\x1f", "|")
	}
	return ""
}
