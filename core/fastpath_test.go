package core_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// TestSteadyBeatSkipsTheUserRead checks on a real redis-server which beats
// take the heartbeat script's quick path (the device's own two fields and
// the user's state entry, no HGETALL of the user) and which need the full
// one: the quick path is only for beats that change nothing but liveness
// while nothing is due.
func TestSteadyBeatSkipsTheUserRead(t *testing.T) {
	srv, c := realClient(t)
	clk := &manualClock{t: t0}
	e, err := core.New(goredis.New(c), core.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var token string
	beat := func(mut func(*core.Heartbeat)) func() string {
		return func() string {
			hb := core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Token: token, Active: true}
			if mut != nil {
				mut(&hb)
			}
			ack, err := e.Heartbeat(ctx, hb)
			if err != nil {
				return errName(err)
			}
			token = ack.Token
			return "ok" + changes(ack.Changes)
		}
	}
	// The web interval is 30 s: the beat at t0+5s publishes the change
	// CoalesceWindow held back and indexes the user at its deadline,
	// t0+65s+1ms.
	steps := []struct {
		name string
		at   time.Duration
		do   func() string
		want string
		full bool // the script read the whole user (HGETALL)
	}{
		{"first beat logs in", 0, beat(nil), "ok", true},
		{"the coalesced change is due", 5 * sec, beat(nil), "ok [u:OFFLINE→ONLINE]", true},
		{"steady active beat", 10 * sec, beat(nil), "ok", false},
		{"steady passive beat", 20 * sec, beat(func(hb *core.Heartbeat) { hb.Active = false }), "ok", false},
		{"same gateway and metadata", 25 * sec, beat(func(hb *core.Heartbeat) { hb.Gateway = "" }), "ok", false},
		{"new gateway", 30 * sec, beat(func(hb *core.Heartbeat) { hb.Gateway = "gw-2" }), "ok", true},
		{"gateway kept", 35 * sec, beat(func(hb *core.Heartbeat) { hb.Gateway = "gw-2" }), "ok", false},
		{"superseded token", 40 * sec, beat(func(hb *core.Heartbeat) { hb.Token = "bogus" }), "replaced", true},
		{"index passed", 90 * sec, beat(nil), "ok", true},
		{"re-indexed", 100 * sec, beat(nil), "ok", false},
		{"to the background", 110 * sec, beat(func(hb *core.Heartbeat) { hb.Background = true }), "ok", true},
	}
	for _, s := range steps {
		clk.t = t0.Add(s.at)
		before := hgetalls(t, srv.Addr)
		if got := s.do(); got != s.want {
			t.Errorf("%s at t0+%v: got %s, want %s", s.name, s.at, got, s.want)
		}
		if full := hgetalls(t, srv.Addr) > before; full != s.full {
			t.Errorf("%s at t0+%v: full path %v, want %v", s.name, s.at, full, s.full)
		}
	}
}

var hgetallCalls = regexp.MustCompile(`cmdstat_hgetall:calls=(\d+)`)

// hgetalls is how many HGETALL the server has run.
func hgetalls(t *testing.T, addr string) int {
	t.Helper()
	reply, err := redistest.Do(addr, "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := reply.(string)
	m := hgetallCalls.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBatchKeepsEachUsersOrder checks that a batch applies each user's
// beats in order, although steady beats and the others go by different
// scripts: a user with several beats in a batch has them all applied by
// one. Here u's first beat goes to the background (not steady) and its
// second comes back (steady on its own); applied out of order, u would end
// in the background.
func TestBatchKeepsEachUsersOrder(t *testing.T) {
	runTable(t, core.Config{}, []step{
		{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
		{0, login("v", "web", core.KindWeb, "gw1"), "ok"},
		{5 * sec, batch(beatOf("u", "web", core.KindWeb, withToken, active), beatOf("v", "web", core.KindWeb, withToken, active)),
			"ok [u:OFFLINE→ONLINE] ok [v:OFFLINE→ONLINE]"},
		{10 * sec, batch(
			beatOf("u", "web", core.KindWeb, withToken, background),
			beatOf("v", "web", core.KindWeb, withToken, active),
			beatOf("u", "web", core.KindWeb, withToken, active),
			beatOf("u", "web", core.KindWeb, staleToken("v/web")),
			beatOf("v", "web", core.KindWeb, withToken)),
			"ok ok ok replaced ok"},
		{10 * sec, status("u"), "ONLINE web:ONLINE"},
		{20 * sec, status("u"), "ONLINE web:ONLINE"},
		{20 * sec, status("v"), "ONLINE web:ONLINE"},
	})
}
