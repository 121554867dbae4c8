package fuzz

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// rules are a Config's effective timing parameters, derived by the test
// from the documented defaults (not read from the core), for the independent
// checks of docs/design.md §5 and §6. Like the core, they count whole
// milliseconds (docs/design.md §3: time is int64 milliseconds).
type rules struct {
	interval   [5]time.Duration
	idle, push time.Duration
}

func rulesOf(cfg core.Config) rules {
	or := func(d, def time.Duration) time.Duration {
		if d == 0 {
			d = def
		}
		return d.Truncate(time.Millisecond)
	}
	r := rules{idle: or(cfg.IdleAfter, 5*time.Minute), push: or(cfg.PushWindow, 10*time.Minute)}
	def := [5]time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second, time.Minute, time.Minute}
	for k := range def {
		r.interval[k] = def[k]
		if v, ok := cfg.Intervals[core.Kind(k)]; ok {
			r.interval[k] = v.Truncate(time.Millisecond)
		}
	}
	return r
}

// state is a device's state by the table of docs/design.md §5.
func (r rules) state(d core.Device, now time.Time) core.Status {
	age := now.Sub(d.LastSeen)
	switch {
	case d.Background && age > r.push:
		return core.StatusOffline
	case d.Background:
		return core.StatusPushOnline
	case age > 2*r.interval[d.Kind]:
		return core.StatusOffline
	case now.Sub(d.LastActive) >= r.idle:
		return core.StatusAway
	}
	return core.StatusOnline
}

// aggregate is a user's status by the rules of docs/design.md §6.
func aggregate(devices []core.Device, manual core.Manual) core.Status {
	rank := map[core.Status]int{core.StatusPushOnline: 1, core.StatusAway: 2, core.StatusOnline: 3}
	best := core.StatusOffline
	for _, d := range devices {
		if rank[d.State] > rank[best] {
			best = d.State
		}
	}
	switch {
	case best == core.StatusOffline:
		return core.StatusOffline
	case manual == core.ManualDND:
		return core.StatusDND
	case manual == core.ManualInvisible:
		return core.StatusOffline
	}
	return best
}

// checkStatus holds one observed UserStatus to the design: every listed
// device is live and in the state the table gives for its own fields, an
// expired manual status is not shown, and the aggregate follows.
func (r rules) checkStatus(t testing.TB, who string, st core.UserStatus, now time.Time) {
	t.Helper()
	if !validStatus(st.Status) {
		t.Errorf("%s: Status(%q) = %v, not a status", who, st.User, st.Status)
	}
	if !st.ManualUntil.IsZero() && !now.Before(st.ManualUntil) && st.Manual != core.ManualNone {
		t.Errorf("%s: Status(%q) shows manual %v past its expiry %v", who, st.User, st.Manual, st.ManualUntil)
	}
	for _, d := range st.Devices {
		want := r.state(d, now)
		if want == core.StatusOffline {
			t.Errorf("%s: Status(%q) lists device %q, offline by the table (%s)", who, st.User, d.ID, renderDevice(d))
		} else if d.State != want {
			t.Errorf("%s: device %q of %q is %v, the table says %v (%s, now %d)", who, d.ID, st.User, d.State, want, renderDevice(d), now.UnixMilli())
		}
	}
	if want := aggregate(st.Devices, st.Manual); st.Status != want {
		t.Errorf("%s: Status(%q) = %v, the rules say %v (%s)", who, st.User, st.Status, want, renderStatus(st))
	}
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func renderDevice(d core.Device) string {
	keys := make([]string, 0, len(d.Meta))
	for k := range d.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var meta []string
	for _, k := range keys {
		meta = append(meta, fmt.Sprintf("%q=%q", k, d.Meta[k]))
	}
	return fmt.Sprintf("%q %v gw=%q %v bg=%v login=%d seen=%d active=%d meta={%s}", d.ID, d.Kind, d.Gateway,
		d.State, d.Background, ms(d.LoginAt), ms(d.LastSeen), ms(d.LastActive), strings.Join(meta, ","))
}

func renderStatus(st core.UserStatus) string {
	out := fmt.Sprintf("%q %v manual=%v until=%d at=%d", st.User, st.Status, st.Manual, ms(st.ManualUntil), ms(st.At))
	for _, d := range st.Devices {
		out += " [" + renderDevice(d) + "]"
	}
	return out
}

func renderChanges(cs []core.Change) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%q:%v→%v@%d", c.User, c.From, c.To, ms(c.At))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// trace logs every operation of the lockstep targets; set FUZZ_TRACE=1 to
// read the story of a failing input.
var trace = os.Getenv("FUZZ_TRACE") != ""

// detRand is a deterministic core.Config.Rand (splitmix64), so that a
// failing fuzz input replays exactly and the engine and the model, each
// with its own detRand, issue the same tokens.
type detRand struct{ s uint64 }

func (r *detRand) Read(p []byte) (int, error) {
	var b [8]byte
	for i := 0; i < len(p); i += 8 {
		r.s += 0x9e3779b97f4a7c15
		z := r.s
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(b[:], z^z>>31)
		copy(p[i:], b[:])
	}
	return len(p), nil
}

// obs is what one backend observed of one operation.
type obs struct {
	text    string        // everything that must be equal
	changes []core.Change // published changes, in order
	err     error
	n       int64 // a count that may be estimated (approx layout)
	fuzzy   bool  // n is an estimate
}

// approxBuckets bounds the HyperLogLog buckets one approx count reads: a
// window of the default ten buckets, plus the partial buckets at both ends.
const approxBuckets = 12

// pair drives an Engine on miniredis and the Model in lockstep on one clock,
// comparing every observation and checking the design's invariants.
type pair struct {
	t     testing.TB
	ctx   context.Context
	m     *mini
	eng   *core.Engine
	mod   *core.Model
	r     rules
	now   time.Time
	users []string
	// pub is each user's last published status, from the engine's changes:
	// consecutive changes of one user must chain.
	pub    map[string]core.Status
	tokens [2]map[string][]string // per backend: user\x00device → tokens issued, oldest first
}

// newPair returns a pair on cfg (its Clock and Rand are set here), or nil
// and the configuration error.
func newPair(t testing.TB, cfg core.Config, users []string) (*pair, error) {
	m := newMini(t, t0)
	cfg.Clock = m.clk.Now
	ecfg, mcfg := cfg, cfg
	ecfg.Rand, mcfg.Rand = &detRand{}, &detRand{}
	eng, err := core.New(m.rec, ecfg)
	if err != nil {
		return nil, err
	}
	mod, err := core.NewModel(mcfg)
	if err != nil {
		t.Fatalf("core.New accepted a config that core.NewModel refuses: %v", err)
	}
	if trace {
		t.Logf("config %+v", cfg)
	}
	return &pair{t: t, ctx: context.Background(), m: m, eng: eng, mod: mod, r: rulesOf(cfg), now: t0,
		users: users, pub: map[string]core.Status{}, tokens: [2]map[string][]string{{}, {}}}, nil
}

// advance moves the clock by d. miniredis expires a key when its TTL reaches
// zero, Redis (and so the model) one millisecond later; landing exactly on
// an expiry would show that difference, so such an instant is skipped.
func (p *pair) advance(d time.Duration) {
	target := p.now.Add(d)
	for {
		tie := false
		for _, k := range p.m.mr.Keys() {
			if ttl := p.m.mr.TTL(k); ttl > 0 && p.now.Add(ttl).Equal(target) {
				tie = true
			}
		}
		if !tie {
			break
		}
		target = target.Add(time.Millisecond)
	}
	p.now = target
	p.m.set(target)
	if trace {
		p.t.Logf("advance by %d ms to t0+%d", d.Milliseconds(), p.now.Sub(t0).Milliseconds())
	}
}

// both runs op on the engine (i = 0) and the model (i = 1) and compares.
func (p *pair) both(what string, op func(i int, b core.Presence) obs) obs {
	p.t.Helper()
	var o [2]obs
	for i, b := range []core.Presence{p.eng, p.mod} {
		o[i] = op(i, b)
	}
	e, m := o[0], o[1]
	if trace {
		p.t.Logf("t0+%d %s: %s %s %s", p.now.Sub(t0).Milliseconds(), what, errName(e.err), e.text, renderChanges(e.changes))
	}
	if errName(e.err) != errName(m.err) {
		p.t.Fatalf("%s at %d: engine %v, model %v", what, p.now.UnixMilli(), e.err, m.err)
	}
	if e.text != m.text {
		p.t.Fatalf("%s at %d:\nengine %s\nmodel  %s", what, p.now.UnixMilli(), e.text, m.text)
	}
	if ec, mc := renderChanges(e.changes), renderChanges(m.changes); ec != mc {
		p.t.Fatalf("%s at %d: changes differ:\nengine %s\nmodel  %s", what, p.now.UnixMilli(), ec, mc)
	}
	if e.n < 0 || m.n < 0 {
		p.t.Fatalf("%s: negative count: engine %d, model %d", what, e.n, m.n)
	}
	if e.fuzzy {
		// HyperLogLog: about 1% error, exact for a handful of members. But
		// miniredis' PFCOUNT of several keys sums their counts where Redis
		// counts their union (miniredis v2.40.0, db.go hllCount), so a
		// member touched in several buckets of the window counts once per
		// bucket: the engine may only be bounded by the buckets of a window
		// (at most approxBuckets) here.
		tol := 1 + m.n/50
		if e.n < m.n-tol || e.n > (m.n+tol)*approxBuckets {
			p.t.Fatalf("%s: approx count %d, model %d", what, e.n, m.n)
		}
	} else if e.n != m.n {
		p.t.Fatalf("%s: count: engine %d, model %d", what, e.n, m.n)
	}
	p.chain(what, e.changes)
	return e
}

// chain checks published changes: never From == To, stamped now, and each
// user's changes continue from the last one published.
func (p *pair) chain(what string, cs []core.Change) {
	p.t.Helper()
	for _, c := range cs {
		if c.From == c.To {
			p.t.Fatalf("%s: change %q %v→%v publishes no change", what, c.User, c.From, c.To)
		}
		if !validStatus(c.From) || !validStatus(c.To) {
			p.t.Fatalf("%s: change %q %v→%v", what, c.User, c.From, c.To)
		}
		if prev := p.pub[c.User]; c.From != prev {
			p.t.Fatalf("%s: change %q %v→%v, but %v was published last", what, c.User, c.From, c.To, prev)
		}
		if !c.At.Equal(p.now) {
			p.t.Fatalf("%s: change stamped %d at %d", what, ms(c.At), p.now.UnixMilli())
		}
		p.pub[c.User] = c.To
	}
}

// observe reads every user's status from both backends, compares them and
// holds the engine's to the design.
func (p *pair) observe() []core.UserStatus {
	p.t.Helper()
	var out []core.UserStatus
	p.both("Statuses", func(i int, b core.Presence) obs {
		sts, err := opdo.Do[[]core.UserStatus](p.ctx, b, core.ReadStatuses{Users: p.users})
		var text []string
		for _, st := range sts {
			if i == 0 {
				p.r.checkStatus(p.t, "engine", st, p.now)
				out = append(out, st)
			}
			text = append(text, renderStatus(st))
		}
		return obs{text: strings.Join(text, "\n       "), err: err}
	})
	return out
}

func tokenKey(user, device string) string { return user + "\x00" + device }

// token picks the token a request carries by mode: none, the latest issued
// to the device, its first (stale once replaced), or one never issued.
func (p *pair) token(i int, user, device string, mode int) string {
	hist := p.tokens[i][tokenKey(user, device)]
	switch {
	case mode == 1 && len(hist) > 0:
		return hist[len(hist)-1]
	case mode == 2 && len(hist) > 0:
		return hist[0]
	case mode == 3:
		return "bogus-token"
	}
	return ""
}

func (p *pair) issued(i int, user, device, token string) {
	k := tokenKey(user, device)
	if token != "" && !slices.Contains(p.tokens[i][k], token) {
		p.tokens[i][k] = append(p.tokens[i][k], token)
	}
}

// beat is a heartbeat whose token is chosen per backend.
type beat struct {
	hb        core.Heartbeat
	tokenMode int
}

func (p *pair) heartbeats(beats []beat) {
	p.t.Helper()
	p.both(fmt.Sprintf("HeartbeatBatch(%d)", len(beats)), func(i int, b core.Presence) obs {
		hbs := make([]core.Heartbeat, len(beats))
		for j, bt := range beats {
			hbs[j] = bt.hb
			hbs[j].Token = p.token(i, bt.hb.User, bt.hb.Device, bt.tokenMode)
		}
		acks, err := opdo.Do[[]core.Ack](p.ctx, b, core.HeartbeatBatch(hbs))
		var o obs
		o.err = err
		for j, a := range acks {
			o.text += fmt.Sprintf("[%s token=%v] ", errName(a.Err), a.Token != "")
			if a.Err == nil && a.Token == "" {
				p.t.Fatalf("accepted heartbeat %d without a token in force", j)
			}
			if a.Err == nil {
				p.issued(i, hbs[j].User, hbs[j].Device, a.Token)
			}
			o.changes = append(o.changes, a.Changes...)
		}
		return o
	})
}

func (p *pair) login(l core.Login) {
	p.t.Helper()
	p.both("Login", func(i int, b core.Presence) obs {
		res, err := opdo.Do[core.LoginResult](p.ctx, b, l)
		o := obs{err: err, changes: res.Changes}
		if err == nil {
			if res.Token == "" {
				p.t.Fatal("login without a token")
			}
			p.issued(i, l.User, l.Device, res.Token)
		}
		for _, k := range res.Kicked {
			o.text += fmt.Sprintf("kicked %q/%q %v %q %d; ", k.User, k.Device, k.Kind, k.Gateway, ms(k.At))
		}
		return o
	})
}

func (p *pair) end(logout bool, user, device string, tokenMode int) {
	p.t.Helper()
	p.both(fmt.Sprintf("end(logout=%v)", logout), func(i int, b core.Presence) obs {
		tok := p.token(i, user, device, tokenMode)
		var r core.Ended
		var err error
		if logout {
			r, err = opdo.Do[core.Ended](p.ctx, b, core.Logout{User: user, Device: device, Token: tok})
		} else {
			r, err = opdo.Do[core.Ended](p.ctx, b, core.Disconnect{User: user, Device: device, Token: tok})
		}
		return obs{text: fmt.Sprint(r.Removed), changes: r.Changes, err: err}
	})
}

func (p *pair) manual(user string, m core.Manual, ttl time.Duration) {
	p.t.Helper()
	p.both("SetManual", func(i int, b core.Presence) obs {
		cs, err := opdo.Do[[]core.Change](p.ctx, b, core.SetManual{User: user, Manual: m, TTL: ttl})
		return obs{changes: cs, err: err}
	})
}

func (p *pair) sweepUsers() {
	p.t.Helper()
	p.both("SweepUsers", func(i int, b core.Presence) obs {
		// Visited is left out: the engine settles every user of a due page
		// (core/lua/recordlib.lua), the model only the users due; both
		// publish the same changes, compared here.
		r, err := opdo.Do[core.SweepReport](p.ctx, b, core.SweepUsers{})
		return obs{changes: r.Changes, err: err}
	})
}

func (p *pair) sweepScopes() {
	p.t.Helper()
	p.both("SweepScopes", func(i int, b core.Presence) obs {
		r, err := opdo.Do[core.SweepReport](p.ctx, b, core.SweepScopes{})
		if len(r.Changes) > 0 {
			p.t.Fatalf("a scope sweep published user changes: %v", renderChanges(r.Changes))
		}
		return obs{text: fmt.Sprintf("visited=%d removed=%d released=%d", r.Visited, r.Removed, r.Released), err: err}
	})
}

func (p *pair) touch(ts []core.ScopeTouch) {
	p.t.Helper()
	p.both("TouchBatch", func(i int, b core.Presence) obs {
		return obs{text: fmt.Sprint(ts), err: opdo.Err(p.ctx, b, core.TouchBatch(ts))}
	})
}

func (p *pair) leave(sc core.Scope, member string) {
	p.t.Helper()
	p.both("Leave", func(i int, b core.Presence) obs {
		ok, err := opdo.Do[bool](p.ctx, b, core.Leave{Scope: sc, Member: member})
		return obs{text: fmt.Sprint(ok), err: err}
	})
}

func (p *pair) count(sc core.Scope, fuzzy bool) {
	p.t.Helper()
	p.both("Count "+sc.String(), func(i int, b core.Presence) obs {
		c, err := opdo.Do[core.Count](p.ctx, b, core.ReadCount{Scope: sc})
		return obs{text: fmt.Sprintf("asOf=%d stale=%v", ms(c.AsOf), c.Stale), n: c.N, fuzzy: fuzzy, err: err}
	})
}

func (p *pair) activeWithin(sc core.Scope, d time.Duration, fuzzy bool) {
	p.t.Helper()
	p.both("ActiveWithin "+sc.String(), func(i int, b core.Presence) obs {
		n, err := opdo.Do[int64](p.ctx, b, core.ReadActive{Scope: sc, Within: d})
		return obs{n: n, fuzzy: fuzzy, err: err}
	})
}

// members pages through the scope with limit, following Next; every cursor
// the engine hands out must be one it accepts.
func (p *pair) members(sc core.Scope, limit int) {
	p.t.Helper()
	p.both("Members "+sc.String(), func(i int, b core.Presence) obs {
		var text []string
		cursor := ""
		for range 100 {
			page, err := opdo.Do[core.MemberPage](p.ctx, b, core.ReadMembers{Scope: sc, Cursor: cursor, Limit: limit})
			if err != nil {
				return obs{text: strings.Join(text, " | "), err: err}
			}
			if len(page.Members) > limit {
				p.t.Fatalf("Members(%v, limit %d) returned %d", sc, limit, len(page.Members))
			}
			var ids []string
			for _, m := range page.Members {
				ids = append(ids, fmt.Sprintf("%q@%d", m.ID, ms(m.LastSeen)))
			}
			text = append(text, strings.Join(ids, " "))
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		return obs{text: strings.Join(text, " | ")}
	})
}

// quiesce moves far past every window and delay and sweeps until nothing is
// pending: every user must then be OFFLINE, and the last change published
// for each must have said so (no OFFLINE is ever lost).
func (p *pair) quiesce(longest time.Duration) {
	p.t.Helper()
	p.advance(longest + time.Hour + 7*time.Millisecond)
	p.sweepUsers()
	p.advance(longest + 13*time.Millisecond)
	p.sweepUsers()
	p.observe()
	for _, u := range p.users {
		if p.pub[u] != core.StatusOffline {
			p.t.Fatalf("after quiescence %q was last published %v, want OFFLINE", u, p.pub[u])
		}
	}
}
