package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/keyspace"
	"github.com/presencekit/presence/internal/redistest"
)

// RunLoss checks docs/design.md §11 through an engine on s: after wipe
// makes Redis lose its data (FLUSHALL, or a server killed and restarted
// empty), every device comes back with its next heartbeat, whose reply
// tells the caller to set its manual status again where it was lost; the
// manual statuses set again keep what was left of their expiry; no change
// is published for any user, and a Feed (when s subscribes) hands its
// reader one Loss. Changes publish again once the loss has healed. wipe
// gets a key in the hash slot of user u0's bucket; whole says that it
// wipes every bucket, else only some (one cluster node's), which the
// others' users must not notice.
func RunLoss(t *testing.T, s core.Store, whole bool, wipe func(t *testing.T, key string)) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.UnixMilli(1_772_366_400_000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	cfg := core.Config{Prefix: "loss" + unique(t), Clock: clock, ChangeLog: 100}
	e, err := core.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const users = 20 // u0…u4 set DND, u0 and u1 for an hour, the others until cleared
	tokens := make([]string, users)
	for i := range users {
		r, err := e.Login(ctx, core.Login{User: user(i), Device: "web", Kind: core.KindWeb})
		if err != nil {
			t.Fatal(err)
		}
		tokens[i] = r.Token
	}
	dndUntil := now.Add(time.Hour)
	for i := range 5 {
		ttl := time.Duration(0)
		if i < 2 {
			ttl = time.Hour
		}
		if _, err := e.SetManual(ctx, user(i), core.ManualDND, ttl); err != nil {
			t.Fatal(err)
		}
	}
	// A new deployment is no loss: its first changes publish, once the
	// debounce lets them.
	advance(2 * time.Second)
	for i := range users {
		ack, err := e.Heartbeat(ctx, core.Heartbeat{User: user(i), Device: "web", Kind: core.KindWeb, Token: tokens[i]})
		if err != nil || len(ack.Changes) != 1 {
			t.Fatalf("%s's beat on a new deployment: %+v %v; want its change published", user(i), ack, err)
		}
	}
	advance(20 * time.Second)
	wiped := clock()
	keys := keyspace.New(cfg.Prefix, cfg.UserBuckets, cfg.ScopeBuckets)
	wipe(t, keys.Due(keys.UserBucket(user(0))))

	feed, hasFeed := subscribe(t, e)
	lost := 0
	for i := range users {
		ack := retry(t, func() (core.Ack, error) {
			return e.Heartbeat(ctx, core.Heartbeat{User: user(i), Device: "web", Kind: core.KindWeb, Token: tokens[i]})
		})
		if len(ack.Changes) > 0 || ack.Token != tokens[i] || (i == 0 && !ack.Reassert) {
			t.Fatalf("%s's first beat after the loss: %+v; want no change, the same token (and Reassert for u0)", user(i), ack)
		}
		if ack.Reassert {
			lost++
		}
		if i < 5 && ack.Reassert {
			ttl := time.Duration(0)
			if i < 2 {
				ttl = dndUntil.Sub(clock())
			}
			changes := retry(t, func() ([]core.Change, error) { return e.SetManual(ctx, user(i), core.ManualDND, ttl) })
			if len(changes) > 0 {
				t.Fatalf("%s's DND set again: %v; want no change published", user(i), changes)
			}
		}
	}
	if whole && lost != users || !whole && lost == users {
		t.Fatalf("%d of %d users lost; want all: %v", lost, users, whole)
	}
	advance(5 * time.Second)
	for i := range users {
		ack, err := e.Heartbeat(ctx, core.Heartbeat{User: user(i), Device: "web", Kind: core.KindWeb, Token: tokens[i]})
		if err != nil || ack.Reassert || len(ack.Changes) > 0 {
			t.Fatalf("%s's second beat: %+v %v; want a plain steady beat", user(i), ack, err)
		}
		st, err := e.Status(ctx, user(i))
		if err != nil {
			t.Fatal(err)
		}
		want, wantUntil := core.StatusOnline, time.Time{}
		if i < 5 {
			want = core.StatusDND
		}
		if i < 2 {
			wantUntil = dndUntil
		}
		if st.Status != want || !st.ManualUntil.Equal(wantUntil) {
			t.Fatalf("%s after the loss: %v until %v; want %v until %v", user(i), st.Status, st.ManualUntil, want, wantUntil)
		}
	}
	online, err := e.Online(ctx)
	if err != nil || online[core.StatusDND] != 5 || online[core.StatusOnline] != users-5 {
		t.Fatalf("counts after the loss: %v %v; want 5 DND, %d ONLINE", online, err, users-5)
	}
	// Healed: a change publishes again, and it is the first the feed hands
	// on after the one loss.
	for range 6 {
		advance(30 * time.Second)
		if _, err := e.Heartbeat(ctx, core.Heartbeat{User: user(9), Device: "web", Kind: core.KindWeb, Token: tokens[9]}); err != nil {
			t.Fatal(err)
		}
	}
	end, err := e.Logout(ctx, user(9), "web", tokens[9])
	if err != nil || len(end.Changes) != 1 || end.Changes[0].To != core.StatusOffline {
		t.Fatalf("a logout once healed: %+v %v; want ONLINE→OFFLINE published", end, err)
	}
	if !hasFeed {
		return
	}
	// Pub/sub keeps the order of one node's messages, not across a
	// cluster's: the loss and the last change may come either way round,
	// and changes from before the wipe may still be on their way.
	losses, final := 0, false
	for losses == 0 || !final {
		rctx, cancel := context.WithTimeout(ctx, Timeout)
		ev, err := feed.Next(rctx)
		cancel()
		if err != nil {
			t.Fatalf("feed after %d losses: %v", losses, err)
		}
		switch {
		case ev.Loss != nil:
			losses++
			if !ev.Loss.Until.After(ev.Loss.At) || ev.Loss.At.Before(wiped) {
				t.Fatalf("loss %+v: want one found after the wipe at %v, healing after it", ev.Loss, wiped)
			}
		case ev.Change != nil && ev.Change.At.Before(wiped):
		case ev.Change != nil && ev.Change.User == user(9) && ev.Change.To == core.StatusOffline:
			final = true
		default:
			t.Fatalf("the feed handed on %+v during the healing", ev)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	for {
		ev, err := feed.Next(rctx)
		if err != nil {
			break
		}
		if ev.Change == nil || !ev.Change.At.Before(wiped) {
			t.Fatalf("after the loss and the last change, the feed handed on %+v; want nothing more", ev)
		}
	}
	if losses != 1 {
		t.Fatalf("the feed handed on %d losses, want 1", losses)
	}
}

func user(i int) string { return fmt.Sprintf("u%d", i) }

// subscribe opens a feed of e's changes when its store can.
func subscribe(t *testing.T, e *core.Engine) (*core.Feed, bool) {
	var f *core.Feed
	err := errors.New("none")
	for deadline := time.Now().Add(Timeout); err != nil && time.Now().Before(deadline); {
		if f, err = e.Subscribe(context.Background()); errors.Is(err, core.ErrUnsupported) {
			return nil, false
		} else if err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f, true
}

// retry calls op until it returns no error that says Redis is unavailable,
// for at most Timeout: a client reconnecting to a restarted server may hold
// several connections (rueidis pipelines over more than one), and each
// fails its first command once.
func retry[T any](t *testing.T, op func() (T, error)) T {
	deadline := time.Now().Add(Timeout)
	for {
		v, err := op()
		if err == nil {
			return v
		}
		if !errors.Is(err, core.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FlushMasterOf returns a wipe for RunLoss that empties the master of c
// serving the key it is given, as a failover of that node to an empty
// replica would: only the buckets there lose their data.
func FlushMasterOf(c *redistest.ClusterInstance) func(t *testing.T, key string) {
	return func(t *testing.T, key string) {
		master, err := c.MasterFor(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := master.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
	}
}

// RunLossOnServer runs RunLoss on s over srv, a server of its own, after
// FLUSHALL and after a restart without persistence.
func RunLossOnServer(t *testing.T, srv *redistest.Instance, s core.Store) {
	t.Run("FLUSHALL", func(t *testing.T) {
		RunLoss(t, s, true, func(t *testing.T, _ string) {
			if _, err := srv.Do("FLUSHALL"); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("Restart", func(t *testing.T) {
		RunLoss(t, s, true, func(*testing.T, string) { srv.Restart() })
	})
}
