package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// TestDebounce covers docs/design.md §7: one event per net change,
// LeaveDelay for disconnects and expiry, immediate publication of an
// explicit logout, and CoalesceWindow merging.
func TestDebounce(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"a change waits CoalesceWindow and is published by the first call after it", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{999 * ms, sweep, "swept"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{2 * sec, sweep, "swept"},
		}},
		{"A→B→A inside the window publishes nothing", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{10 * sec, manual("u", core.ManualDND, 0), "ok"},
			{10*sec + 500*ms, manual("u", core.ManualNone, 0), "ok"},
			{12 * sec, sweep, "swept"},
		}},
		{"changes within the window merge into one", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{10 * sec, manual("u", core.ManualDND, 0), "ok"},
			{10*sec + 500*ms, manual("u", core.ManualInvisible, 0), "ok"},
			{11 * sec, sweep, "swept [u:ONLINE→OFFLINE]"},
		}},
		{"a quick reconnect publishes nothing", []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{10 * sec, disconnect("u", "web"), "removed"},
			{10 * sec, status("u"), "OFFLINE"},
			{14 * sec, hb("u", "web", core.KindWeb, withToken), "ok"},
			{30 * sec, sweep, "swept"},
			{30 * sec, status("u"), "ONLINE web:ONLINE"},
		}},
		{"a disconnect publishes OFFLINE after LeaveDelay", []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{10 * sec, disconnect("u", "web"), "removed"},
			{25*sec - 1*ms, sweep, "swept"},
			{25 * sec, sweep, "swept [u:ONLINE→OFFLINE]"},
		}},
		{"an explicit logout of the last device is published at once", []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, login("u", "phone", core.KindIOS, "gw2"), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{10 * sec, logout("u", "web"), "removed"},
			{10 * sec, logout("u", "phone"), "removed [u:ONLINE→OFFLINE]"},
			{30 * sec, sweep, "swept"},
		}},
		{"expiry is published LeaveDelay after the window ends", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{30 * sec, hb("u", "web", core.KindWeb, active), "ok"},
			{90*sec + 1*ms, sweep, "swept"},
			{90*sec + 1*ms, status("u"), "OFFLINE"},
			{105*sec + 1*ms - 1*ms, sweep, "swept"},
			{105*sec + 1*ms, sweep, "swept [u:ONLINE→OFFLINE]"},
		}},
		{"a late sweep publishes at once what is long due", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{70 * sec, sweep, "swept"},
			{3 * min, sweep, "swept [u:ONLINE→OFFLINE]"},
		}},
		{"idleness is published by the sweep", []step{
			{0, hb("u", "phone", core.KindIOS, active), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{100 * sec, hb("u", "phone", core.KindIOS), "ok"},
			{200 * sec, hb("u", "phone", core.KindIOS), "ok"},
			{5 * min, sweep, "swept"},
			{5*min + 1*sec, sweep, "swept [u:ONLINE→AWAY]"},
		}},
		{"coming back during LeaveDelay cancels the OFFLINE", []step{
			{0, hb("u", "web", core.KindWeb, active), "ok"},
			{1 * sec, sweep, "swept [u:OFFLINE→ONLINE]"},
			{60*sec + 1*ms, sweep, "swept"},
			{70 * sec, hb("u", "web", core.KindWeb, active), "ok"},
			{2 * min, sweep, "swept"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runTable(t, core.Config{}, tt.steps) })
	}
}

// TestDebounceZeroWindows checks that negative LeaveDelay and
// CoalesceWindow publish every change at once.
func TestDebounceZeroWindows(t *testing.T) {
	runTable(t, core.Config{LeaveDelay: -1, CoalesceWindow: -1}, []step{
		{0, hb("u", "web", core.KindWeb, active), "ok [u:OFFLINE→ONLINE]"},
		{10 * sec, login("u", "phone", core.KindIOS, "gw1"), "ok"},
		{20 * sec, disconnect("u", "web"), "removed"},
		{30 * sec, disconnect("u", "phone"), "removed [u:ONLINE→OFFLINE]"},
	})
}

// TestOneEventPerChangeAcrossEngines runs two engines on one Redis, as two
// gateways would: each net change is published by exactly one of them.
func TestOneEventPerChangeAcrossEngines(t *testing.T) {
	ctx := context.Background()
	a, clk, mr := newMiniEngine(t, core.Config{})
	b := engineOn(t, mr, clk, core.Config{})
	if _, err := a.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Active: true}); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Second)
	mr.SetTime(clk.t)
	var published []core.Change
	for _, e := range []*core.Engine{a, b, a, b} {
		r, err := e.SweepUsers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		published = append(published, r.Changes...)
	}
	if len(published) != 1 || published[0].To != core.StatusOnline {
		t.Fatalf("published %v, want exactly one OFFLINE→ONLINE", published)
	}
}

// TestOnlineCountsFollowPublishedChanges checks Online on the model and on
// both engines: counts move with the published (debounced) statuses.
func TestOnlineCountsFollowPublishedChanges(t *testing.T) {
	online := func(e *env) string {
		c, err := opdo.Do[map[core.Status]int64](e.ctx, e.p, core.ReadOnline{})
		if err != nil {
			return errName(err)
		}
		return fmt.Sprintf("online=%d away=%d dnd=%d push=%d", c[core.StatusOnline], c[core.StatusAway], c[core.StatusDND], c[core.StatusPushOnline])
	}
	runTable(t, core.Config{}, []step{
		{0, hb("a", "web", core.KindWeb, active), "ok"},
		{0, hb("b", "web", core.KindWeb, active), "ok"},
		{0, hb("c", "phone", core.KindIOS, background), "ok"},
		{0, online, "online=0 away=0 dnd=0 push=0"},
		{1 * sec, sweep, "swept [a:OFFLINE→ONLINE b:OFFLINE→ONLINE c:OFFLINE→PUSH_ONLINE]"},
		{1 * sec, online, "online=2 away=0 dnd=0 push=1"},
		{2 * sec, manual("b", core.ManualDND, 0), "ok"},
		{3 * sec, sweep, "swept [b:ONLINE→DND]"},
		{3 * sec, online, "online=1 away=0 dnd=1 push=1"},
		{4 * sec, disconnect("a", "web"), "removed"},
		{20 * sec, sweep, "swept [a:ONLINE→OFFLINE]"},
		{20 * sec, online, "online=0 away=0 dnd=1 push=1"},
	})
}
