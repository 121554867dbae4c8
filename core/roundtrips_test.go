package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
)

// tripLog is a Store that counts round trips: each Eval, Publish and
// PublishBatch is one, as each is one pipelined exchange with Redis.
type tripLog struct {
	*goredis.Store
	mu    sync.Mutex
	trips []string
}

func (c *tripLog) add(what string) {
	c.mu.Lock()
	c.trips = append(c.trips, what)
	c.mu.Unlock()
}

func (c *tripLog) Eval(ctx context.Context, calls []core.Call) []core.Result {
	names := make([]string, len(calls))
	for i, call := range calls {
		names[i] = scriptOf(call)
	}
	c.add(strings.Join(names, "+"))
	return c.Store.Eval(ctx, calls)
}

func (c *tripLog) Publish(ctx context.Context, channel string, msg []byte) error {
	c.add("PUBLISH")
	return c.Store.Publish(ctx, channel, msg)
}

func (c *tripLog) PublishBatch(ctx context.Context, msgs []core.Message) error {
	c.add(fmt.Sprintf("PUBLISH×%d", len(msgs)))
	return c.Store.PublishBatch(ctx, msgs)
}

func (c *tripLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.trips
	c.trips = nil
	return t
}

// TestRoundTrips holds the round trips each operation takes through a
// warm engine (scripts loaded), as a table of what it sends: a steady
// beat is one; a call that changes a status pays its script, then the
// delivery (its messages published and their outbox entries acknowledged
// in one call), and, with a change log, the log's append in between; a
// heartbeat that changes a status is decided by the steady beat's call
// itself (docs/performance.md, "Round trips"). Run with -v to print the
// table.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	for _, log := range []int{0, 1000} {
		t.Run(fmt.Sprintf("changelog=%d", log), func(t *testing.T) {
			mr := miniredis.RunT(t)
			clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
			mr.SetTime(clk.t)
			mr.ClockTTL(true)
			client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { client.Close() })
			store := &tripLog{Store: goredis.New(client)}
			e, err := core.New(store, core.Config{Clock: clk.Now, CoalesceWindow: -1, ChangeLog: log})
			if err != nil {
				t.Fatal(err)
			}
			// warm: every script loaded, so that no step pays NOSCRIPT
			for _, s := range luascripts.All() {
				if err := client.ScriptLoad(ctx, s.Source()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var token string
			logged := 0
			if log > 0 {
				logged = 1
			}
			steps := []struct {
				name string
				run  func() error
				want int
			}{
				{"heartbeat, implicit login (OFFLINE→ONLINE)", func() error {
					ack, err := e.Heartbeat(ctx, core.Heartbeat{User: "ann", Device: "web", Kind: core.KindWeb, Active: true})
					token = ack.Token
					return err
				}, 2 + logged},
				{"heartbeat, steady", func() error {
					_, err := e.Heartbeat(ctx, core.Heartbeat{User: "ann", Device: "web", Kind: core.KindWeb, Token: token})
					return err
				}, 1},
				{"heartbeat, background (ONLINE→PUSH_ONLINE)", func() error {
					_, err := e.Heartbeat(ctx, core.Heartbeat{User: "ann", Device: "web", Kind: core.KindWeb, Token: token, Background: true})
					return err
				}, 2 + logged},
				{"set manual DND (PUSH_ONLINE→DND)", func() error {
					_, err := e.SetManual(ctx, "ann", core.ManualDND, time.Minute)
					return err
				}, 2 + logged},
				{"login, second device (no change)", func() error {
					_, err := e.Login(ctx, core.Login{User: "ann", Device: "phone", Kind: core.KindIOS})
					return err
				}, 1},
				{"logout of the last device but one (no change)", func() error {
					_, err := e.Logout(ctx, "ann", "phone", "")
					return err
				}, 1},
				{"logout of the last device (DND→OFFLINE)", func() error {
					_, err := e.Logout(ctx, "ann", "web", "")
					return err
				}, 2 + logged},
				{"login (OFFLINE→ONLINE)", func() error {
					_, err := e.Login(ctx, core.Login{User: "bob", Device: "web", Kind: core.KindWeb})
					return err
				}, 2 + logged},
				{"status", func() error { _, err := e.Status(ctx, "bob"); return err }, 1},
			}
			for _, s := range steps {
				clk.t = clk.t.Add(time.Second)
				mr.SetTime(clk.t)
				if err := s.run(); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				trips := store.take()
				t.Logf("%-48s %d: %s", s.name, len(trips), strings.Join(trips, ", "))
				if len(trips) != s.want {
					t.Errorf("%s: %d round trips (%s), want %d", s.name, len(trips), strings.Join(trips, ", "), s.want)
				}
			}
		})
	}
}

// TestBatchLeftBeats holds what a batch's steady call does with the beats
// it cannot apply: it decides the first few (core's leftChunk, 5) on the
// full path itself, and the engine sends the rest to heartbeat_full.lua,
// one round trip later. Either way an implicit login's token is the
// batch's seed and the beat's place in its run, so the two paths issue
// the tokens one script would.
func TestBatchLeftBeats(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	clk := &manualClock{t: time.UnixMilli(1_700_000_000_000)}
	mr.SetTime(clk.t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { client.Close() })
	store := &tripLog{Store: goredis.New(client)}
	e, err := core.New(store, core.Config{Clock: clk.Now, CoalesceWindow: -1, UserBuckets: 1, GroupCommit: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range luascripts.All() { // warm: no step pays NOSCRIPT
		if err := client.ScriptLoad(ctx, s.Source()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first, err := e.Heartbeat(ctx, core.Heartbeat{User: "a", Device: "web", Kind: core.KindWeb, Active: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		users []string // logging in, each the place after the last in the run
		trips []string
	}{
		{"all decided by the steady call", []string{"b", "c", "d"}, []string{"beat", "heartbeat", "outbox_ack"}},
		{"the sixth and seventh left to the full path, with a's", []string{"e", "f", "g", "h", "i", "j", "k"},
			[]string{"beat", "heartbeat", "outbox_ack"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk.t = clk.t.Add(time.Second)
			mr.SetTime(clk.t)
			store.take()
			// a's two beats first in the run, which go to heartbeat_full.lua
			// together, so that the others' places in the run start at 2
			// and differ from their places in the steady call
			a := core.Heartbeat{User: "a", Device: "web", Kind: core.KindWeb, Token: first.Token}
			beats := []core.Heartbeat{a, a}
			for _, u := range c.users {
				beats = append(beats, core.Heartbeat{User: u, Device: "ios", Kind: core.KindIOS, Active: true})
			}
			acks, err := e.HeartbeatBatch(ctx, beats)
			if err != nil {
				t.Fatal(err)
			}
			if trips := store.take(); strings.Join(trips, ", ") != strings.Join(c.trips, ", ") {
				t.Errorf("round trips %v, want %v", trips, c.trips)
			}
			seed, _, _ := strings.Cut(acks[2].Token, ".")
			for j, a := range acks {
				want := fmt.Sprintf("%s.%d", seed, j)
				if j < 2 {
					want = first.Token
				}
				if a.Err != nil || a.Token != want {
					t.Errorf("beat %d (%s): token %q, %v; want %q", j, beats[j].User, a.Token, a.Err, want)
				}
				if j > 1 && (len(a.Changes) != 1 || a.Changes[0].To != core.StatusOnline) {
					t.Errorf("beat %d (%s): changes %v, want one to ONLINE", j, beats[j].User, a.Changes)
				}
			}
			for _, u := range c.users {
				if st, err := e.Status(ctx, u); err != nil || st.Status != core.StatusOnline {
					t.Errorf("%s: %v, %v; want ONLINE", u, st.Status, err)
				}
			}
		})
	}
}
