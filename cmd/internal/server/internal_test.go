package server

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/presencekit/presence/core"
)

// Named instants for the step tables.
var (
	t0 = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	t1 = t0.Add(100 * time.Millisecond)
	t2 = t0.Add(500 * time.Millisecond)
	t3 = t0.Add(time.Second)
	t4 = t0.Add(10 * time.Second)
)

// TestLimiter steps one user's bucket (2 a second, burst 2) through
// explicit instants.
func TestLimiter(t *testing.T) {
	l := newLimiter("test", 2, 2)
	steps := []struct {
		at   time.Time
		user string
		ok   bool
		wait time.Duration
	}{
		{t0, "alice", true, 0},
		{t0, "alice", true, 0},
		{t0, "alice", false, 500 * time.Millisecond},
		{t0, "bob", true, 0}, // buckets are per user
		{t1, "alice", false, 400 * time.Millisecond},
		{t2, "alice", true, 0},
		{t2, "alice", false, 500 * time.Millisecond},
		{t3, "alice", true, 0},
	}
	for i, s := range steps {
		ok, wait := l.allow(s.user, s.at)
		if ok != s.ok || wait != s.wait {
			t.Fatalf("step %d (%s at +%v): allow = %v, %v; want %v, %v", i, s.user, s.at.Sub(t0), ok, wait, s.ok, s.wait)
		}
	}
	l.prune(t3)
	if n := l.size(); n != 1 {
		t.Fatalf("after pruning at +1s: %d buckets; want alice's only (bob's is full)", n)
	}
	l.prune(t4)
	if n := l.size(); n != 0 {
		t.Fatalf("after pruning at +10s: %d buckets; want none", n)
	}
	if ok, _ := newLimiter("test", -1, 1).allow("alice", t0); !ok {
		t.Fatal("a negative rate must not limit")
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}} {
		if got := retryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("retryAfterSeconds(%v) = %d; want %d", tc.d, got, tc.want)
		}
	}
}

func TestJSONField(t *testing.T) {
	for _, tc := range []struct{ prefix, core, want string }{
		{"", "Heartbeat.Device", "device"},
		{"beats[3]", "Heartbeat.Kind", "beats[3].kind"},
		{"", `Heartbeat.Meta["a.b"]`, `meta["a.b"]`},
		{"", "Login.Gateway", "gateway"},
		{"", "touches[0].Member", "member"},
		{"", "touches[0].Scope.Class", "class"},
		{"", "scope.ID", "id"},
		{"", "users[2]", "users[2]"},
		{"", "limit", "limit"},
		{"beats[1]", "", "beats[1]"},
	} {
		if got := jsonField(tc.prefix, tc.core); got != tc.want {
			t.Errorf("jsonField(%q, %q) = %q; want %q", tc.prefix, tc.core, got, tc.want)
		}
	}
}

func TestIDLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		less bool
	}{
		{"1-0", "2-0", true},
		{"2-0", "1-0", false},
		{"5-1", "5-2", true},
		{"5-2", "5-2", false},
		{"9-0", "10-0", true}, // numeric, not lexical
		{"", "1-0", true},
	} {
		if got := idLess(tc.a, tc.b); got != tc.less {
			t.Errorf("idLess(%q, %q) = %v; want %v", tc.a, tc.b, got, tc.less)
		}
	}
}

func TestHasClaim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims jwt.MapClaims
		want   bool
	}{
		{"true", jwt.MapClaims{"presence_read": true}, true},
		{"false", jwt.MapClaims{"presence_read": false}, false},
		{"string true is not true", jwt.MapClaims{"presence_read": "true"}, false},
		{"scope word", jwt.MapClaims{"scope": "a presence_read b"}, true},
		{"scope prefix only", jwt.MapClaims{"scope": "presence_reader"}, false},
		{"scope list", jwt.MapClaims{"scope": []any{"x", "presence_read"}}, true},
		{"absent", jwt.MapClaims{}, false},
	} {
		if got := hasClaim(tc.claims, "presence_read"); got != tc.want {
			t.Errorf("%s: hasClaim = %v; want %v", tc.name, got, tc.want)
		}
	}
}

// TestHubLag checks that a subscriber whose queue is full is marked lagged
// rather than blocking the hub, and that filters apply.
func TestHubLag(t *testing.T) {
	h := newHub(nil, nil, newMetrics(), time.Second, 1, func(core.LoggedChange) {})
	alice, _ := h.subscribe(filter{users: map[string]bool{"alice": true}})
	everyone, _ := h.subscribe(filter{all: true})
	h.broadcast(event{kind: EventChange, user: "bob", id: "1-0"})
	h.broadcast(event{kind: EventChange, user: "alice", id: "2-0"})
	select {
	case <-alice.lagged:
		t.Fatal("alice's stream lagged on one event")
	default:
	}
	if ev := <-alice.ch; ev.user != "alice" {
		t.Fatalf("alice's stream got %+v", ev)
	}
	select {
	case <-everyone.lagged:
	default:
		t.Fatal("a full queue did not mark the stream lagged")
	}
}

// TestUserTracker checks the counts: changes in any order of arrival, and
// older news ignored.
func TestUserTracker(t *testing.T) {
	tr := newUserTracker(2)
	tr.apply(core.Change{User: "alice", From: core.StatusOffline, To: core.StatusOnline, At: t1})
	tr.apply(core.Change{User: "alice", From: core.StatusOnline, To: core.StatusAway, At: t0}) // older
	tr.apply(core.Change{User: "bob", From: core.StatusOffline, To: core.StatusDND, At: t1})
	tr.apply(core.Change{User: "carol", From: core.StatusOffline, To: core.StatusOnline, At: t1}) // over the cap
	ov := tr.overview(10)
	if ov.ByStatus["ONLINE"] != 1 || ov.ByStatus["DND"] != 1 || ov.Tracked != 2 {
		t.Fatalf("overview %+v", ov)
	}
	tr.apply(core.Change{User: "alice", From: core.StatusOnline, To: core.StatusOffline, At: t2})
	if ov := tr.overview(10); ov.ByStatus["ONLINE"] != 0 || ov.Tracked != 1 {
		t.Fatalf("after alice left: %+v", ov)
	}
}

func TestSweepLog(t *testing.T) {
	l := newSweepLog(2)
	for i, r := range []SweepReport{{Kind: "users"}, {Kind: "users", Visited: 1}, {Kind: "scopes", Removed: 2}, {Kind: "users", Error: "boom"}} {
		want := i > 0
		if got := l.record(r); got != want {
			t.Fatalf("record %d: %v; want %v", i, got, want)
		}
	}
	s := l.snapshot()
	if len(s.Recent) != 2 || s.Recent[0].Error != "boom" || s.Users == nil || s.Users.Error != "boom" || s.Scopes.Removed != 2 {
		t.Fatalf("snapshot %+v", s)
	}
}
