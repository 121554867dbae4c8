package reliability_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/conformance/reliability/faultproxy"
	"github.com/presencekit/presence/conformance/reliability/internal/rig"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// seqRand is a deterministic io.Reader for session and lock tokens, so
// that two engines fed the same calls issue the same tokens.
type seqRand struct {
	mu  sync.Mutex
	n   uint64
	buf []byte
}

func (r *seqRand) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.buf) < len(p) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], r.n)
		r.n++
		sum := sha256.Sum256(b[:])
		r.buf = append(r.buf, sum[:]...)
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// twice is a Store that sends every batch of calls twice and answers with
// the second replies, as a driver that resends after losing the first
// replies would.
type twice struct{ core.Store }

func (s twice) Eval(ctx context.Context, calls []core.Call) []core.Result {
	s.Store.Eval(ctx, calls)
	return s.Store.Eval(ctx, calls)
}

// outcome is what one step of the replay script returned, in a form that
// compares across engines.
type outcome struct {
	Err     string
	Token   string
	Kicked  []string
	Changes []string
	Removed bool
	N       int64
}

// replayStep is one call of the replay script.
type replayStep struct {
	name    string
	advance time.Duration
	do      func(ctx context.Context, e *core.Engine, tokens map[string]string) outcome
}

func changesOf(cs []core.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s:%v→%v", c.User, c.From, c.To))
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// replayScript exercises every script: logins under each policy (with
// kicks), heartbeats with and without tokens, refused ones, manual
// statuses, logout, disconnect, expiry found by sweeps, and scope touches,
// leaves and sweeps.
func replayScript() []replayStep {
	exclusive := core.PolicyExclusive
	hb := func(user, dev string, kind core.Kind, active bool) func(context.Context, *core.Engine, map[string]string) outcome {
		return func(ctx context.Context, e *core.Engine, tokens map[string]string) outcome {
			ack, err := e.Heartbeat(ctx, core.Heartbeat{User: user, Device: dev, Kind: kind, Active: active, Token: tokens[user+"/"+dev], Gateway: "gw-1"})
			if err == nil {
				tokens[user+"/"+dev] = ack.Token
			}
			return outcome{Err: errString(err), Token: ack.Token, Changes: changesOf(ack.Changes)}
		}
	}
	login := func(user, dev string, kind core.Kind, policy *core.Policy) func(context.Context, *core.Engine, map[string]string) outcome {
		return func(ctx context.Context, e *core.Engine, tokens map[string]string) outcome {
			r, err := e.Login(ctx, core.Login{User: user, Device: dev, Kind: kind, Gateway: "gw-" + dev, Policy: policy})
			if err == nil {
				tokens[user+"/"+dev] = r.Token
			}
			var kicked []string
			for _, k := range r.Kicked {
				kicked = append(kicked, k.Device+"@"+k.Gateway)
			}
			return outcome{Err: errString(err), Token: r.Token, Kicked: kicked, Changes: changesOf(r.Changes)}
		}
	}
	end := func(logout bool, user, dev string) func(context.Context, *core.Engine, map[string]string) outcome {
		return func(ctx context.Context, e *core.Engine, tokens map[string]string) outcome {
			f := e.Disconnect
			if logout {
				f = e.Logout
			}
			r, err := f(ctx, user, dev, tokens[user+"/"+dev])
			return outcome{Err: errString(err), Removed: r.Removed, Changes: changesOf(r.Changes)}
		}
	}
	sweepUsers := func(ctx context.Context, e *core.Engine, _ map[string]string) outcome {
		r, err := e.SweepUsers(ctx)
		return outcome{Err: errString(err), Changes: changesOf(r.Changes), N: int64(r.Visited)}
	}
	sweepScopes := func(ctx context.Context, e *core.Engine, _ map[string]string) outcome {
		r, err := e.SweepScopes(ctx)
		return outcome{Err: errString(err), N: int64(r.Removed*1000 + r.Released)}
	}
	room, video, hll := core.Scope{Class: "room", ID: "r"}, core.Scope{Class: "video", ID: "v"}, core.Scope{Class: "uv", ID: "h"}
	touch := func(member string) func(context.Context, *core.Engine, map[string]string) outcome {
		return func(ctx context.Context, e *core.Engine, _ map[string]string) outcome {
			err := e.TouchBatch(ctx, []core.ScopeTouch{{Scope: room, Member: member}, {Scope: video, Member: member}, {Scope: hll, Member: member}})
			return outcome{Err: errString(err)}
		}
	}
	count := func(sc core.Scope) func(context.Context, *core.Engine, map[string]string) outcome {
		return func(ctx context.Context, e *core.Engine, _ map[string]string) outcome {
			c, err := e.Count(ctx, sc)
			return outcome{Err: errString(err), N: c.N}
		}
	}
	sec := time.Second
	return []replayStep{
		{"hb alice/web", 0, hb("alice", "web", core.KindWeb, true)},
		{"hb bob/web", 0, hb("bob", "web", core.KindWeb, true)},
		{"login alice/phone", 0, login("alice", "phone", core.KindIOS, nil)},
		{"touch alice", 0, touch("alice")},
		{"touch bob", 0, touch("bob")},
		{"sweep users", 2 * sec, sweepUsers},
		{"sweep scopes", 0, sweepScopes},
		{"manual alice DND", 0, func(ctx context.Context, e *core.Engine, _ map[string]string) outcome {
			cs, err := e.SetManual(ctx, "alice", core.ManualDND, time.Minute)
			return outcome{Err: errString(err), Changes: changesOf(cs)}
		}},
		{"login alice/desk exclusive", 2 * sec, login("alice", "desk", core.KindDesktop, &exclusive)},
		{"hb alice/web kicked", 0, hb("alice", "web", core.KindWeb, true)},
		{"login bob/web again", 0, login("bob", "web", core.KindWeb, nil)},
		{"hb bob/web", 10 * sec, hb("bob", "web", core.KindWeb, false)},
		{"disconnect bob/web", 0, end(false, "bob", "web")},
		{"hb carol/web", 0, hb("carol", "web", core.KindWeb, true)},
		{"logout carol/web", 2 * sec, end(true, "carol", "web")},
		{"sweep users", 20 * sec, sweepUsers},
		{"leave bob", 0, func(ctx context.Context, e *core.Engine, _ map[string]string) outcome {
			ok, err := e.Leave(ctx, room, "bob")
			return outcome{Err: errString(err), Removed: ok}
		}},
		{"count room", 0, count(room)},
		{"count video", 0, count(video)},
		{"count uv", 0, count(hll)},
		{"sweep users", 2 * time.Minute, sweepUsers},
		{"sweep scopes", 0, sweepScopes},
		{"count video", 0, count(video)},
		{"sweep scopes", 15 * time.Minute, sweepScopes},
		{"sweep scopes", 15 * time.Minute, sweepScopes},
		{"sweep scopes", 15 * time.Minute, sweepScopes},
		{"sweep scopes", 15 * time.Minute, sweepScopes},
	}
}

// loggedEvents returns the events of a change log, each once by EventID,
// sorted (a redelivered event is logged after later ones).
func loggedEvents(t *testing.T, entries []core.LoggedChange) []string {
	t.Helper()
	var seen core.Repeats
	var out []string
	for _, e := range entries {
		if e.EventID == "" {
			t.Errorf("log entry %s has no event ID", e.ID)
		}
		if seen.Repeat(e.EventID) {
			continue
		}
		switch {
		case e.Loss != nil:
			out = append(out, fmt.Sprintf("loss at %d until %d", e.Loss.At.UnixMilli(), e.Loss.Until.UnixMilli()))
		case e.Kick != nil:
			out = append(out, fmt.Sprintf("kick %s/%s@%s at %d", e.Kick.User, e.Kick.Device, e.Kick.Gateway, e.Kick.At.UnixMilli()))
		default:
			out = append(out, fmt.Sprintf("change %s %v→%v at %d", e.Change.User, e.Change.From, e.Change.To, e.Change.At.UnixMilli()))
		}
	}
	slices.Sort(out)
	return out
}

// replayConfig is the engine configuration of the replay: an injected
// clock, deterministic tokens, and a change log.
func replayConfig(prefix string, clk *rig.Clock) core.Config {
	classes := core.DefaultClasses()
	classes["uv"] = core.ScopeClass{Layout: core.LayoutApprox, Window: 10 * time.Minute}
	return core.Config{Prefix: prefix, Clock: clk.Now, Rand: &seqRand{}, ChangeLog: 100, Classes: classes}
}

// TestRepeatedScriptsChangeNothingMore runs the same calls on two engines
// sharing a server and a clock: one sends every batch of scripts once, the
// other twice (as a driver resending after a lost reply). Every repeat must
// leave Redis exactly as one run does, so both engines show the same
// statuses and counts after every step, and the change log holds each
// change once.
func TestRepeatedScriptsChangeNothingMore(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			clk := rig.NewClock(rig.T0)
			once := rig.Engine(t, a.Open(t, srv.Addr), replayConfig("once", clk))
			double := rig.Engine(t, twice{a.Open(t, srv.Addr)}, replayConfig("twice", clk))
			tokOnce, tokTwice := map[string]string{}, map[string]string{}
			users := []string{"alice", "bob", "carol"}
			var lostEvents []string
			for i, st := range replayScript() {
				clk.Add(st.advance)
				ctx := bounded(t, 10*time.Second)
				a, b := st.do(ctx, once, tokOnce), st.do(ctx, double, tokTwice)
				// What a repeat may legitimately swallow: the changes and
				// kicks the lost first reply carried (see below).
				// A repeat's report (removed, visited) describes the repeat,
				// which found nothing left to do; only counts are state.
				aa, bb := a, b
				aa.Changes, bb.Changes, aa.Kicked, bb.Kicked = nil, nil, nil, nil
				if !strings.HasPrefix(st.name, "count") {
					aa.N, bb.N, aa.Removed, bb.Removed = 0, 0, false, false
				}
				if !reflect.DeepEqual(aa, bb) {
					t.Errorf("step %d %s: once %+v, twice %+v", i, st.name, a, b)
				}
				if !reflect.DeepEqual(a.Changes, b.Changes) || !reflect.DeepEqual(a.Kicked, b.Kicked) {
					lostEvents = append(lostEvents, fmt.Sprintf("step %d %s: once %v %v, twice %v %v", i, st.name, a.Changes, a.Kicked, b.Changes, b.Kicked))
				}
				sa, err1 := once.Statuses(ctx, users)
				sb, err2 := double.Statuses(ctx, users)
				if err1 != nil || err2 != nil {
					t.Fatalf("step %d: statuses: %v, %v", i, err1, err2)
				}
				if !reflect.DeepEqual(sa, sb) {
					t.Errorf("step %d %s: statuses differ:\nonce  %+v\ntwice %+v", i, st.name, sa, sb)
				}
			}
			logOnce, _, err1 := once.ChangeLogAfter(bounded(t, 5*time.Second), "", core.MaxPage)
			logTwice, _, err2 := double.ChangeLogAfter(bounded(t, 5*time.Second), "", core.MaxPage)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			// A repeated script swallows the events of the first run's lost
			// reply; the outbox delivers them with a later sweep, and a
			// repeated append logs an event twice under one EventID. So
			// read by EventID, both logs hold the same events.
			if a, b := loggedEvents(t, logOnce), loggedEvents(t, logTwice); !reflect.DeepEqual(a, b) {
				t.Errorf("the events logged differ:\nonce  %v\ntwice %v", a, b)
			}
			t.Logf("%s: %d changes logged once; a repeating driver logged %d; %d steps returned different events: %v",
				a.Name, len(logOnce), len(logTwice), len(lostEvents), lostEvents)
		})
	}
}

// TestReplyLostAfterApply loses the reply of a script the server has
// applied, through a proxy, for each kind of state change: a first
// heartbeat (an implicit login), a login, a logout. go-redis resends the
// pipeline by itself; redigo and rueidis return a retryable error and the
// caller retries, as a gateway does (a login with the same Login.Token).
// Either way the state ends as one application leaves it, and no session
// is kicked by its own retry.
func TestReplyLostAfterApply(t *testing.T) {
	for _, a := range rig.Adapters() {
		t.Run(a.Name, func(t *testing.T) {
			rig.CheckLeaks(t)
			srv := redistest.Server(t)
			p := faultproxy.Start(t, srv.Addr)
			clk := rig.NewClock(rig.T0)
			eng := rig.Engine(t, a.Open(t, p.Addr()), core.Config{Clock: clk.Now, CoalesceWindow: -1, LeaveDelay: -1})
			ctx := bounded(t, settle)
			// retry calls f until it succeeds or fails with a non-retryable
			// error, as a caller would.
			retry := func(what string, f func() error) int {
				for attempt := 1; ; attempt++ {
					err := f()
					if err == nil {
						return attempt
					}
					if !errors.Is(err, core.ErrUnavailable) || attempt > 5 {
						t.Fatalf("%s, attempt %d: %v", what, attempt, err)
					}
				}
			}
			// Load every script and open the client's connections first, so
			// that the lost reply is the one of an applied script, not a
			// NOSCRIPT refusal or a handshake.
			loadScripts(t, srv)
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "warm", Device: "web"}); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Login(ctx, core.Login{User: "warm", Device: "phone"}); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Logout(ctx, "warm", "phone", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Status(ctx, "warm"); err != nil {
				t.Fatal(err)
			}

			// A first heartbeat: an implicit login that publishes ONLINE,
			// decided by the steady beat's call.
			p.LoseReplyTo([]byte(script(t, "beat").SHA))
			var token string
			var published []core.Change
			n := retry("heartbeat", func() error {
				ack, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Active: true})
				token = ack.Token
				published = append(published, ack.Changes...)
				return err
			})
			st, err := eng.Status(ctx, "u")
			if err != nil || len(st.Devices) != 1 || st.Status != core.StatusOnline {
				t.Fatalf("after a heartbeat whose reply was lost: %+v, %v", st, err)
			}
			// The session the first application created is the one in force.
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "web", Token: token}); err != nil {
				t.Errorf("heartbeat with the token the retry returned: %v", err)
			}
			heartbeatEvents := len(published)

			// A login: its retry, with the same Login.Token, must not leave
			// two sessions, nor kick the device's own new session.
			p.LoseReplyTo([]byte(script(t, "login").SHA))
			var loginTokens []string
			var kicked []core.Kick
			n2 := retry("login", func() error {
				r, err := eng.Login(ctx, core.Login{User: "v", Device: "phone", Kind: core.KindIOS, Gateway: "gw", Token: "retry-token-1"})
				if err == nil {
					loginTokens = append(loginTokens, r.Token)
					kicked = append(kicked, r.Kicked...)
				}
				return err
			})
			st, err = eng.Status(ctx, "v")
			if err != nil || len(st.Devices) != 1 {
				t.Fatalf("after a login whose reply was lost: %+v, %v", st, err)
			}
			if _, err := eng.Heartbeat(ctx, core.Heartbeat{User: "v", Device: "phone", Token: loginTokens[len(loginTokens)-1]}); err != nil {
				t.Errorf("heartbeat with the token of the login that returned: %v", err)
			}

			// A logout of the last device: OFFLINE at once.
			p.LoseReplyTo([]byte(script(t, "logout").SHA))
			var ended []core.Change
			retry("logout", func() error {
				r, err := eng.Logout(ctx, "u", "web", token)
				ended = append(ended, r.Changes...)
				return err
			})
			if st, err := eng.Status(ctx, "u"); err != nil || st.Status != core.StatusOffline || len(st.Devices) != 0 {
				t.Fatalf("after a logout whose reply was lost: %+v, %v", st, err)
			}
			if len(kicked) != 0 {
				t.Errorf("a login retried with its token after a lost reply kicked %+v", kicked)
			}
			if p.Lost() != 3 {
				t.Fatalf("the proxy lost %d replies, want 3", p.Lost())
			}
			t.Logf("FIGURE lost-reply adapter=%s heartbeat_attempts=%d heartbeat_events=%d login_attempts=%d self_kicks=%d logout_events=%d",
				a.Name, n, heartbeatEvents, n2, len(kicked), len(ended))
		})
	}
}
