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
// lua/heartbeat_steady.lua applies (the device's own fields, no HGETALL of the user)
// and which need heartbeat_full.lua: heartbeat_steady.lua takes the beats that change
// nothing but liveness while nothing is due, and those past the user's
// index when only the deadlines of the user's one device were due.
func TestSteadyBeatSkipsTheUserRead(t *testing.T) {
	srv, c := realClient(t)
	clk := &manualClock{t: t0}
	e, err := core.New(goredis.New(c), core.Config{Clock: clk.Now})
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
	setManual := func(m core.Manual, ttl time.Duration) func() string {
		return func() string {
			if _, err := e.SetManual(ctx, "u", m, ttl); err != nil {
				return errName(err)
			}
			return "ok"
		}
	}
	loginDevice := func(device string) func() string {
		return func() string {
			if _, err := e.Login(ctx, core.Login{User: "u", Device: device, Kind: core.KindIOS}); err != nil {
				return errName(err)
			}
			return "ok"
		}
	}
	// The web interval is 30 s: the beat at t0+5s publishes the change
	// CoalesceWindow held back and indexes the user's page at its deadline,
	// t0+65s+1ms. A steady beat never writes the index (a score stays at or
	// before every deadline of the page's users, which beats only move
	// later), so beats past that score stay steady.
	steps := []struct {
		name string
		at   time.Duration
		do   func() string
		want string
		full bool // the script read the user's manual status (HGET): the full path
	}{
		{"first beat logs in", 0, beat(nil), "ok", true},
		{"the coalesced change is due", 5 * sec, beat(nil), "ok [u:OFFLINE→ONLINE]", true},
		{"steady active beat", 10 * sec, beat(nil), "ok", false},
		{"steady passive beat", 20 * sec, beat(func(hb *core.Heartbeat) { hb.Active = false }), "ok", false},
		{"same gateway and metadata", 25 * sec, beat(func(hb *core.Heartbeat) { hb.Gateway = "" }), "ok", false},
		{"new gateway", 30 * sec, beat(func(hb *core.Heartbeat) { hb.Gateway = "gw-2" }), "ok", true},
		{"gateway kept", 35 * sec, beat(func(hb *core.Heartbeat) { hb.Gateway = "gw-2" }), "ok", false},
		{"superseded token", 40 * sec, beat(func(hb *core.Heartbeat) { hb.Token = "bogus" }), "replaced", true},
		{"index passed, the user's only device", 90 * sec, beat(nil), "ok", false},
		{"later still", 100 * sec, beat(nil), "ok", false},
		{"a manual status that expires", 105 * sec, setManual(core.ManualDND, time.Hour), "ok", true},
		{"its change is published", 110 * sec, beat(nil), "ok [u:ONLINE→DND]", true},
		{"nothing due", 151 * sec, beat(nil), "ok", false},
		// a manual status whose expiry has not come keeps the steady path
		{"a manual status that has not expired", 171 * sec, beat(nil), "ok", false},
		{"manual status cleared", 172 * sec, setManual(core.ManualNone, 0), "ok", true},
		{"a second device", 173 * sec, loginDevice("phone"), "ok", true},
		{"a beat of one of two devices", 180 * sec, beat(nil), "ok", false},
		{"two live devices, status unchanged", 232 * sec, beat(nil), "ok", false},
		{"to the background", 240 * sec, beat(func(hb *core.Heartbeat) { hb.Background = true }), "ok", true},
	}
	for _, s := range steps {
		clk.t = t0.Add(s.at)
		before := hgets(t, srv.Addr)
		if got := s.do(); got != s.want {
			t.Errorf("%s at t0+%v: got %s, want %s", s.name, s.at, got, s.want)
		}
		if full := hgets(t, srv.Addr) > before; full != s.full {
			t.Errorf("%s at t0+%v: full path %v, want %v", s.name, s.at, full, s.full)
		}
	}
}

var hgetCalls = regexp.MustCompile(`cmdstat_hget:calls=(\d+)`)

// hgets is how many HGET the server has run: the full path reads the
// user's manual status so, which the steady beat never reads.
func hgets(t *testing.T, addr string) int {
	t.Helper()
	reply, err := redistest.Do(addr, "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := reply.(string)
	m := hgetCalls.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSteadyBeatLeavesOtherDevicesDue checks that a steady beat past its
// user's index re-indexes the user only when nothing but its own device's
// deadlines was due. Here the phone's window ends at t0+120s, and the web
// device, in the background, beats past it: the user's change to
// PUSH_ONLINE must still be published by then (the next sweep), as it
// would not be if the web beat re-indexed the user at its own deadline.
func TestSteadyBeatLeavesOtherDevicesDue(t *testing.T) {
	runTable(t, core.Config{}, []step{
		{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
		{0, login("u", "phone", core.KindIOS, "gw1"), "ok"},
		{5 * sec, hb("u", "web", core.KindWeb, withToken, active), "ok [u:OFFLINE→ONLINE]"},
		{10 * sec, hb("u", "web", core.KindWeb, withToken, background), "ok"},
		{60 * sec, hb("u", "web", core.KindWeb, withToken, background), "ok"},
		{130 * sec, hb("u", "web", core.KindWeb, withToken, background), "ok"},
		{140 * sec, sweep, "swept [u:ONLINE→PUSH_ONLINE]"},
	})
}

// TestSteadyBeatKeepsTheIdleInstantDue checks that a re-indexing steady
// beat indexes its user at the device's idle instant when that comes
// before its window's end, and leaves a beat past that instant to
// heartbeat_full.lua. u and v beat without activity at the interval (active at
// t0+5s, idle from t0+305s); v beats once more, idle. The sweep at
// t0+307.5s publishes v's change, which v's beat observed (CoalesceWindow
// holds it 1 s), and observes u's; the next one publishes u's.
func TestSteadyBeatKeepsTheIdleInstantDue(t *testing.T) {
	users := []string{"u", "v"}
	var steps []step
	for _, u := range users {
		steps = append(steps, step{0, login(u, "web", core.KindWeb, "gw1"), "ok"})
	}
	for _, u := range users {
		steps = append(steps, step{5 * sec, hb(u, "web", core.KindWeb, withToken, active), "ok [" + u + ":OFFLINE→ONLINE]"})
	}
	for at := 35 * sec; at <= 275*sec; at += 30 * sec {
		for _, u := range users {
			steps = append(steps, step{at, hb(u, "web", core.KindWeb, withToken), "ok"})
		}
	}
	steps = append(steps,
		step{306 * sec, hb("v", "web", core.KindWeb, withToken), "ok"},
		step{307*sec + 500*time.Millisecond, sweep, "swept [v:ONLINE→AWAY]"},
		step{309 * sec, sweep, "swept [u:ONLINE→AWAY]"},
	)
	runTable(t, core.Config{}, steps)
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
