package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
	"github.com/presencekit/presence/internal/testtier"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/host"
)

// The parity test runs operation sequences, generated deterministically
// from a seed, through the native core.Engine and through the engine in
// the module, each on its own fresh miniredis on the same virtual clock,
// with the same token seed, and compares every observation exactly.

var (
	parityUsers   = []string{"u0", "u1", "u2", "a:b{c}", "sp ace*", "ünï"}
	parityDevices = []struct {
		id   string
		kind core.Kind
	}{{"web", core.KindWeb}, {"desk", core.KindDesktop}, {"ios", core.KindIOS}, {"droid", core.KindAndroid}, {"tv", core.KindOther}}
	parityScopes = []core.Scope{{Class: "room", ID: "r1"}, {Class: "room", ID: "r:2"}, {Class: "video", ID: "v1"},
		{Class: "video", ID: "v{2}"}, {Class: "hll", ID: "h1"}}
)

func parityConfig(r *rand.Rand, clk func() time.Time) core.Config {
	cfg := core.Config{Clock: clk, Classes: map[string]core.ScopeClass{
		"room":  {Layout: core.LayoutExact},
		"video": {Layout: core.LayoutCompact, Window: 10 * time.Minute, Shards: 1 + r.IntN(8), SweepInterval: time.Minute},
		"hll":   {Layout: core.LayoutApprox, Window: 5 * time.Minute},
	}}
	cfg.UserBuckets = []int{1, 3, 16}[r.IntN(3)]
	cfg.ScopeBuckets = []int{1, 2, 16}[r.IntN(3)]
	cfg.LeaveDelay = []time.Duration{0, -1, 7 * time.Second}[r.IntN(3)]
	cfg.CoalesceWindow = []time.Duration{0, -1, 2500 * time.Millisecond}[r.IntN(3)]
	cfg.MaxDevices = []int{0, 2, 3}[r.IntN(3)]
	cfg.Policy = core.Policy(r.IntN(3))
	if r.IntN(3) == 0 {
		cfg.ChangeLog = 5
	}
	cfg.SweepBatch = []int{0, 2}[r.IntN(2)]
	cfg.SweepBudget = []int{0, 3}[r.IntN(2)]
	return cfg
}

// side is one engine under test with its server.
type side struct {
	p  core.Presence
	mr *miniredis.Miniredis
}

// observe renders a result and an error as the comparison sees them: the
// ABI encoding of the result (every exported field) and the error's code
// and message.
func observe(res any, err error) string {
	var b strings.Builder
	if res != nil {
		j, jerr := json.Marshal(res)
		if jerr != nil {
			panic(jerr)
		}
		b.Write(j)
	}
	if err != nil {
		e := abi.EncodeError(err)
		fmt.Fprintf(&b, " error[%s] %s", e.Code, err.Error())
		var ie *core.InputError
		if errors.As(err, &ie) {
			fmt.Fprintf(&b, " field=%s", ie.Field)
		}
	}
	return b.String()
}

// paritySeq drives both sides through steps operations.
type paritySeq struct {
	t      *testing.T
	r      *rand.Rand
	ctx    context.Context
	clk    *clock
	sides  [2]side
	tokens map[string]string // user/device → latest token
	stale  map[string]string // user/device → a superseded token
	cursor map[core.Scope]string
	hasLog bool
	ops    map[string]int
}

func (s *paritySeq) user() string { return parityUsers[s.r.IntN(len(parityUsers))] }

func (s *paritySeq) device() (string, core.Kind) {
	d := parityDevices[s.r.IntN(len(parityDevices))]
	return d.id, d.kind
}

func (s *paritySeq) scope() core.Scope { return parityScopes[s.r.IntN(len(parityScopes))] }

// token picks the token a client would send: the current one mostly, a
// stale one, none, or garbage.
func (s *paritySeq) token(key string) string {
	switch n := s.r.IntN(10); {
	case n < 6:
		return s.tokens[key]
	case n < 8:
		return s.stale[key]
	case n < 9:
		return ""
	}
	return "0123456789abcdef"
}

func (s *paritySeq) remember(key, token string) {
	if token == "" {
		return
	}
	if old := s.tokens[key]; old != "" && old != token {
		s.stale[key] = old
	}
	s.tokens[key] = token
}

func (s *paritySeq) meta() map[string]string {
	switch s.r.IntN(6) {
	case 0:
		return map[string]string{}
	case 1:
		return map[string]string{"app": "v" + strconv.Itoa(s.r.IntN(9)), "lang": "de"}
	}
	return nil
}

func (s *paritySeq) heartbeat() core.Heartbeat {
	u := s.user()
	d, k := s.device()
	hb := core.Heartbeat{User: u, Device: d, Kind: k, Gateway: "gw" + strconv.Itoa(s.r.IntN(3)),
		Token: s.token(u + "/" + d), Active: s.r.IntN(2) == 0, Background: s.r.IntN(5) == 0, Meta: s.meta()}
	switch s.r.IntN(12) {
	case 0:
		hb.At = s.clk.Now().Add(-time.Duration(s.r.IntN(4000)) * time.Millisecond)
	case 1:
		hb.At = s.clk.Now().Add(10 * time.Minute)
	case 2:
		hb.User = ""
	case 3:
		hb.Device = "bad\x01id"
	case 4:
		hb.Kind = core.Kind(7)
	}
	return hb
}

// step runs one random operation on both sides and compares.
func (s *paritySeq) step(i int) {
	ctx := s.ctx
	var name string
	var obs [2]string
	run := func(f func(p core.Presence) (any, error)) {
		for j, sd := range s.sides {
			res, err := f(sd.p)
			obs[j] = observe(res, err)
		}
	}
	key := func(u, d string) string { return u + "/" + d }
	switch n := s.r.IntN(100); {
	case n < 8: // move the clock by a non-round amount
		name = "advance"
		d := time.Duration(1+s.r.IntN(90_000)) * time.Millisecond
		if s.r.IntN(8) == 0 {
			d += time.Duration(s.r.IntN(15)) * time.Minute
		}
		t := s.clk.Now().Add(d)
		s.clk.set(t)
		for _, sd := range s.sides {
			sd.mr.SetTime(t)
		}
	case n < 28:
		name = "heartbeat"
		hb := s.heartbeat()
		var ack core.Ack
		run(func(p core.Presence) (any, error) {
			a, err := opdo.Do[core.Ack](ctx, p, hb)
			ack = a
			return abi.FromAck(a), err
		})
		s.remember(key(hb.User, hb.Device), ack.Token)
	case n < 36:
		name = "heartbeat_batch"
		beats := make([]core.Heartbeat, 1+s.r.IntN(5))
		for j := range beats {
			beats[j] = s.heartbeat()
		}
		var acks []core.Ack
		run(func(p core.Presence) (any, error) {
			a, err := opdo.Do[[]core.Ack](ctx, p, core.HeartbeatBatch(beats))
			acks = a
			w := make([]abi.Ack, len(a))
			for j := range a {
				w[j] = abi.FromAck(a[j])
			}
			return w, err
		})
		for j, a := range acks {
			s.remember(key(beats[j].User, beats[j].Device), a.Token)
		}
	case n < 46:
		name = "login"
		u := s.user()
		d, k := s.device()
		l := core.Login{User: u, Device: d, Kind: k, Gateway: "gw" + strconv.Itoa(s.r.IntN(3)), Background: s.r.IntN(6) == 0, Meta: s.meta()}
		if p := s.r.IntN(5); p < 3 {
			pol := core.Policy(p)
			l.Policy = &pol
		} else if p == 4 && s.r.IntN(4) == 0 {
			pol := core.Policy(9)
			l.Policy = &pol
		}
		if s.r.IntN(6) == 0 {
			l.Token = s.tokens[key(u, d)] // a retried login, or a new token of the client's choosing
			if l.Token == "" {
				l.Token = "c0ffee" + strconv.Itoa(s.r.IntN(100))
			}
		}
		var lr core.LoginResult
		run(func(p core.Presence) (any, error) {
			r, err := opdo.Do[core.LoginResult](ctx, p, l)
			lr = r
			return abi.FromLoginResult(r), err
		})
		s.remember(key(u, d), lr.Token)
	case n < 52:
		name = "logout/disconnect"
		u := s.user()
		d, _ := s.device()
		tok := s.token(key(u, d))
		logout := s.r.IntN(2) == 0
		run(func(p core.Presence) (any, error) {
			var end core.Op = core.Disconnect{User: u, Device: d, Token: tok}
			if logout {
				end = core.Logout{User: u, Device: d, Token: tok}
			}
			r, err := opdo.Do[core.Ended](ctx, p, end)
			return abi.FromEnded(r), err
		})
	case n < 56:
		name = "set_manual"
		u := s.user()
		m := core.Manual(s.r.IntN(3))
		ttl := []time.Duration{0, time.Duration(1+s.r.IntN(600_000)) * time.Millisecond, -time.Second}[s.r.IntN(3)]
		run(func(p core.Presence) (any, error) {
			cs, err := opdo.Do[[]core.Change](ctx, p, core.SetManual{User: u, Manual: m, TTL: ttl})
			return abi.FromChanges(cs), err
		})
	case n < 62:
		name = "status"
		u := s.user()
		run(func(p core.Presence) (any, error) {
			st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: u})
			return abi.FromUserStatus(st), err
		})
	case n < 65:
		name = "statuses"
		users := append([]string(nil), parityUsers...)
		s.r.Shuffle(len(users), func(a, b int) { users[a], users[b] = users[b], users[a] })
		users = users[:1+s.r.IntN(len(users))]
		run(func(p core.Presence) (any, error) {
			ss, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: users})
			w := make([]abi.UserStatus, len(ss))
			for j := range ss {
				w[j] = abi.FromUserStatus(ss[j])
			}
			return w, err
		})
	case n < 73:
		name = "touch"
		touches := make([]core.ScopeTouch, 1+s.r.IntN(4))
		for j := range touches {
			touches[j] = core.ScopeTouch{Scope: s.scope(), Member: s.user()}
		}
		if s.r.IntN(15) == 0 {
			touches[0].Scope.Class = "nope"
		}
		run(func(p core.Presence) (any, error) {
			if len(touches) == 1 {
				return nil, opdo.Err(ctx, p, core.ScopeTouch{Scope: touches[0].Scope, Member: touches[0].Member})
			}
			return nil, opdo.Err(ctx, p, core.TouchBatch(touches))
		})
	case n < 76:
		name = "leave"
		sc, m := s.scope(), s.user()
		run(func(p core.Presence) (any, error) { return opdo.Do[bool](ctx, p, core.Leave{Scope: sc, Member: m}) })
	case n < 82:
		name = "count"
		sc := s.scope()
		run(func(p core.Presence) (any, error) {
			c, err := opdo.Do[core.Count](ctx, p, core.ReadCount{Scope: sc})
			return abi.FromCount(c), err
		})
	case n < 86:
		name = "members"
		sc := s.scope()
		cur := s.cursor[sc]
		if s.r.IntN(10) == 0 {
			cur = "junk"
		}
		limit := 1 + s.r.IntN(3)
		var next string
		run(func(p core.Presence) (any, error) {
			pg, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: sc, Cursor: cur, Limit: limit})
			next = pg.Next
			return abi.FromMemberPage(pg), err
		})
		s.cursor[sc] = next
	case n < 88:
		name = "active_within"
		sc := s.scope()
		d := time.Duration(s.r.IntN(700_000)) * time.Millisecond
		run(func(p core.Presence) (any, error) {
			return opdo.Do[int64](ctx, p, core.ReadActive{Scope: sc, Within: d})
		})
	case n < 94:
		name = "sweep_users"
		run(func(p core.Presence) (any, error) {
			r, err := opdo.Do[core.SweepReport](ctx, p, core.SweepUsers{})
			r.Duration = 0 // server time spent: both run at one virtual instant
			return abi.FromSweepReport(r), err
		})
	case n < 96:
		name = "online"
		run(func(p core.Presence) (any, error) {
			c, err := opdo.Do[map[core.Status]int64](ctx, p, core.ReadOnline{})
			return abi.FromOnline(c), err
		})
	case n < 98:
		name = "sweep_scopes"
		run(func(p core.Presence) (any, error) {
			r, err := opdo.Do[core.SweepReport](ctx, p, core.SweepScopes{})
			r.Duration = 0
			return abi.FromSweepReport(r), err
		})
	default:
		name = "change_log_after"
		after := []string{"", "0-0", "x"}[s.r.IntN(3)]
		limit := 1 + s.r.IntN(3)
		run(func(p core.Presence) (any, error) {
			page, err := opdo.Do[core.LogPage](ctx, p, core.ReadChangeLog{After: after, Limit: limit})
			return abi.FromChangeLog(page.Entries, page.Gap), err
		})
	}
	s.ops[name]++
	if obs[0] != obs[1] {
		s.t.Fatalf("step %d (%s) at %s differs:\nnative %s\nwasm   %s", i, name, s.clk.Now().Format(time.RFC3339Nano), obs[0], obs[1])
	}
}

func TestParity(t *testing.T) {
	seeds, steps := testtier.Pick(8, 24), 250
	if testing.Short() || raceEnabled {
		seeds, steps = 6, 150
	}
	total := map[string]int{}
	published := 0
	for seed := 1; seed <= seeds; seed++ {
		t.Run("seed"+strconv.Itoa(seed), func(t *testing.T) {
			ctx := context.Background()
			r := rand.New(rand.NewPCG(uint64(seed), 0x9a71))
			start := t0.Add(time.Duration(r.IntN(1_000_000)) * time.Millisecond)
			clk := &clock{t: start}
			cfg := parityConfig(r, clk.Now)
			tokenSeed := "parity-" + strconv.Itoa(seed)

			channels := []string{"presence:changes", "presence:kick:gw0", "presence:kick:gw1", "presence:kick:gw2"}
			nativeStore, nativeMR, nc := miniClient(t, start)
			nativePub := record(t, nc, channels...)
			ncfg := cfg
			ncfg.Rand = abi.SeededRand(tokenSeed)
			native, err := core.New(nativeStore, ncfg)
			if err != nil {
				t.Fatal(err)
			}
			wasmStore, wasmMR, wc := miniClient(t, start)
			wasmPub := record(t, wc, channels...)
			rt := runtimeT(t) // the hot path in the compact form
			if seed%3 == 0 {
				rt = runtimeJSONT(t) // every message in JSON
			}
			wasmEng, err := instanceOf(t, rt, wasmStore).Configure(ctx, cfg, host.EngineOptions{Seed: tokenSeed, Publish: true})
			if err != nil {
				t.Fatal(err)
			}
			s := &paritySeq{t: t, r: r, ctx: ctx, clk: clk, sides: [2]side{{native, nativeMR}, {wasmEng, wasmMR}},
				tokens: map[string]string{}, stale: map[string]string{}, cursor: map[core.Scope]string{}, ops: total}
			for i := 0; i < steps; i++ {
				s.step(i)
			}
			// Both published the same messages, in the same order.
			var a, b []string
			for wait := 0; wait < 100; wait++ {
				if a, b = nativePub.snapshot(), wasmPub.snapshot(); len(a) == len(b) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if strings.Join(a, "\n") != strings.Join(b, "\n") {
				t.Fatalf("published messages differ:\nnative %q\nwasm   %q", a, b)
			}
			published += len(a)
			// Both servers hold the same data, key for key.
			if a, b := dump(nativeMR), dump(wasmMR); a != b {
				t.Fatalf("servers differ after the run:\nnative %s\nwasm   %s", a, b)
			}
		})
	}
	t.Logf("operations compared: %v; messages published: %d", total, published)
}

// dump renders a server's keys and their contents.
func dump(mr *miniredis.Miniredis) string {
	var b strings.Builder
	for _, k := range mr.Keys() {
		fmt.Fprintf(&b, "%s(%s)", k, mr.Type(k))
		switch mr.Type(k) {
		case "hash":
			fields, _ := mr.HKeys(k)
			for _, f := range fields {
				fmt.Fprintf(&b, " %q=%q", f, mr.HGet(k, f))
			}
		case "zset":
			ms, _ := mr.ZMembers(k)
			for _, m := range ms {
				sc, _ := mr.ZScore(k, m)
				fmt.Fprintf(&b, " %q:%v", m, sc)
			}
		case "string":
			v, _ := mr.Get(k)
			fmt.Fprintf(&b, " %q", v)
		case "stream":
			es, _ := mr.Stream(k)
			fmt.Fprintf(&b, " %v", es)
		}
		fmt.Fprintf(&b, " ttl=%v;", mr.TTL(k))
	}
	return b.String()
}
