package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// Common production pitfalls of presence systems (zombie users after a
// crash, keys by user only, flapping, no debounce, KEYS and SCAN in the hot
// path, and the others below), one test each, on every adapter.

// pitfallEngine is an engine on an injected clock with changes published
// at once unless the test says otherwise.
func pitfallEngine(t *testing.T, a rig.Adapter, srv *redistest.Instance, cfg core.Config) (*core.Engine, *rig.Clock, context.Context) {
	t.Helper()
	clk := rig.NewClock(rig.T0)
	cfg.Clock = clk.Now
	return rig.Engine(t, a.Open(t, srv.Addr), cfg), clk, bounded(t, settle)
}

// events gathers the changes an engine published, from call results and
// sweep reports.
type events struct{ list []core.Change }

func (ev *events) add(cs ...core.Change) { ev.list = append(ev.list, cs...) }

func (ev *events) sweep(t *testing.T, ctx context.Context, e *core.Engine) {
	t.Helper()
	r, err := e.SweepUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev.add(r.Changes...)
}

func (ev *events) of(user string) []string {
	var out []string
	for _, c := range ev.list {
		if c.User == user {
			out = append(out, c.From.String()+"→"+c.To.String())
		}
	}
	return out
}

// publishes counts the PUBLISH commands a client sent on channel.
func publishes(cmds []rig.Command, channel string) int {
	n := 0
	for _, c := range cmds {
		if c.Name == "PUBLISH" && len(c.Args) > 0 && c.Args[0] == channel {
			n++
		}
	}
	return n
}

// TestPitfallZombieOnlineAfterCrash: "仅依靠onClose判断下线，无心跳兜底，大量僵尸
// 在线用户". Clients crash, are killed or lose the network and never log
// out. Their devices go OFFLINE when the window passes, OFFLINE is
// announced once per user, and even with no sweeper at all their keys
// leave Redis by themselves (every page of sessions carries an expiry).
func TestPitfallZombieOnlineAfterCrash(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			// Real time, short windows: 100 ms heartbeats, keys kept 100 ms
			// past the window.
			cfg := core.Config{Intervals: map[core.Kind]time.Duration{core.KindWeb: 100 * time.Millisecond},
				KeyGrace: 100 * time.Millisecond, LeaveDelay: 200 * time.Millisecond, CoalesceWindow: -1}
			eng := rig.Engine(t, a.Open(t, srv.Addr), cfg)
			ctx := bounded(t, settle)
			var users []string
			for i := range 20 {
				u := "crashed-" + strconv.Itoa(i)
				users = append(users, u)
				if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: u, Device: "app", Kind: core.KindWeb, Active: true}); err != nil {
					t.Fatal(err)
				}
			}
			// The clients crash: no logout, no disconnect, nothing.
			poll(t, settle, "crashed users shown OFFLINE", func() (bool, string) {
				sts, err := eng.Statuses(ctx, users)
				if err != nil {
					return false, err.Error()
				}
				for _, st := range sts {
					if st.Status != core.StatusOffline {
						return false, st.User + " is " + st.Status.String()
					}
				}
				return true, ""
			})
			// No sweeper has run: the pages that hold the sessions expire on
			// their own, a day after their last write at most.
			for _, k := range rig.Keys(t, srv) {
				if strings.Contains(k, ":p:") {
					if ttl := rig.PTTL(t, srv, k); ttl <= 0 || ttl > (24*time.Hour+time.Second).Milliseconds() {
						t.Errorf("%s expires in %d ms, want within a day", k, ttl)
					}
				}
			}
			// A sweep announces each user OFFLINE exactly once and leaves
			// nothing behind.
			var ev events
			poll(t, settle, "OFFLINE announced for everyone", func() (bool, string) {
				ev.sweep(t, ctx, eng)
				for _, u := range users {
					if len(ev.of(u)) == 0 {
						return false, u + " not announced yet"
					}
				}
				return true, ""
			})
			ev.sweep(t, ctx, eng)
			for _, u := range users {
				if got := ev.of(u); !slices.Equal(got, []string{"ONLINE→OFFLINE"}) {
					t.Errorf("%s's sweeps announced %v, want one ONLINE→OFFLINE", u, got)
				}
			}
			for _, k := range rig.Keys(t, srv) {
				if n, _ := rig.Do(t, srv, "EXISTS", k).(int64); n == 1 && (strings.HasSuffix(k, ":due") || strings.HasSuffix(k, ":st")) {
					t.Errorf("%s is left behind after every user went OFFLINE", k)
				}
			}
		})
	}
}

// TestPitfallUserIDOnlyKeys: "使用userId作为唯一缓存key，不支持多端登录，单设备下线
// 全员下线". Each device is its own session inside the user's key: logging
// out or losing one device leaves the others, their gateways and their
// states alone.
func TestPitfallUserIDOnlyKeys(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng, clk, ctx := pitfallEngine(t, a, srv, core.Config{CoalesceWindow: -1})
			tokens := map[string]string{}
			for _, d := range []struct {
				id   string
				kind core.Kind
			}{{"web-1", core.KindWeb}, {"iphone", core.KindIOS}, {"mac", core.KindDesktop}} {
				r, err := eng.Login(ctx, core.Login{User: "u", Device: d.id, Kind: d.kind, Gateway: "gw-" + d.id})
				if err != nil {
					t.Fatal(err)
				}
				tokens[d.id] = r.Token
			}
			if _, err := eng.Logout(ctx, "u", "web-1", tokens["web-1"]); err != nil {
				t.Fatal(err)
			}
			clk.Add(90 * time.Second) // the desktop's 60 s window passes; the phone's 120 s does not
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "iphone", Token: tokens["iphone"], Background: true}); err != nil {
				t.Fatal(err)
			}
			st, err := eng.Status(ctx, "u")
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != core.StatusPushOnline || len(st.Devices) != 1 || st.Devices[0].ID != "iphone" || st.Devices[0].Gateway != "gw-iphone" {
				t.Fatalf("after one device logged out and one went silent: %+v; want the phone alone, PUSH_ONLINE on its own gateway", st)
			}
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "iphone", Token: tokens["iphone"], Active: true}); err != nil {
				t.Fatal(err)
			}
			if st, _ := eng.Status(ctx, "u"); st.Status != core.StatusOnline {
				t.Fatalf("the phone back in the foreground: %v, want ONLINE", st.Status)
			}
		})
	}
}

// TestPitfallFlappingFromShortTimeouts: "心跳超时时间过短，网络抖动导致状态频繁闪烁".
// A device whose heartbeats arrive late, or one of which is lost, stays
// ONLINE at every instant and no change is published: the window is two
// intervals.
func TestPitfallFlappingFromShortTimeouts(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng, clk, ctx := pitfallEngine(t, a, srv, core.Config{})
			var ev events
			// Heartbeats due every 30 s arrive with jitter; the one due at
			// 120 s is lost altogether.
			arrivals := []time.Duration{0, 31 * time.Second, 63 * time.Second, 92 * time.Second, 152 * time.Second, 181 * time.Second, 215 * time.Second, 240 * time.Second}
			next := 0
			for at := time.Duration(0); at <= 260*time.Second; at += time.Second {
				clk.Set(rig.T0.Add(at))
				if next < len(arrivals) && arrivals[next] == at {
					ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Active: true})
					if err != nil {
						t.Fatal(err)
					}
					ev.add(ack.Changes...)
					next++
				}
				if at%(5*time.Second) == 0 {
					ev.sweep(t, ctx, eng)
				}
				if at%(10*time.Second) == 0 {
					if st, err := eng.Status(ctx, "u"); err != nil || st.Status != core.StatusOnline {
						t.Fatalf("at %v: %v, %v; want ONLINE throughout", at, st.Status, err)
					}
				}
			}
			if got := ev.of("u"); !slices.Equal(got, []string{"OFFLINE→ONLINE"}) {
				t.Fatalf("published %v, want only the first ONLINE", got)
			}
		})
	}
}

// TestPitfallNoDebounce: "状态变更无防抖，短时间反复上下线推送大量重复消息". A page
// reload (disconnect, reconnect), a network switch to another gateway, and
// DND set and cleared within a second publish nothing: MONITOR sees no
// PUBLISH after the first ONLINE, and an explicit logout is published at
// once, exactly once.
func TestPitfallNoDebounce(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng, clk, ctx := pitfallEngine(t, a, srv, core.Config{})
			mon := rig.StartMonitor(t, srv.Addr)
			var ev events
			beat := func(gw string) string {
				ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Active: true, Gateway: gw})
				if err != nil {
					t.Fatal(err)
				}
				ev.add(ack.Changes...)
				return ack.Token
			}
			tick := func(d time.Duration) {
				for end := clk.Now().Add(d); clk.Now().Before(end); {
					clk.Add(500 * time.Millisecond)
					ev.sweep(t, ctx, eng)
				}
			}
			token := beat("gw-1")
			tick(3 * time.Second) // the first ONLINE is published after the coalesce window
			online := len(ev.list)
			if online != 1 {
				t.Fatalf("first heartbeat: %v, want one ONLINE", ev.of("u"))
			}
			for range 5 { // five page reloads
				r, err := eng.Disconnect(ctx, "u", "web", token)
				if err != nil || !r.Removed {
					t.Fatalf("disconnect: %+v, %v", r, err)
				}
				ev.add(r.Changes...)
				tick(2 * time.Second)
				token = beat("gw-1")
				tick(time.Second)
			}
			token = beat("gw-2") // network switch: the connection moves
			tick(2 * time.Second)
			for range 3 { // DND on and off within the coalesce window
				cs, err := eng.SetManual(ctx, "u", core.ManualDND, 0)
				ev.add(cs...)
				if err != nil {
					t.Fatal(err)
				}
				clk.Add(300 * time.Millisecond)
				if cs, err = eng.SetManual(ctx, "u", core.ManualNone, 0); err != nil {
					t.Fatal(err)
				}
				ev.add(cs...)
				tick(2 * time.Second)
			}
			if got := ev.of("u"); len(got) != 1 {
				t.Fatalf("reloads, a network switch and DND toggles published %v, want nothing after the first ONLINE", got)
			}
			if n := publishes(mon.Sync(t), eng.ChangeChannel()); n != 1 {
				t.Fatalf("MONITOR saw %d PUBLISH on %s, want 1", n, eng.ChangeChannel())
			}
			r, err := eng.Logout(ctx, "u", "web", token)
			if err != nil {
				t.Fatal(err)
			}
			if got := changesOf(r.Changes); !slices.Equal(got, []string{"u:ONLINE→OFFLINE"}) {
				t.Fatalf("logout of the last device published %v, want OFFLINE at once", got)
			}
			tick(20 * time.Second)
			if n := publishes(mon.Sync(t), eng.ChangeChannel()); n != 2 {
				t.Fatalf("MONITOR saw %d PUBLISH on %s in all, want 2", n, eng.ChangeChannel())
			}
		})
	}
}

// TestPitfallFanOutStorm: "群成员状态全员推送，引发消息风暴、接口雪崩". A user in a
// 5,000-member room goes online and offline: each change is one PUBLISH
// on one channel, whatever the size of the groups the user is in; a
// reader loads 1,000 friends' statuses in one round trip of at most one
// script call per user bucket.
func TestPitfallFanOutStorm(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng, _, ctx := pitfallEngine(t, a, srv, core.Config{CoalesceWindow: -1})
			room := core.Scope{Class: "room", ID: "big"}
			for i := 0; i < 5000; i += core.MaxBatch {
				var touches []core.ScopeTouch
				for j := i; j < i+core.MaxBatch; j++ {
					touches = append(touches, core.ScopeTouch{Scope: room, Member: "member-" + strconv.Itoa(j)})
				}
				if err := eng.TouchBatch(ctx, touches); err != nil {
					t.Fatal(err)
				}
			}
			mon := rig.StartMonitor(t, srv.Addr)
			r, err := eng.Login(ctx, core.Login{User: "member-7", Device: "web", Kind: core.KindWeb})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Touch(ctx, room, "member-7"); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Logout(ctx, "member-7", "web", r.Token); err != nil {
				t.Fatal(err)
			}
			cmds := mon.Sync(t)
			pubs := 0
			for _, c := range cmds {
				if c.Name == "PUBLISH" {
					pubs++
					if c.Args[0] != eng.ChangeChannel() {
						t.Errorf("a change published on %q, want %q", c.Args[0], eng.ChangeChannel())
					}
				}
			}
			if pubs != 2 {
				t.Fatalf("online and offline in a 5,000-member room: %d PUBLISH, want 2", pubs)
			}
			// Pull: 1,000 friends in a few bounded calls.
			friends := make([]string, 1000)
			for i := range friends {
				friends[i] = "member-" + strconv.Itoa(i)
			}
			if _, err := eng.Statuses(ctx, friends[:1]); err != nil { // load the script
				t.Fatal(err)
			}
			mon2 := rig.StartMonitor(t, srv.Addr)
			if _, err := eng.Statuses(ctx, friends); err != nil {
				t.Fatal(err)
			}
			calls := 0
			for _, c := range mon2.Sync(t) {
				if !c.Lua && (c.Name == "EVALSHA" || c.Name == "EVAL") {
					calls++
				}
			}
			// bounded calls of at most 50 users (docs/design.md §10), a
			// part of one in each of the 16 user buckets: never a call a user
			if want := 1000/50 + 16; calls == 0 || calls > want {
				t.Fatalf("Statuses of 1,000 users sent %d script calls, want at most %d (50 users a call, in 16 buckets)", calls, want)
			}
		})
	}
}

// TestPitfallKeysWithoutTTL: "Redis Key无过期时间，堆积大量僵尸会话，内存溢出". After a
// workload of every kind of call, every user page and per-scope key carries
// an expiry; the per-bucket keys that have none (meta, manual statuses, due
// index, status counters, scope registry and release counters, the change
// log) hold one entry per user, page or scope that still needs one, and are
// emptied once everyone is gone (a manual status set without expiry
// persists by design until cleared).
func TestPitfallKeysWithoutTTL(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			classes := core.DefaultClasses()
			classes["uv"] = core.ScopeClass{Layout: core.LayoutApprox, Window: 10 * time.Minute}
			eng, clk, ctx := pitfallEngine(t, a, srv, core.Config{Classes: classes, ChangeLog: 100})
			for i := range 50 {
				u := "u" + strconv.Itoa(i)
				if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: u, Device: "web", Kind: core.KindWeb}); err != nil {
					t.Fatal(err)
				}
				if _, err := eng.Login(ctx, core.Login{User: u, Device: "phone", Kind: core.KindIOS, Background: i%2 == 0}); err != nil {
					t.Fatal(err)
				}
				err := eng.TouchBatch(ctx, []core.ScopeTouch{{Scope: core.Scope{Class: "room", ID: "r" + strconv.Itoa(i%3)}, Member: u},
					{Scope: core.Scope{Class: "video", ID: "v"}, Member: u}, {Scope: core.Scope{Class: "uv", ID: "site"}, Member: u}})
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := eng.SetManual(ctx, "u1", core.ManualDND, time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.SetManual(ctx, "u2", core.ManualInvisible, 0); err != nil { // until cleared
				t.Fatal(err)
			}
			clk.Add(2 * time.Second)
			if _, err := eng.SweepUsers(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.SweepScopes(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Count(ctx, core.Scope{Class: "video", ID: "v"}); err != nil {
				t.Fatal(err)
			}
			bucketKeys := []string{":m", ":man", ":due", ":cnt", ":reg", ":rel", ":log"}
			check := func(when string) map[string]int64 {
				sizes := map[string]int64{}
				for _, k := range rig.Keys(t, srv) {
					ttl := rig.PTTL(t, srv, k)
					switch {
					case strings.Contains(k, ":p:"), strings.HasSuffix(k, ":big"), strings.Contains(k, ":z:"), strings.Contains(k, ":h:"), strings.Contains(k, ":c:"),
						strings.Contains(k, ":x:"), strings.Contains(k, ":n:"), strings.HasSuffix(k, ":lock"):
						if ttl < 0 {
							t.Errorf("%s: %s has no expiry", when, k)
						}
					case strings.HasSuffix(k, ":ob"):
						// an outbox expires a day after its last event, and
						// holds only its counter and epoch once all are delivered
						if n, _ := rig.Do(t, srv, "HLEN", k).(int64); ttl < 0 || n != 2 {
							t.Errorf("%s: outbox %s holds %d fields, expiry %d ms; want 2 (all delivered) and an expiry", when, k, n, ttl)
						}
					case slices.ContainsFunc(bucketKeys, func(s string) bool { return strings.HasSuffix(k, s) }):
						typ := fmt.Sprint(rig.Do(t, srv, "TYPE", k))
						size := map[string]string{"hash": "HLEN", "zset": "ZCARD", "stream": "XLEN"}[typ]
						n, _ := rig.Do(t, srv, size, k).(int64)
						sizes[k[strings.LastIndexByte(k, ':'):]] += n
					default:
						t.Errorf("%s: %s is not a key of the layout", when, k)
					}
				}
				return sizes
			}
			t.Logf("%s: per-bucket entries with live users: %v", a.Name, check("with live users"))
			// Everyone leaves: windows, push window, manual expiry, scope
			// windows and the logins' fences (KickFence, an hour) pass;
			// sweeps run until scopes are released.
			for range 13 {
				clk.Add(5 * time.Minute)
				if _, err := eng.SweepUsers(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := eng.SweepScopes(ctx); err != nil {
					t.Fatal(err)
				}
			}
			sizes := check("after everyone left")
			for _, k := range []string{":due", ":reg", ":rel"} {
				if sizes[k] != 0 {
					t.Errorf("after everyone left, the %s keys still hold %d entries", k, sizes[k])
				}
			}
			// The status counters keep at most one field per status and
			// bucket; the change log is trimmed to about Config.ChangeLog.
			if sizes[":cnt"] > 5*16 || sizes[":log"] > 2*100 {
				t.Errorf("after everyone left: %d status counters, %d log entries", sizes[":cnt"], sizes[":log"])
			}
			if sizes[":man"] != 1 {
				t.Errorf("after everyone left, the manual hashes hold %d entries, want 1 (u2's INVISIBLE, kept until cleared)", sizes[":man"])
			}
			t.Logf("%s: per-bucket entries after everyone left: %v", a.Name, sizes)
		})
	}
}

// TestPitfallMissingGatewayRouting: "分布式集群未记录网关节点，跨节点无法推送消息".
// Each session records the gateway holding its connection, follows it when
// the device reconnects elsewhere, and a kick is delivered on that
// gateway's own channel only.
func TestPitfallMissingGatewayRouting(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng, _, ctx := pitfallEngine(t, a, srv, core.Config{})
			gwA, err := eng.Subscribe(ctx, "gw-a")
			if err != nil {
				t.Fatal(err)
			}
			defer gwA.Close()
			gwB, err := eng.Subscribe(ctx, "gw-b")
			if err != nil {
				t.Fatal(err)
			}
			defer gwB.Close()
			r, err := eng.Login(ctx, core.Login{User: "u", Device: "laptop", Kind: core.KindDesktop, Gateway: "gw-a"})
			if err != nil {
				t.Fatal(err)
			}
			// The laptop reconnects through gateway B.
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "laptop", Token: r.Token, Gateway: "gw-b"}); err != nil {
				t.Fatal(err)
			}
			if st, err := eng.Status(ctx, "u"); err != nil || st.Devices[0].Gateway != "gw-b" {
				t.Fatalf("after reconnecting through gw-b: %+v, %v", st, err)
			}
			exclusive := core.PolicyExclusive
			lr, err := eng.Login(ctx, core.Login{User: "u", Device: "phone", Kind: core.KindIOS, Gateway: "gw-a", Policy: &exclusive})
			if err != nil || len(lr.Kicked) != 1 || lr.Kicked[0].Gateway != "gw-b" {
				t.Fatalf("exclusive login: %+v, %v; want the laptop kicked at gw-b", lr, err)
			}
			// gw-b receives the kick; gw-a, which no longer holds the
			// laptop, receives changes only.
			nextKick := func(f *core.Feed) (*core.Kick, error) {
				for {
					cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
					ev, err := f.Next(cctx)
					cancel()
					if err != nil {
						return nil, err
					}
					if ev.Kick != nil {
						return ev.Kick, nil
					}
				}
			}
			k, err := nextKick(gwB)
			if err != nil || k.Device != "laptop" || k.User != "u" {
				t.Fatalf("gw-b: %+v, %v; want the laptop's kick", k, err)
			}
			if k, err := nextKick(gwA); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("gw-a received %+v, %v; want no kick", k, err)
			}
		})
	}
}

// TestPitfallDuplicateDeviceIDsAcrossTabs: "浏览器多标签页deviceId重复，会话互相覆
// 盖". Two tabs sharing a device ID either share one session (heartbeats
// without a token), or, when the second logs in, the first is kicked and
// told so (its next heartbeat is refused with ErrSessionReplaced) instead of
// silently overwriting the second; tabs with IDs of their own are devices
// of their own.
func TestPitfallDuplicateDeviceIDsAcrossTabs(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng, _, ctx := pitfallEngine(t, a, srv, core.Config{})
			// Heartbeats without tokens: both tabs share one session.
			a1, err1 := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "browser", Kind: core.KindWeb, Gateway: "gw-1"})
			a2, err2 := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "browser", Kind: core.KindWeb, Gateway: "gw-1"})
			if err1 != nil || err2 != nil || a1.Token != a2.Token {
				t.Fatalf("two tabs, one device ID, no tokens: %q %v, %q %v; want one shared session", a1.Token, err1, a2.Token, err2)
			}
			// Tab 1 logs in, then tab 2 with the same ID.
			t1, err := eng.Login(ctx, core.Login{User: "v", Device: "browser", Kind: core.KindWeb, Gateway: "gw-1"})
			if err != nil {
				t.Fatal(err)
			}
			t2, err := eng.Login(ctx, core.Login{User: "v", Device: "browser", Kind: core.KindWeb, Gateway: "gw-2"})
			if err != nil || len(t2.Kicked) != 1 || t2.Kicked[0].Gateway != "gw-1" {
				t.Fatalf("second tab's login: %+v, %v; want the first tab kicked at gw-1", t2, err)
			}
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "v", Device: "browser", Token: t1.Token, Gateway: "gw-1"}); !errors.Is(err, core.ErrSessionReplaced) {
				t.Fatalf("the first tab's heartbeat: %v, want ErrSessionReplaced", err)
			}
			st, err := eng.Status(ctx, "v")
			if err != nil || len(st.Devices) != 1 || st.Devices[0].Gateway != "gw-2" {
				t.Fatalf("after the first tab's stale heartbeat: %+v, %v; want the second tab's session untouched", st, err)
			}
			// Tabs with their own IDs are separate devices.
			for _, tab := range []string{"browser#tab-1", "browser#tab-2"} {
				if _, err := eng.Login(ctx, core.Login{User: "w", Device: tab, Kind: core.KindWeb}); err != nil {
					t.Fatal(err)
				}
			}
			if st, err := eng.Status(ctx, "w"); err != nil || len(st.Devices) != 2 {
				t.Fatalf("two tabs with their own IDs: %+v, %v; want two devices", st, err)
			}
		})
	}
}

// TestPitfallMobileBackgroundJudgedOffline: "移动端切后台直接判离线，用户体验极差". An
// app suspended by the OS stops heartbeating: it stays PUSH_ONLINE for the
// push window, with nothing published, and is OFFLINE only after it.
func TestPitfallMobileBackgroundJudgedOffline(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			eng, clk, ctx := pitfallEngine(t, a, srv, core.Config{})
			var ev events
			r, err := eng.Login(ctx, core.Login{User: "u", Device: "iphone", Kind: core.KindIOS})
			if err != nil {
				t.Fatal(err)
			}
			clk.Add(5 * time.Second)
			ev.sweep(t, ctx, eng)
			ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "iphone", Token: r.Token, Background: true})
			if err != nil {
				t.Fatal(err)
			}
			ev.add(ack.Changes...)
			// Suspended: no heartbeat for far longer than 2 × 60 s.
			for range 9 * 60 / 5 {
				clk.Add(5 * time.Second)
				ev.sweep(t, ctx, eng)
			}
			if st, err := eng.Status(ctx, "u"); err != nil || st.Status != core.StatusPushOnline {
				t.Fatalf("9 minutes in the background: %v, %v; want PUSH_ONLINE", st.Status, err)
			}
			if got := ev.of("u"); !slices.Equal(got, []string{"OFFLINE→ONLINE", "ONLINE→PUSH_ONLINE"}) {
				t.Fatalf("published %v, want ONLINE then PUSH_ONLINE and no OFFLINE", got)
			}
			for range 2 * 60 / 5 {
				clk.Add(5 * time.Second)
				ev.sweep(t, ctx, eng)
			}
			if st, err := eng.Status(ctx, "u"); err != nil || st.Status != core.StatusOffline {
				t.Fatalf("past the push window: %v, %v; want OFFLINE", st.Status, err)
			}
			if got := ev.of("u"); !slices.Equal(got, []string{"OFFLINE→ONLINE", "ONLINE→PUSH_ONLINE", "PUSH_ONLINE→OFFLINE"}) {
				t.Fatalf("published %v, want OFFLINE once, after the push window", got)
			}
		})
	}
}

// TestPitfallKeysInHotPath: "KEYS/SCAN in the hot path" (plain designs
// count and aggregate by scanning the keyspace; docs/design.md §8 forbids it). MONITOR records
// every command the server runs, the scripts' own included, during a
// workload of every call, sweeps and releases included: none enumerates
// the keyspace or flushes it.
func TestPitfallKeysInHotPath(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			mon := rig.StartMonitor(t, srv.Addr)
			classes := core.DefaultClasses()
			classes["uv"] = core.ScopeClass{Layout: core.LayoutApprox, Window: 10 * time.Minute}
			eng, clk, ctx := pitfallEngine(t, a, srv, core.Config{Classes: classes, ChangeLog: 10})
			for _, o := range engineOps(eng, "hot") {
				if err := o.call(ctx); err != nil {
					t.Fatalf("%s: %v", o.name, err)
				}
			}
			if err := eng.Touch(ctx, core.Scope{Class: "uv", ID: "site"}, "m"); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.ActiveWithin(ctx, core.Scope{Class: "uv", ID: "site"}, time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, _, err := eng.ChangeLogAfter(ctx, "", 10); err != nil {
				t.Fatal(err)
			}
			for range 6 { // expiries, releases
				clk.Add(5 * time.Minute)
				if _, err := eng.SweepUsers(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := eng.SweepScopes(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cmds := mon.Sync(t)
			lua := 0
			forbidden := map[string]bool{"KEYS": true, "SCAN": true, "FLUSHDB": true, "FLUSHALL": true, "RANDOMKEY": true}
			for _, c := range cmds {
				if c.Lua {
					lua++
				}
				if forbidden[c.Name] {
					t.Errorf("the workload sent %s %v (from a script: %v)", c.Name, c.Args, c.Lua)
				}
			}
			if lua == 0 {
				t.Fatal("MONITOR showed no command run by a script: the check saw nothing")
			}
			t.Logf("%s: %d commands recorded, %d of them run by scripts; no KEYS, SCAN or FLUSH", a.Name, len(cmds), lua)
		})
	}
}
