package core_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
	"github.com/presencekit/presence/internal/redistest"
)

// t0 is the first named instant of every step table; steps name later
// instants as offsets from it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is what a step acts on: one implementation of Presence, its clock,
// and the session tokens handed out so far (by "user/device").
type env struct {
	ctx    context.Context
	p      core.Presence
	clk    *manualClock
	move   func(time.Time)
	tokens map[string]string
}

// step is one row of a table: at instant t0+at, do something and observe.
type step struct {
	at   time.Duration
	do   func(*env) string
	want string
}

// backend builds a fresh Presence for one table run.
type backend struct {
	name string
	open func(tb testing.TB, cfg core.Config, clk *manualClock) (core.Presence, func(time.Time))
}

func modelBackend() backend {
	return backend{"model", func(tb testing.TB, cfg core.Config, clk *manualClock) (core.Presence, func(time.Time)) {
		m, err := core.NewModel(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return m, func(time.Time) {}
	}}
}

func miniBackend() backend {
	return backend{"miniredis", func(tb testing.TB, cfg core.Config, clk *manualClock) (core.Presence, func(time.Time)) {
		mr := miniredis.RunT(tb)
		mr.SetTime(clk.t)
		mr.ClockTTL(true)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		tb.Cleanup(func() { c.Close() })
		e, err := core.New(goredis.New(c), cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return e, mr.SetTime
	}}
}

// realClient starts a redis-server of the test's own (skipping the test
// where none is installed) and returns it with a go-redis client on it,
// closed at the end of the test.
func realClient(tb testing.TB) (*redistest.Instance, *redis.Client) {
	tb.Helper()
	srv := redistest.Server(tb)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	tb.Cleanup(func() { c.Close() })
	return srv, c
}

func realBackend() backend {
	return backend{"redis-server", func(tb testing.TB, cfg core.Config, clk *manualClock) (core.Presence, func(time.Time)) {
		_, c := realClient(tb)
		e, err := core.New(goredis.New(c), cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return e, func(time.Time) {}
	}}
}

// runTable runs steps against the model, an engine on miniredis and an
// engine on a real redis-server (skipped where none is installed).
func runTable(t *testing.T, cfg core.Config, steps []step) {
	t.Helper()
	for _, b := range []backend{modelBackend(), miniBackend(), realBackend()} {
		t.Run(b.name, func(t *testing.T) {
			clk := &manualClock{t: t0}
			cfg := cfg
			cfg.Clock = clk.Now
			p, move := b.open(t, cfg, clk)
			e := &env{ctx: context.Background(), p: p, clk: clk, move: move, tokens: map[string]string{}}
			for i, s := range steps {
				now := t0.Add(s.at)
				if now.Before(clk.t) {
					t.Fatalf("step %d goes back in time", i)
				}
				clk.t = now
				e.move(now)
				if got := s.do(e); got != s.want {
					t.Errorf("step %d at t0+%v:\n got  %s\n want %s", i, s.at, got, s.want)
				}
			}
		})
	}
}

// errName names an error by the sentinel it matches.
func errName(err error) string {
	var ie *core.InputError
	switch {
	case errors.As(err, &ie):
		return "invalid " + ie.Field
	case errors.Is(err, core.ErrSessionReplaced):
		return "replaced"
	case errors.Is(err, core.ErrNoSession):
		return "nosession"
	case errors.Is(err, core.ErrTooManyDevices):
		return "toomany"
	case errors.Is(err, core.ErrClockSkew):
		return "skew"
	case errors.Is(err, core.ErrUnsupported):
		return "unsupported"
	}
	return "error " + err.Error()
}

func changes(cs []core.Change) string {
	if len(cs) == 0 {
		return ""
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.User + ":" + c.From.String() + "→" + c.To.String()
	}
	sort.Strings(out)
	return " [" + strings.Join(out, " ") + "]"
}

type beatOpt func(*core.Heartbeat, *env)

func active(hb *core.Heartbeat, _ *env)     { hb.Active = true }
func background(hb *core.Heartbeat, _ *env) { hb.Background = true }

// withToken sends the token that the login of user/device returned.
func withToken(hb *core.Heartbeat, e *env) { hb.Token = e.tokens[hb.User+"/"+hb.Device] }

func staleToken(token string) beatOpt {
	return func(hb *core.Heartbeat, e *env) { hb.Token = e.tokens[token] }
}

func clientAt(offset time.Duration) beatOpt {
	return func(hb *core.Heartbeat, e *env) { hb.At = t0.Add(offset) }
}

func gateway(gw string) beatOpt { return func(hb *core.Heartbeat, _ *env) { hb.Gateway = gw } }

// hb sends a heartbeat and renders "ok" or the refusal, and any change.
func hb(user, dev string, kind core.Kind, opts ...beatOpt) func(*env) string {
	return func(e *env) string {
		h := core.Heartbeat{User: user, Device: dev, Kind: kind}
		for _, o := range opts {
			o(&h, e)
		}
		ack, err := opdo.Do[core.Ack](e.ctx, e.p, h)
		if err != nil {
			return errName(err)
		}
		if ack.Token == "" {
			return "no token"
		}
		if _, ok := e.tokens[user+"/"+dev]; !ok {
			e.tokens[user+"/"+dev] = ack.Token
		}
		return "ok" + changes(ack.Changes)
	}
}

// beatOf builds one beat of a batch step.
func beatOf(user, dev string, kind core.Kind, opts ...beatOpt) func(*env) core.Heartbeat {
	return func(e *env) core.Heartbeat {
		h := core.Heartbeat{User: user, Device: dev, Kind: kind}
		for _, o := range opts {
			o(&h, e)
		}
		return h
	}
}

// batch sends beats in one HeartbeatBatch and renders each ack as hb does.
func batch(beats ...func(*env) core.Heartbeat) func(*env) string {
	return func(e *env) string {
		hbs := make([]core.Heartbeat, len(beats))
		for i, b := range beats {
			hbs[i] = b(e)
		}
		acks, err := opdo.Do[[]core.Ack](e.ctx, e.p, core.HeartbeatBatch(hbs))
		if err != nil {
			return errName(err)
		}
		var out []string
		for _, a := range acks {
			if a.Err != nil {
				out = append(out, errName(a.Err))
				continue
			}
			out = append(out, "ok"+changes(a.Changes))
		}
		return strings.Join(out, " ")
	}
}

// saveToken files the current token of user/device under name, for a later staleToken.
func saveToken(user, dev, name string) func(*env) string {
	return func(e *env) string {
		e.tokens[name] = e.tokens[user+"/"+dev]
		return "saved"
	}
}

func login(user, dev string, kind core.Kind, gw string, policy ...core.Policy) func(*env) string {
	return func(e *env) string {
		l := core.Login{User: user, Device: dev, Kind: kind, Gateway: gw}
		if len(policy) > 0 {
			l.Policy = &policy[0]
		}
		res, err := opdo.Do[core.LoginResult](e.ctx, e.p, l)
		if err != nil {
			return errName(err)
		}
		e.tokens[user+"/"+dev] = res.Token
		out := "ok"
		for _, k := range res.Kicked {
			out += " kicked=" + k.Device + "@" + k.Gateway
		}
		return out + changes(res.Changes)
	}
}

func logout(user, dev string) func(*env) string {
	return func(e *env) string {
		r, err := opdo.Do[core.Ended](e.ctx, e.p, core.Logout{User: user, Device: dev, Token: e.tokens[user+"/"+dev]})
		return ended(r, err)
	}
}

func disconnect(user, dev string) func(*env) string {
	return func(e *env) string {
		r, err := opdo.Do[core.Ended](e.ctx, e.p, core.Disconnect{User: user, Device: dev, Token: e.tokens[user+"/"+dev]})
		return ended(r, err)
	}
}

func ended(r core.Ended, err error) string {
	if err != nil {
		return errName(err)
	}
	if !r.Removed {
		return "absent" + changes(r.Changes)
	}
	return "removed" + changes(r.Changes)
}

func manual(user string, m core.Manual, ttl time.Duration) func(*env) string {
	return func(e *env) string {
		cs, err := opdo.Do[[]core.Change](e.ctx, e.p, core.SetManual{User: user, Manual: m, TTL: ttl})
		if err != nil {
			return errName(err)
		}
		return "ok" + changes(cs)
	}
}

// status renders "STATUS dev:STATE …", with " manual=M" when one is set.
func status(user string) func(*env) string {
	return func(e *env) string {
		st, err := opdo.Do[core.UserStatus](e.ctx, e.p, core.ReadStatus{User: user})
		if err != nil {
			return errName(err)
		}
		out := st.Status.String()
		for _, d := range st.Devices {
			out += " " + d.ID + ":" + d.State.String()
		}
		if st.Manual != core.ManualNone {
			out += " manual=" + st.Manual.String()
		}
		return out
	}
}

func sweep(e *env) string {
	r, err := opdo.Do[core.SweepReport](e.ctx, e.p, core.SweepUsers{})
	if err != nil {
		return errName(err)
	}
	return "swept" + changes(r.Changes)
}

func touch(sc core.Scope, members ...string) func(*env) string {
	return func(e *env) string {
		batch := make([]core.ScopeTouch, len(members))
		for i, m := range members {
			batch[i] = core.ScopeTouch{Scope: sc, Member: m}
		}
		if err := opdo.Err(e.ctx, e.p, core.TouchBatch(batch)); err != nil {
			return errName(err)
		}
		return "ok"
	}
}

func leave(sc core.Scope, member string) func(*env) string {
	return func(e *env) string {
		ok, err := opdo.Do[bool](e.ctx, e.p, core.Leave{Scope: sc, Member: member})
		if err != nil {
			return errName(err)
		}
		return strconv.FormatBool(ok)
	}
}

func count(sc core.Scope) func(*env) string {
	return func(e *env) string {
		c, err := opdo.Do[core.Count](e.ctx, e.p, core.ReadCount{Scope: sc})
		if err != nil {
			return errName(err)
		}
		return strconv.FormatInt(c.N, 10)
	}
}

func activeWithin(sc core.Scope, d time.Duration) func(*env) string {
	return func(e *env) string {
		n, err := opdo.Do[int64](e.ctx, e.p, core.ReadActive{Scope: sc, Within: d})
		if err != nil {
			return errName(err)
		}
		return strconv.FormatInt(n, 10)
	}
}

// members renders every page of size limit as "a b | c d".
func members(sc core.Scope, limit int) func(*env) string {
	return func(e *env) string {
		var pages []string
		cursor := ""
		for i := 0; i < 100; i++ {
			p, err := opdo.Do[core.MemberPage](e.ctx, e.p, core.ReadMembers{Scope: sc, Cursor: cursor, Limit: limit})
			if err != nil {
				return errName(err)
			}
			ids := make([]string, len(p.Members))
			for j, m := range p.Members {
				ids[j] = m.ID
			}
			pages = append(pages, strings.Join(ids, " "))
			if cursor = p.Next; cursor == "" {
				return strings.Join(pages, " | ")
			}
		}
		return "too many pages"
	}
}

func sweepScopes(e *env) string {
	r, err := opdo.Do[core.SweepReport](e.ctx, e.p, core.SweepScopes{})
	if err != nil {
		return errName(err)
	}
	return fmt.Sprintf("removed=%d released=%d", r.Removed, r.Released)
}

// planOf is the plan of op at now (NowArg form: "" for the server's clock),
// as its outcome's type.
func planOf[T any](pl *core.Planner, now string, op core.Op) core.Plan[T] {
	var at time.Time
	if now != "" {
		ms, err := strconv.ParseInt(now, 10, 64)
		if err != nil {
			panic(err)
		}
		at = time.UnixMilli(ms)
	}
	return pl.Plan(op, at).(core.Plan[T])
}
