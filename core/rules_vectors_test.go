package core

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/presencekit/presence/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The state rules live in Go (rules.go) and in Lua (userlib.lua, and inline
// in heartbeat_steady.lua). testdata/rules.json holds them as vectors, and
// TestRuleVectors runs every vector against each copy.

type ruleVectors struct {
	T0      string            `json:"t0"`
	Config  map[string]string `json:"config"`
	Users   []userVector      `json:"users"`
	Records []recordVector    `json:"records"`
}

type userVector struct {
	Name      string            `json:"name"`
	Now       string            `json:"now"`
	Config    map[string]string `json:"config"`
	Manual    string            `json:"manual"`
	Devices   []deviceVector    `json:"devices"`
	Aggregate string            `json:"aggregate"`
	Debounce  *struct {
		Cause     string         `json:"cause"`
		Before    debounceVector `json:"before"`
		After     debounceVector `json:"after"`
		Published []string       `json:"published"`
	} `json:"debounce"`
}

type deviceVector struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	Gateway    string `json:"gateway"`
	Token      string `json:"token"`
	Interval   string `json:"interval"`
	Login      string `json:"login"`
	Seen       string `json:"seen"`
	Active     string `json:"active"`
	Background bool   `json:"background"`
	Gone       bool   `json:"gone"`
	Fenced     bool   `json:"fenced"`
	Meta       string `json:"meta"`
	State      string `json:"state"`
}

type debounceVector struct {
	Pub     string `json:"pub"`
	Pending string `json:"pending"`
	Due     string `json:"due"`
}

type recordVector struct {
	Name    string       `json:"name"`
	Static  string       `json:"static"`  // a device's static item, device ID "dev"
	Dynamic string       `json:"dynamic"` // its dynamic item
	Record  deviceVector `json:"record"`
}

// vectorEnv resolves the names of one vector file: instants ("t0+61s"),
// durations, statuses, kinds and causes.
type vectorEnv struct {
	t  *testing.T
	t0 int64
}

func (v vectorEnv) instant(s string) int64 {
	v.t.Helper()
	if s == "" {
		return 0
	}
	if s == "t0" {
		return v.t0
	}
	if !strings.HasPrefix(s, "t0+") && !strings.HasPrefix(s, "t0-") {
		v.t.Fatalf("instant %q: want t0, t0+DURATION or t0-DURATION", s)
	}
	d, err := time.ParseDuration(s[2:])
	if err != nil {
		v.t.Fatalf("instant %q: %v", s, err)
	}
	return v.t0 + d.Milliseconds()
}

func (v vectorEnv) ms(s string) int64 {
	v.t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		v.t.Fatalf("duration %q: %v", s, err)
	}
	return d.Milliseconds()
}

func (v vectorEnv) status(s string) Status {
	v.t.Helper()
	st, ok := Parse[Status](s)
	if !ok {
		v.t.Fatalf("status %q", s)
	}
	return st
}

func (v vectorEnv) kind(s string) Kind {
	v.t.Helper()
	k, ok := Parse[Kind](s)
	if !ok {
		v.t.Fatalf("kind %q", s)
	}
	return k
}

func (v vectorEnv) manual(s string) Manual {
	v.t.Helper()
	if s == "" {
		return ManualNone
	}
	m, ok := Parse[Manual](s)
	if !ok {
		v.t.Fatalf("manual %q", s)
	}
	return m
}

func (v vectorEnv) cause(s string) cause {
	v.t.Helper()
	switch s {
	case "change":
		return causeChange
	case "leave":
		return causeLeave
	case "logout":
		return causeLogout
	}
	v.t.Fatalf("cause %q", s)
	return 0
}

// record returns a device vector's record. A device of a user vector
// without a token gets "tok-" and its ID: the steady beat answers a beat it
// applies with the session's token.
func (v vectorEnv) record(d deviceVector) record {
	token := d.Token
	if token == "" && d.ID != "" {
		token = "tok-" + d.ID
	}
	return record{kind: v.kind(d.Kind), gateway: d.Gateway, token: token, loginAt: v.instant(d.Login),
		seen: v.instant(d.Seen), active: v.instant(d.Active), background: d.Background,
		interval: v.ms(d.Interval), gone: d.Gone, meta: d.Meta}
}

// settings returns the configuration of vector u: the file's, with u's
// own over it.
func (v vectorEnv) settings(file, own map[string]string) *settings {
	v.t.Helper()
	c := map[string]string{}
	for k, x := range file {
		c[k] = x
	}
	for k, x := range own {
		c[k] = x
	}
	d := func(k string) time.Duration { return time.Duration(v.ms(c[k])) * time.Millisecond }
	cfg := Config{IdleAfter: d("idle"), PushWindow: d("push"), LeaveDelay: d("leave"), CoalesceWindow: d("coalesce")}
	for _, p := range []*time.Duration{&cfg.LeaveDelay, &cfg.CoalesceWindow} {
		if *p == 0 {
			*p = -1 // Config's zero is the default; a negative one is none
		}
	}
	s, err := newSettings(cfg)
	if err != nil {
		v.t.Fatal(err)
	}
	if s.idle != v.ms(c["idle"]) || s.push != v.ms(c["push"]) || s.leave != v.ms(c["leave"]) || s.coalesce != v.ms(c["coalesce"]) {
		v.t.Fatalf("config %v gave idle %d push %d leave %d coalesce %d", c, s.idle, s.push, s.leave, s.coalesce)
	}
	return s
}

func loadRuleVectors(t *testing.T) (ruleVectors, vectorEnv) {
	t.Helper()
	b, err := os.ReadFile("testdata/rules.json")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleVectors
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	t0, err := time.Parse(time.RFC3339, f.T0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Users) == 0 || len(f.Records) == 0 {
		t.Fatal("no vectors")
	}
	return f, vectorEnv{t: t, t0: t0.UnixMilli()}
}

// userOutcome is what one user vector decides.
type userOutcome struct {
	states    []Status
	aggregate Status
	after     debounce
	from, to  Status
	published bool
}

func (o userOutcome) String() string {
	s := make([]string, len(o.states))
	for i, st := range o.states {
		s[i] = st.String()
	}
	out := fmt.Sprintf("states [%s] aggregate %s, then pub %s", strings.Join(s, " "), o.aggregate, o.after.pub)
	if o.after.pending {
		out += fmt.Sprintf(" pending %s due %d", o.after.pend, o.after.due)
	} else if o.after.due != 0 {
		out += fmt.Sprintf(" due %d with nothing pending", o.after.due)
	}
	if o.published {
		out += fmt.Sprintf(", published %s→%s", o.from, o.to)
	}
	return out
}

// want returns what vector u says, and the debounce state before it.
func (v vectorEnv) want(u userVector) (userOutcome, debounce, cause) {
	var o userOutcome
	for _, d := range u.Devices {
		o.states = append(o.states, v.status(d.State))
	}
	o.aggregate = v.status(u.Aggregate)
	before, c := debounce{}, causeChange
	o.after = debounce{}
	if db := u.Debounce; db != nil {
		c = v.cause(db.Cause)
		before = v.debounceOf(db.Before)
		o.after = v.debounceOf(db.After)
		if len(db.Published) == 2 {
			o.from, o.to, o.published = v.status(db.Published[0]), v.status(db.Published[1]), true
		}
	}
	return o, before, c
}

func (v vectorEnv) debounceOf(d debounceVector) debounce {
	out := debounce{pub: v.status(d.Pub)}
	if d.Pending != "" {
		out.pending, out.pend, out.due = true, v.status(d.Pending), v.instant(d.Due)
	}
	return out
}

// goOutcome runs vector u through rules.go.
func goOutcome(v vectorEnv, s *settings, u userVector, before debounce, c cause) userOutcome {
	var o userOutcome
	now := v.instant(u.Now)
	for _, d := range u.Devices {
		o.states = append(o.states, s.state(v.record(d), now))
	}
	o.aggregate = aggregate(o.states, v.manual(u.Manual))
	o.after = before
	if u.Debounce != nil {
		o.from, o.to, o.published = o.after.observe(o.aggregate, c, now, s)
	}
	return o
}

// luaRunner evaluates the rules' Lua on one server.
type luaRunner struct {
	ctx    context.Context
	c      *redis.Client
	eval   string // recordlib.lua, userlib.lua and testdata/rules_eval.lua
	steady string // the steady beat, as the engine sends it
}

func newLuaRunner(t *testing.T, c *redis.Client) *luaRunner {
	wrapper, err := os.ReadFile("testdata/rules_eval.lua")
	if err != nil {
		t.Fatal(err)
	}
	return &luaRunner{ctx: context.Background(), c: c,
		eval:   inlineLua(t, joinLua("recordlib", "userlib")+string(wrapper)+"\n"),
		steady: engineScripts().beat.Source()}
}

// commonArgs are the common ARGV of a user script (userlib.lua) for s at now.
func commonArgs(s *settings, now int64) []any {
	return []any{itoa(now), itoa(s.idle), itoa(s.push), itoa(s.leave), itoa(s.coalesce), itoa(s.keep),
		"P:{u0}:p:", "16", itoa(s.skew), "0", "P:{u0}:cnt", itoa(s.fence), "P:{u0}:ob", "0"}
}

// leftArg is the steady beat's ARG_LEFT (lua/heartbeat_steady.lua) for s,
// as commonArgs has them, with no token seed.
func leftArg(s *settings) string {
	left := []string{itoa(s.skew), itoa(s.leave), itoa(s.coalesce), "16", "0", itoa(s.fence), itoa(leftChunk), "0", "",
		sufPage, sufCounts, sufOutbox, sufDue, sufManual}
	return strings.Join(append(left, s.intervalArgs[:]...), unitSep)
}

// userOutcome runs vector u through userlib.lua, and returns also the stored
// form of each device record.
func (l *luaRunner) userOutcome(t *testing.T, v vectorEnv, s *settings, u userVector, before debounce, c cause) (userOutcome, [][2]string) {
	t.Helper()
	now := v.instant(u.Now)
	devs := []map[string]any{}
	for _, d := range u.Devices {
		r := v.record(d)
		devs = append(devs, map[string]any{"id": d.ID, "kind": kindCodes[r.kind], "gw": r.gateway, "token": r.token,
			"login": r.loginAt, "iv": r.interval, "meta": r.meta, "seen": r.seen, "active": r.active,
			"bg": r.background, "gone": r.gone, "fenced": d.Fenced})
	}
	pend := int64(-1)
	if before.pending {
		pend = int64(before.pend)
	}
	causes := map[cause]string{causeChange: "change", causeLeave: "leave", causeLogout: "logout"}
	cs := ""
	if u.Debounce != nil {
		cs = causes[c]
	}
	in, _ := json.Marshal(map[string]any{"devices": devs, "manual": int(v.manual(u.Manual)), "pub": int(before.pub),
		"pend": pend, "due": before.due, "cause": cs})
	args := append(commonArgs(s, now), "user", string(in))
	res, err := l.c.Eval(l.ctx, l.eval, nil, args...).Text()
	if err != nil {
		t.Fatalf("rules_eval.lua: %v", err)
	}
	var out struct {
		States    string          `json:"states"`
		Aggregate float64         `json:"aggregate"`
		Pub       float64         `json:"pub"`
		Pend      float64         `json:"pend"`
		Due       float64         `json:"due"`
		From      float64         `json:"from"`
		To        float64         `json:"to"`
		Stored    json.RawMessage `json:"stored"`
	}
	if err := json.Unmarshal([]byte(res), &out); err != nil {
		t.Fatalf("rules_eval.lua returned %s: %v", res, err)
	}
	var o userOutcome
	if out.States != "," {
		for _, f := range strings.Split(strings.TrimPrefix(out.States, ","), ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("rules_eval.lua returned states %q", out.States)
			}
			o.states = append(o.states, Status(n))
		}
	}
	o.aggregate = Status(out.Aggregate)
	o.after.pub = Status(out.Pub)
	if out.Pend >= 0 {
		o.after.pending, o.after.pend = true, Status(out.Pend)
	}
	o.after.due = int64(out.Due)
	if out.From >= 0 {
		o.from, o.to, o.published = Status(out.From), Status(out.To), true
	}
	var stored [][2]string
	if string(out.Stored) != "{}" { // cjson writes an empty table as an object
		if err := json.Unmarshal(out.Stored, &stored); err != nil {
			t.Fatalf("rules_eval.lua returned stored %s: %v", out.Stored, err)
		}
	}
	if len(stored) != len(u.Devices) {
		t.Fatalf("rules_eval.lua stored %d records for %d devices", len(stored), len(u.Devices))
	}
	return o, stored
}

// steadyBeat stores a device's item as a user's only one, in the page a
// fresh bucket has, with nothing pending and the device's state st
// published, offers the steady beat a beat of
// it at now (its own token and background flag, active or not), and
// reports whether the script applied it. It offers the beat twice, from
// the same records: as a beat with nothing extra, which the script's
// single-device path takes, and with an empty gateway, client time and
// metadata, which only its general path takes; the two must agree. A beat
// the script leaves it decides on the full path in the same call, which
// replies with a table.
func (l *luaRunner) steadyBeat(t *testing.T, v vectorEnv, s *settings, now int64, stored [2]string, d deviceVector, st Status, active bool) bool {
	t.Helper()
	flags := 0
	if active {
		flags++
	}
	if d.Background {
		flags += 2
	}
	var applied [2]bool
	for i, extra := range []string{"", unitSep + unitSep} {
		page := "P:{u0}:p:0"
		l.c.Del(l.ctx, page)
		if err := l.c.HSet(l.ctx, "P:{u0}:m", "v", "2", "L", "0", "s", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.c.HSet(l.ctx, page, "vector", itoa(int64(st))+itemSep+stored[0], dynPrefix+"vector", unitSep+itemSep+stored[1]).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := l.c.Eval(l.ctx, l.steady, []string{"P:{u0}:big", "P:{u0}:m"}, itoa(now), "P:{u0}:p:", itoa(s.push),
			itoa(s.keep), itoa(s.idle), leftArg(s), "vector", d.ID, v.record(d).token, "0",
			itoa(int64(flags)), kindCodes[v.record(d).kind]+extra).Result()
		if err != nil {
			t.Fatalf("steady beat: %v", err)
		}
		tokens, ok := res.(string)
		applied[i] = ok && tokens != ""
	}
	if applied[0] != applied[1] {
		t.Errorf("steady beat of %s at %d: the single-device path applied it %v, the general path %v", d.ID, now, applied[0], applied[1])
	}
	return applied[0]
}

// recordOutcome runs a record vector through userlib.lua: the fields
// decodeItem reads, and the item encoded again.
func (l *luaRunner) recordOutcome(t *testing.T, v vectorEnv, s *settings, r recordVector) (deviceVector, string, string) {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"static": r.Static, "dynamic": r.Dynamic})
	res, err := l.c.Eval(l.ctx, l.eval, nil, append(commonArgs(s, v.t0), "record", string(in))...).Text()
	if err != nil {
		t.Fatalf("rules_eval.lua: %v", err)
	}
	var out struct {
		Record struct {
			Kind, Gw, Token, Meta   string
			Login, Iv, Seen, Active float64
			Bg, Gone, Fenced        bool
		} `json:"record"`
		Static, Dynamic string
	}
	if err := json.Unmarshal([]byte(res), &out); err != nil {
		t.Fatalf("rules_eval.lua returned %s: %v", res, err)
	}
	k, err := strconv.Atoi(out.Record.Kind)
	if err != nil || !inRange(int64(k), len(kindNames)) {
		t.Fatalf("rules_eval.lua returned kind %q", out.Record.Kind)
	}
	ms := func(x float64) string { return "t0" + fmt.Sprintf("%+dms", int64(x)-v.t0) }
	got := deviceVector{Kind: Kind(k).String(), Gateway: out.Record.Gw, Token: out.Record.Token,
		Interval: (time.Duration(out.Record.Iv) * time.Millisecond).String(), Login: ms(out.Record.Login),
		Seen: ms(out.Record.Seen), Active: ms(out.Record.Active), Background: out.Record.Bg, Gone: out.Record.Gone,
		Fenced: out.Record.Fenced, Meta: out.Record.Meta}
	return got, out.Static, out.Dynamic
}

// sameDevice compares a record's fields with a vector's, instants and
// durations by value.
func sameDevice(v vectorEnv, got, want deviceVector, fenced bool) bool {
	return got.Kind == want.Kind && got.Gateway == want.Gateway && got.Token == want.Token &&
		v.ms(got.Interval) == v.ms(want.Interval) && v.instant(got.Login) == v.instant(want.Login) &&
		v.instant(got.Seen) == v.instant(want.Seen) && v.instant(got.Active) == v.instant(want.Active) &&
		got.Background == want.Background && got.Gone == want.Gone && got.Meta == want.Meta &&
		(!fenced || got.Fenced == want.Fenced)
}

func sameOutcome(a, b userOutcome) bool { return a.String() == b.String() }

// TestRuleVectors runs testdata/rules.json against the Go rules, and
// against the Lua rules on miniredis and on a real redis-server (skipped
// where none is installed): userlib.lua's through testdata/rules_eval.lua,
// and the steady beat's inline copy through the steady beat itself.
func TestRuleVectors(t *testing.T) {
	f, v := loadRuleVectors(t)
	t.Run("go", func(t *testing.T) {
		v := vectorEnv{t: t, t0: v.t0}
		for _, u := range f.Users {
			s := v.settings(f.Config, u.Config)
			want, before, c := v.want(u)
			if got := goOutcome(v, s, u, before, c); !sameOutcome(got, want) {
				t.Errorf("%s:\n got  %s\n want %s", u.Name, got, want)
			}
		}
		for _, r := range f.Records {
			id, got, err := decodeItem(r.Static, r.Dynamic)
			if err != nil {
				t.Errorf("%s: %v", r.Name, err)
				continue
			}
			if want := v.record(r.Record); got != want || id != "dev" {
				t.Errorf("%s: decodeItem\n got  %q %+v\n want \"dev\" %+v", r.Name, id, got, want)
			}
		}
	})
	servers := []struct {
		name string
		open func(t *testing.T) *redis.Client
	}{
		{"miniredis", func(t *testing.T) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
		}},
		{"redis-server", func(t *testing.T) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: redistest.Server(t).Addr})
		}},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			c := srv.open(t)
			t.Cleanup(func() { c.Close() })
			v := vectorEnv{t: t, t0: v.t0}
			l := newLuaRunner(t, c)
			for _, u := range f.Users {
				s := v.settings(f.Config, u.Config)
				want, before, cs := v.want(u)
				got, stored := l.userOutcome(t, v, s, u, before, cs)
				if !sameOutcome(got, want) {
					t.Errorf("userlib.lua, %s:\n got  %s\n want %s", u.Name, got, want)
				}
				// The steady beat applies a beat exactly when the device is
				// live and the beat changes its state in nothing.
				now := v.instant(u.Now)
				for i, d := range u.Devices {
					st := want.states[i]
					for _, active := range []bool{false, true} {
						wantSteady := st != StatusOffline && !(active && st == StatusAway)
						if got := l.steadyBeat(t, v, s, now, stored[i], d, st, active); got != wantSteady {
							t.Errorf("heartbeat_steady.lua, %s: a beat (active %v) of %s, %s: steady %v, want %v",
								u.Name, active, d.ID, st, got, wantSteady)
						}
					}
				}
			}
			for _, r := range f.Records {
				s := v.settings(f.Config, nil)
				got, static, dynamic := l.recordOutcome(t, v, s, r)
				if !sameDevice(v, got, r.Record, true) {
					t.Errorf("%s: decode\n got  %+v\n want %+v", r.Name, got, r.Record)
				}
				if static != r.Static || dynamic != r.Dynamic {
					t.Errorf("%s: encoded again\n got  %q %q\n want %q %q", r.Name, static, dynamic, r.Static, r.Dynamic)
				}
			}
		})
	}
}
