package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestServerClockByDefault checks docs/design.md §4: with no Clock, scripts
// read the server's TIME, whatever the host's clock says.
func TestServerClockByDefault(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	server := time.Date(2031, 7, 1, 0, 0, 0, 0, time.UTC)
	mr.SetTime(server)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	e, err := core.New(goredis.New(c), core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "d", Active: true}); err != nil {
		t.Fatal(err)
	}
	st, err := e.Status(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if !st.At.Equal(server) || !st.Devices[0].LastSeen.Equal(server) {
		t.Fatalf("status at %v, last seen %v; want the server's %v", st.At, st.Devices[0].LastSeen, server)
	}
	mr.SetTime(server.Add(61 * time.Second))
	if st, _ = e.Status(ctx, "u"); st.Status != core.StatusOffline {
		t.Fatalf("61 s later by the server's clock: %v, want OFFLINE", st.Status)
	}
	// A client timestamp is checked against the server's clock too.
	_, err = e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "d", At: server.Add(-time.Hour)})
	if !errors.Is(err, core.ErrClockSkew) {
		t.Fatalf("an hour-old client timestamp: %v, want ErrClockSkew", err)
	}
}

// failingStore fails every call with err while failing is set.
type failingStore struct {
	core.Store
	mu      sync.Mutex
	failing error
}

func (f *failingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	f.mu.Lock()
	err := f.failing
	f.mu.Unlock()
	if err == nil {
		return f.Store.Eval(ctx, calls)
	}
	out := make([]core.Result, len(calls))
	for i := range out {
		out[i].Err = err
	}
	return out
}

// TestCountServesLastGoodWhenUnavailable checks docs/design.md §9: with Redis
// unreachable a count read returns the last good value marked stale, or the
// error if it has none; other operations return a retryable error.
func TestCountServesLastGoodWhenUnavailable(t *testing.T) {
	ctx := context.Background()
	_, clk, mr := newMiniEngine(t, core.Config{})
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	fs := &failingStore{Store: goredis.New(c)}
	e, err := core.New(fs, core.Config{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	hot, cold := core.Scope{Class: "room", ID: "hot"}, core.Scope{Class: "room", ID: "cold"}
	if err := e.Touch(ctx, hot, "a"); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Count(ctx, hot); err != nil || got.N != 1 || got.Stale {
		t.Fatalf("count = %+v, %v", got, err)
	}
	fs.failing = fmt.Errorf("dial tcp: %w", core.ErrUnavailable)
	got, err := e.Count(ctx, hot)
	if err != nil || got.N != 1 || !got.Stale {
		t.Fatalf("while unavailable: %+v, %v; want 1 marked stale", got, err)
	}
	if _, err := e.Count(ctx, cold); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("a count never read: %v, want a retryable error", err)
	}
	_, err = e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "d"})
	var se *core.StoreError
	if !errors.As(err, &se) || !errors.Is(err, core.ErrUnavailable) || se.Op != "heartbeat" {
		t.Fatalf("heartbeat while unavailable: %v, want a retryable *StoreError", err)
	}
}

// TestEventsArePublished checks delivery through the Publisher capability:
// changes on ChangeChannel, kicks on the gateway's KickChannel.
func TestEventsArePublished(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mr := miniredis.RunT(t)
	clk := &manualClock{t: t0}
	mr.SetTime(clk.t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	e, err := core.New(goredis.New(c), core.Config{Clock: clk.Now, CoalesceWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	sub := c.Subscribe(ctx, e.ChangeChannel(), e.KickChannel("gw-1"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "web", Gateway: "gw-1"}); err != nil {
		t.Fatal(err)
	}
	exclusive := core.PolicyExclusive
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "phone", Kind: core.KindIOS, Policy: &exclusive}); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	change, err := core.UnmarshalChange([]byte(msg.Payload))
	if err != nil || msg.Channel != e.ChangeChannel() || change.User != "u" || change.To != core.StatusOnline {
		t.Fatalf("first message %v: %+v, %v; want u's change to ONLINE", msg, change, err)
	}
	msg, err = sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kick, err := core.UnmarshalKick([]byte(msg.Payload))
	if err != nil || msg.Channel != e.KickChannel("gw-1") || kick.Device != "web" || kick.Gateway != "gw-1" {
		t.Fatalf("second message %v: %+v, %v; want the kick of web on gw-1", msg, kick, err)
	}
}

// countingMetrics records what the engine reports.
type countingMetrics struct {
	core.NopMetrics
	mu                sync.Mutex
	accepted, refused int
	sweeps, published int
	errors            int
}

func (m *countingMetrics) Heartbeats(a, r int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accepted += a
	m.refused += r
}

func (m *countingMetrics) Swept(string, core.SweepReport) { m.mu.Lock(); m.sweeps++; m.mu.Unlock() }

func (m *countingMetrics) Published(_ string, n int) { m.mu.Lock(); m.published += n; m.mu.Unlock() }

func (m *countingMetrics) Error(string, error) { m.mu.Lock(); m.errors++; m.mu.Unlock() }

// TestMetricsHooks checks that heartbeats, refusals, sweeps and published
// events reach the Metrics hooks.
func TestMetricsHooks(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	m := &countingMetrics{}
	e, err := core.New(goredis.New(c), core.Config{Metrics: m, CoalesceWindow: -1, Policy: core.PolicyExclusive})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := e.Login(ctx, core.Login{User: "u", Device: "d"})
	e.HeartbeatBatch(ctx, []core.Heartbeat{{User: "u", Device: "d", Token: res.Token}, {User: "u", Device: "x"}})
	e.SweepUsers(ctx)
	if m.accepted != 1 || m.refused != 1 || m.sweeps != 1 || m.published != 1 {
		t.Fatalf("metrics %+v, want 1 accepted, 1 refused, 1 sweep, 1 published", m)
	}
}

// TestFeed reads a change and a kick through Engine.Subscribe.
func TestFeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	e, err := core.New(goredis.New(c), core.Config{CoalesceWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	feed, err := e.Subscribe(ctx, "gw-1")
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Close()
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "web", Gateway: "gw-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "web", Gateway: "gw-2"}); err != nil {
		t.Fatal(err)
	}
	ev, err := feed.Next(ctx)
	if err != nil || ev.Change == nil || ev.Change.To != core.StatusOnline {
		t.Fatalf("first event %+v, %v; want the change to ONLINE", ev, err)
	}
	ev, err = feed.Next(ctx)
	if err != nil || ev.Kick == nil || ev.Kick.Gateway != "gw-1" {
		t.Fatalf("second event %+v, %v; want the kick on gw-1", ev, err)
	}
}

// TestChangeLog reads published changes back from the bounded log, after a
// given entry, and reports a gap once entries were trimmed.
func TestChangeLog(t *testing.T) {
	ctx := context.Background()
	e, clk, mr := newMiniEngine(t, core.Config{ChangeLog: 3, CoalesceWindow: -1})
	if _, _, err := e.ChangeLogAfter(ctx, "", 10); err != nil {
		t.Fatalf("empty log: %v", err)
	}
	for i := 0; i < 5; i++ {
		clk.advance(mr, time.Second)
		if _, err := e.Login(ctx, core.Login{User: fmt.Sprint("u", i), Device: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	all, gap, err := e.ChangeLogAfter(ctx, "", 10)
	if err != nil || gap || len(all) < 3 || all[len(all)-1].Change.User != "u4" {
		t.Fatalf("log %+v, gap %v, %v; want the last changes up to u4", all, gap, err)
	}
	rest, gap, err := e.ChangeLogAfter(ctx, all[len(all)-2].ID, 10)
	if err != nil || gap || len(rest) != 1 || rest[0].Change.User != "u4" {
		t.Fatalf("after the second last: %+v, gap %v, %v", rest, gap, err)
	}
	if _, gap, _ := e.ChangeLogAfter(ctx, "1-0", 10); !gap {
		t.Fatal("reading after a trimmed entry must report a gap")
	}
	if _, _, err := e.ChangeLogAfter(ctx, "nope", 10); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("a malformed ID: %v, want ErrInvalid", err)
	}
}

// TestPing reads the server's clock through the ping script.
func TestPing(t *testing.T) {
	mr := miniredis.RunT(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	mr.SetTime(at)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	e, err := core.New(goredis.New(c), core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Ping(context.Background())
	if err != nil || !got.Equal(at) {
		t.Fatalf("Ping = %v, %v; want %v", got, err, at)
	}
	mr.Close()
	if _, err := e.Ping(context.Background()); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Ping of a closed server = %v, want a retryable error", err)
	}
}

// TestChangeLogKeepsKicks checks that kicks are logged with the changes, so
// a gateway that reconnects can catch up on both.
func TestChangeLogKeepsKicks(t *testing.T) {
	ctx := context.Background()
	e, _, _ := newMiniEngine(t, core.Config{ChangeLog: 100, CoalesceWindow: -1})
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "web", Gateway: "gw-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "web", Gateway: "gw-2"}); err != nil {
		t.Fatal(err)
	}
	entries, _, err := e.ChangeLogAfter(ctx, "", 10)
	if err != nil || len(entries) != 2 {
		t.Fatalf("log %+v, %v; want a change and a kick", entries, err)
	}
	if entries[0].Kick != nil || entries[0].Change.To != core.StatusOnline {
		t.Fatalf("first entry %+v, want the change to ONLINE", entries[0])
	}
	if k := entries[1].Kick; k == nil || k.Gateway != "gw-1" || k.Device != "web" {
		t.Fatalf("second entry %+v, want the kick of web on gw-1", entries[1])
	}
}
