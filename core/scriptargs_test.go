package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/core/internal/luabuild"
	"github.com/presencekit/presence/internal/luascripts"
)

// The user scripts name their ARGV positions, and the statuses, manual
// statuses, policies and kinds they compare, once, as locals at their top
// (userlib.lua for what every user script shares). The engine builds the
// same arguments by the order it appends them in. The tests here hold the
// two together: they record the arguments the engine sends and check the
// value at each named position, and they check each named number against
// the Go constant it stands for.

// luaNames returns the constants "local NAME = EXPR" that the files define
// at their top level, EXPR being a number, a quoted string, a NAME defined
// before, or NAME + number.
func luaNames(t *testing.T, files ...string) map[string]string {
	t.Helper()
	def := regexp.MustCompile(`(?m)^local ([A-Z][A-Z0-9_]*) = ([^-\n]*?)\s*(?:--.*)?$`)
	sum := regexp.MustCompile(`^([A-Z][A-Z0-9_]*) \+ (\d+)$`)
	out := map[string]string{}
	for _, f := range files {
		src, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllStringSubmatch(string(src), -1) {
			name, expr := m[1], m[2]
			switch {
			case regexp.MustCompile(`^\d+$`).MatchString(expr):
				out[name] = expr
			case regexp.MustCompile(`^'[^']*'$`).MatchString(expr):
				out[name] = strings.Trim(expr, "'")
			case out[expr] != "":
				out[name] = out[expr]
			case sum.MatchString(expr):
				s := sum.FindStringSubmatch(expr)
				base, ok := out[s[1]]
				if !ok {
					t.Fatalf("%s.lua: %s = %s names %s before it is defined", f, name, expr, s[1])
				}
				a, _ := strconv.Atoi(base)
				b, _ := strconv.Atoi(s[2])
				out[name] = strconv.Itoa(a + b)
			}
		}
	}
	return out
}

// positionName is the name of an ARGV position, or of a field's offset in
// a repeated item.
var positionName = regexp.MustCompile(`^(ARG|BEAT|TOUCH|CLASS|EVENT)_`)

// bareARGV finds an ARGV index written as a number (ARGV[7], ARGV[a + 2]).
var bareARGV = regexp.MustCompile(`ARGV\[\s*(?:[a-z]\w*\s*\+\s*)?\d`)

// argRecorder records the calls the engine makes and answers those of the
// scripts in replies with their reply, so that the engine goes on to the
// calls that follow, and any other call with an error.
type argRecorder struct {
	replies map[string]Value // by SHA
	calls   []Call
}

func (r *argRecorder) Eval(_ context.Context, calls []Call) []Result {
	out := make([]Result, len(calls))
	for i, c := range calls {
		r.calls = append(r.calls, c)
		if v, ok := r.replies[c.SHA]; ok {
			out[i].Value = v
		} else {
			out[i].Err = errors.New("recorded")
		}
	}
	return out
}

// argsOf returns the arguments of the first call of script sc.
func (r *argRecorder) argsOf(t *testing.T, sc *script) []string {
	t.Helper()
	for _, c := range r.calls {
		if c.SHA == sc.sha {
			return c.Args
		}
	}
	t.Fatalf("no call of %s", sc.name)
	return nil
}

// TestLuaArgNames checks every named ARGV position of the user scripts
// against the value the engine sends there, with a configuration and
// inputs whose every value differs from the others.
func TestLuaArgNames(t *testing.T) {
	ctx := context.Background()
	cfg := Config{
		IdleAfter: 301 * time.Second, PushWindow: 602 * time.Second, LeaveDelay: 15003 * time.Millisecond,
		CoalesceWindow: 1004 * time.Millisecond, KeyGrace: 10005 * time.Millisecond, MaxDevices: 17,
		MaxSkew: 299 * time.Second, KickFence: 3607 * time.Second, UserBuckets: 1, ScopeBuckets: 1,
		Clock: fixedClock(time.UnixMilli(1772366400123)).Now, ChangeLog: 100, CountTTL: 611 * time.Second,
		Classes: map[string]ScopeClass{"video": {Layout: LayoutCompact, Window: 601 * time.Second, ShardSize: 8,
			SweepInterval: 7 * time.Second}, "live": {Layout: LayoutCompact, Window: 603 * time.Second, Shards: 4,
			ShardSize: 5, SweepInterval: 9 * time.Second, Spread: true}},
	}
	rec := &argRecorder{}
	e, err := New(rec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const now = 1772366400123
	nowV := Value{Kind: ValueInt, Int: now}
	b := e.settings.keys.userBucket("alice")
	outboxID := "u" + strconv.Itoa(int(b)) + ".1772366400000.5"
	rec.replies = map[string]Value{
		// not steady: the full path follows
		e.scripts.beat.sha: {Kind: ValueString, Str: ""},
		// a change, published and logged
		e.scripts.manual.sha:    Value{Kind: ValueArray, Array: []Value{nowV, Value{Kind: ValueArray, Array: []Value{Value{Kind: ValueString, Str: "alice"}, Value{Kind: ValueInt, Int: 0}, Value{Kind: ValueInt, Int: 4}, Value{Kind: ValueString, Str: outboxID}}}, Value{Kind: ValueString, Str: ""}}},
		e.scripts.logAppend.sha: Value{Kind: ValueArray, Array: []Value{Value{Kind: ValueString, Str: "1-1"}}},
		// a spread scope: no count key, then its shards' sizes
		e.scripts.count.sha:    {Kind: ValueArray, Array: []Value{nowV, {Kind: ValueInt, Int: -1}, {Kind: ValueInt, Int: 0}}},
		e.scripts.shardLen.sha: {Kind: ValueInt, Int: 3},
		// a spread scope handed over by the sweep, its shards swept
		e.scripts.sweepScopes.sha: {Kind: ValueArray, Array: []Value{nowV, {Kind: ValueInt, Int: 0}, {Kind: ValueInt, Int: 0}, {Kind: ValueInt, Int: 0}, {Kind: ValueInt, Int: 0},
			{Kind: ValueString, Str: "ok"}, {Kind: ValueArray, Array: []Value{{Kind: ValueString, Str: "live:7"}, {Kind: ValueInt, Int: 2}}}}},
		e.scripts.shardSweep.sha: {Kind: ValueArray, Array: []Value{nowV, {Kind: ValueInt, Int: 0}, {Kind: ValueInt, Int: 5}, {Kind: ValueString, Str: "0"}}},
	}
	base := e.settings.keys.userBase(b)
	common := map[string]string{
		"ARG_NOW": "1772366400123", "ARG_IDLE": "301000", "ARG_PUSH": "602000", "ARG_LEAVE": "15003",
		"ARG_COALESCE": "1004", "ARG_KEEP": itoa(e.settings.keep), "ARG_PAGES": base + sufPage, "ARG_MAXDEV": "17",
		"ARG_SKEW": "299000", "ARG_POLICY": strconv.Itoa(int(PolicyMulti)), "ARG_COUNTS": base + sufCounts,
		"ARG_KICK": "3607000", "ARG_OUTBOX": base + sufOutbox, "ARG_HEAL": itoa(e.settings.healWindow()),
	}
	e.plans.seen.mark(b) // a bucket the engine has seen: its loss would be one
	with := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range common {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	at := time.UnixMilli(1772366399456)
	// a steady beat, then (answered "not steady") the full path
	e.Heartbeat(ctx, Heartbeat{User: "alice", Device: "tablet", Kind: KindAndroid, Gateway: "gw-h", Token: "tok-h",
		Active: true, Background: false, Meta: map[string]string{"k": "v"}, At: at})
	e.Login(ctx, Login{User: "alice", Device: "web", Kind: KindDesktop, Gateway: "gw-l", Background: true,
		Meta: map[string]string{"a": "b"}, Token: "tok-l", Policy: ptr(PolicyExclusivePerKind)})
	e.Logout(ctx, "alice", "phone", "tok-o")
	e.SetManual(ctx, "alice", ManualInvisible, 42*time.Second)
	e.Status(ctx, "alice")
	e.SweepUsers(ctx)
	video := Scope{Class: "video", ID: "10086"}
	e.Touch(ctx, video, "bob")
	e.Leave(ctx, video, "carol")
	e.Count(ctx, video)
	e.Members(ctx, video, "", 5)
	e.ActiveWithin(ctx, video, 42*time.Second)
	e.SweepScopes(ctx)
	e.ChangeLogAfter(ctx, "0-1", 7)
	live := Scope{Class: "live", ID: "7"}
	e.Touch(ctx, live, "dave")
	e.Count(ctx, live)
	k, err := e.plans.scopeKeys("scope", video)
	if err != nil {
		t.Fatal(err)
	}
	cls := e.settings.classes["video"]
	change := marshalChange(Change{User: "alice", From: StatusOffline, To: StatusDND, At: time.UnixMilli(now)}, outboxID)
	meta := "=" + encodeMeta(map[string]string{"k": "v"})
	cases := []struct {
		sc     *script
		files  []string
		want   map[string]string
		items  string // the position of the first repeated item ("" none)
		fields string // the fields of a repeated item
	}{
		{e.scripts.beat, []string{"heartbeat_steady"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_PAGES": base + sufPage, "ARG_PUSH": "602000", "ARG_KEEP": itoa(e.settings.keep),
			"ARG_IDLE": "301000", "ARG_BEAT1+BEAT_USER": "alice",
			"ARG_BEAT1+BEAT_DEVICE": "tablet", "ARG_BEAT1+BEAT_TOKEN": "tok-h", "ARG_BEAT1+BEAT_PAGE": "",
			"ARG_BEAT1+BEAT_FLAGS": "1",
			"ARG_BEAT1+BEAT_EXTRA": kindCodes[KindAndroid] + "gw-h" + unitSep + "1772366399456" + unitSep + meta,
			"ARG_LEFT":             e.settings.leftNone[1],
		}, "ARG_BEAT1", "BEAT_FIELDS"},
		{e.scripts.heartbeat, []string{"userlib", "heartbeat_full"}, with(map[string]string{
			"ARG_BEATS": "1", "ARG_BEAT1+BEAT_USER": "alice", "ARG_BEAT1+BEAT_DEVICE": "tablet",
			"ARG_BEAT1+BEAT_KIND": kindCodes[KindAndroid], "ARG_BEAT1+BEAT_GATEWAY": "gw-h",
			"ARG_BEAT1+BEAT_TOKEN": "tok-h", "ARG_BEAT1+BEAT_ACTIVE": "1", "ARG_BEAT1+BEAT_BACKGROUND": "0",
			"ARG_BEAT1+BEAT_INTERVAL": itoa(e.settings.interval[KindAndroid]), "ARG_BEAT1+BEAT_META": meta,
			"ARG_BEAT1+BEAT_AT": "1772366399456", "ARG_BEAT1+BEAT_ISSUE": "",
		}), "ARG_BEAT1", "BEAT_FIELDS"},
		{e.scripts.login, []string{"userlib", "login"}, with(map[string]string{
			"ARG_USER": "alice", "ARG_DEVICE": "web", "ARG_KIND": kindCodes[KindDesktop], "ARG_GATEWAY": "gw-l",
			"ARG_LOGIN_POLICY": strconv.Itoa(int(PolicyExclusivePerKind)), "ARG_BACKGROUND": "1",
			"ARG_INTERVAL": itoa(e.settings.interval[KindDesktop]), "ARG_META": encodeMeta(map[string]string{"a": "b"}),
			"ARG_TOKEN": "tok-l",
		}), "", ""},
		{e.scripts.logout, []string{"userlib", "logout"}, with(map[string]string{
			"ARG_USER": "alice", "ARG_DEVICE": "phone", "ARG_MODE": "logout", "ARG_TOKEN": "tok-o",
		}), "", ""},
		{e.scripts.manual, []string{"userlib", "manual"}, with(map[string]string{
			"ARG_USER": "alice", "ARG_MANUAL": strconv.Itoa(int(ManualInvisible)), "ARG_LIFETIME": "42000",
		}), "", ""},
		{e.scripts.status, []string{"userlib", "status"}, with(map[string]string{
			"ARG_USERS": "1", "ARG_USERS+1": "alice",
		}), "ARG_USERS+1", "1"},
		{e.scripts.sweepUsers, []string{"userlib", "sweep_users"}, with(map[string]string{
			"ARG_LOCK_TOKEN": anyToken, "ARG_LEASE": itoa(e.settings.lease), "ARG_LIMIT": strconv.Itoa(min(e.settings.batch, max(1, sweepProbeUsers/int(e.settings.keys.userBuckets)))), "ARG_BUDGET": itoa(sweepStepMicros),
			"ARG_REDELIVER": itoa(RedeliverAfter.Milliseconds()),
		}), "", ""},
		{e.scripts.outboxAck, []string{"outbox_ack"}, map[string]string{
			"ARG_EPOCH": "1772366400000", "ARG_EVENT1+EVENT_SEQ": "5", "ARG_EVENT1+EVENT_CHANNEL": "presence:changes",
			"ARG_EVENT1+EVENT_PAYLOAD": `{"user":"alice","from":"OFFLINE","to":"DND","at":1772366400123,"id":"u0.1772366400000.5"}`,
		}, "ARG_EVENT1", "EVENT_FIELDS"},
		{e.scripts.touch, []string{"touch"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_GRACE": "10005", "ARG_LIFE": itoa(millis(compactLife)), "ARG_TOUCHES": "1",
			"ARG_TOUCHES+1+TOUCH_LAYOUT": "1", "ARG_TOUCHES+1+TOUCH_DATA": k.data,
			"ARG_TOUCHES+1+TOUCH_TAIL": k.tail, "ARG_TOUCHES+1+TOUCH_REF": "video:10086",
			"ARG_TOUCHES+1+TOUCH_MEMBER": "bob", "ARG_TOUCHES+1+TOUCH_WINDOW": "601000",
			"ARG_TOUCHES+1+TOUCH_INTERVAL": "7000", "ARG_TOUCHES+1+TOUCH_BUCKET": strconv.FormatUint(uint64(memberHash("bob")), 10),
			"ARG_TOUCHES+1+TOUCH_SIZE": "8",
		}, "ARG_TOUCHES+1", "TOUCH_FIELDS"},
		{e.scripts.leave, []string{"leave"}, map[string]string{
			"ARG_LAYOUT": "1", "ARG_MEMBER": "carol", "ARG_PREFIX": k.data, "ARG_TAIL": k.tail,
			"ARG_HASH": strconv.FormatUint(uint64(memberHash("carol")), 10),
		}, "", ""},
		{e.scripts.count, []string{"count"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_LAYOUT": "1", "ARG_DATA": k.data, "ARG_TAIL": k.tail,
			"ARG_WINDOW": "601000", "ARG_BUCKET": itoa(cls.bucket), "ARG_PEEK": "",
		}, "", ""},
		{e.scripts.members, []string{"members"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_LAYOUT": "1", "ARG_DATA": k.data, "ARG_TAIL": k.tail,
			"ARG_WINDOW": "601000", "ARG_SHARDS": "-1", "ARG_SHARD": "0", "ARG_OFFSET": "0", "ARG_PAGE": "5",
		}, "", ""},
		{e.scripts.active, []string{"active"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_LAYOUT": "1", "ARG_DATA": k.data, "ARG_TAIL": k.tail,
			"ARG_WITHIN": "42000", "ARG_SHARD_END": "-1", "ARG_BUCKET": itoa(cls.bucket), "ARG_SHARD_FIRST": "0",
		}, "", ""},
		{e.scripts.sweepScopes, []string{"sweep_scopes"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_LOCK_TOKEN": anyToken, "ARG_LEASE": itoa(e.settings.lease),
			"ARG_LIMIT": strconv.Itoa(e.settings.batch), "ARG_BUDGET": strconv.Itoa(e.settings.budget),
			"ARG_RELEASE_AFTER": strconv.Itoa(e.settings.release), "ARG_LIFETIME": "611000",
			"ARG_BASE": e.settings.keys.scopeBase(0), "ARG_KIND_EXACT": sufExact, "ARG_KIND_SHARD": sufCompact,
			"ARG_KIND_APPROX": sufHLL, "ARG_KIND_COUNT": sufCount, "ARG_CLASSES": "2",
			"ARG_CLASSES+1+CLASS_NAME": "live", "ARG_CLASSES+1+CLASS_LAYOUT": "1",
			"ARG_CLASSES+1+CLASS_WINDOW": "603000", "ARG_CLASSES+1+CLASS_SIZE": "5",
			"ARG_CLASSES+1+CLASS_INTERVAL": "9000", "ARG_CLASSES+1+CLASS_BUCKET": itoa(cls.bucket),
			"ARG_CLASSES+1+CLASS_SPREAD": "1",
		}, "ARG_CLASSES+1", "CLASS_FIELDS"},
		{e.scripts.logRead, []string{"log_read"}, map[string]string{"ARG_AFTER": "0-1", "ARG_LIMIT": "7"}, "", ""},
		{e.scripts.logAppend, []string{"log_append"}, map[string]string{
			"ARG_MAXLEN": "100", "ARG_EVENT1+EVENT_KIND": "c", "ARG_EVENT1+EVENT_JSON": string(change),
		}, "ARG_EVENT1", "EVENT_FIELDS"},
		{e.scripts.shardTouch, []string{"shard_touch"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_LIFETIME": itoa(603000 + e.settings.grace), "ARG_MEMBER1": "dave",
		}, "ARG_MEMBER1", "1"},
		{e.scripts.shardSweep, []string{"shard_sweep"}, map[string]string{
			"ARG_NOW": "1772366400123", "ARG_WINDOW": "603000", "ARG_CURSOR": "0", "ARG_SCAN": strconv.Itoa(shardScan),
		}, "", ""},
		{e.scripts.scopeFinish, []string{"scope_finish"}, map[string]string{
			// the walk of 4 shards took 4 round trips: counted again, 3 each
			"ARG_NOW": "1772366400123", "ARG_REF": "live:7", "ARG_COUNT": "12", "ARG_EMPTIES": "2",
			"ARG_RELEASE_AFTER": strconv.Itoa(e.settings.release), "ARG_LIFETIME": "611000", "ARG_INTERVAL": "9000",
		}, "", ""},
		// a sweep that fails releases its locks
		{e.scripts.unlock, []string{"unlock"}, map[string]string{"ARG_TOKEN": anyToken}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.sc.name, func(t *testing.T) {
			if m := bareARGV.FindString(joinLua(c.files...)); m != "" {
				t.Errorf("%s indexes ARGV by a bare number: %q", c.files[len(c.files)-1], m)
			}
			// the script sent holds the numbers (luabuild.Inline)
			for _, line := range strings.Split(c.sc.Source(), "\n") {
				if _, _, _, _, ok := luabuild.Def(line); ok || strings.Contains(strings.SplitN(line, "--", 2)[0], "ARG_") {
					t.Errorf("a named constant is left in the script sent: %q", line)
				}
			}
			names := luaNames(t, c.files...)
			args := rec.argsOf(t, c.sc)
			pos := func(expr string) int {
				n := 0
				for _, part := range strings.Split(expr, "+") {
					v, ok := names[part]
					if !ok {
						v = part
					}
					k, err := strconv.Atoi(v)
					if err != nil {
						t.Fatalf("%s: %q is not a named position", expr, part)
					}
					n += k
				}
				return n
			}
			last := 0
			for expr, want := range c.want {
				p := pos(expr)
				last = max(last, p)
				if p < 1 || p > len(args) {
					t.Errorf("%s = ARGV[%d], past the %d arguments the engine sends", expr, p, len(args))
				} else if want == anyToken {
					if len(args[p-1]) != 11 {
						t.Errorf("%s = ARGV[%d] = %q, want a token", expr, p, args[p-1])
					}
				} else if args[p-1] != want {
					t.Errorf("%s = ARGV[%d] = %q, want %q", expr, p, args[p-1], want)
				}
			}
			// every named position of the files is checked
			checked := map[string]bool{"ARG_OWN": true, c.fields: true}
			for expr := range c.want {
				for _, part := range strings.Split(expr, "+") {
					checked[part] = true
				}
			}
			for name := range names {
				if positionName.MatchString(name) && !checked[name] {
					t.Errorf("%s is not checked", name)
				}
			}
			if c.items != "" {
				// the items the engine sends are whole; the fields
				// checked above lie within the first one
				first, fields := pos(c.items), pos(c.fields)
				if (len(args)-first+1)%fields != 0 {
					t.Errorf("%d arguments: not whole items of %s = %d fields from ARGV[%d]", len(args), c.fields, fields, first)
				}
				for expr := range c.want {
					if p := pos(expr); p >= first+fields {
						t.Errorf("%s = ARGV[%d] lies past the first item's %d fields", expr, p, fields)
					}
				}
			} else if last != len(args) {
				t.Errorf("the engine sends %d arguments, the script names %d", len(args), last)
			}
		})
	}
	// the steady beat's ARG_LEFT, field by field, and what the steady beat
	// makes of it and of a beat it leaves: the ARGV and KEYS of
	// heartbeat_full.lua that the engine sends for that beat
	t.Run("beat ARG_LEFT", func(t *testing.T) {
		names := luaNames(t, "heartbeat_steady")
		steady := rec.argsOf(t, e.scripts.beat)
		left := strings.Split(steady[atoi(t, names["ARG_LEFT"])-1], unitSep)
		field := func(name string, k int) string {
			p := atoi(t, names[name]) + k
			if p < 1 || p > len(left) {
				t.Fatalf("%s+%d: field %d of the %d of ARG_LEFT", name, k, p, len(left))
			}
			return left[p-1]
		}
		// the seed: none, for a beat with a token
		want := map[string]string{"LEFT_SKEW": "299000", "LEFT_LEAVE": "15003", "LEFT_COALESCE": "1004",
			"LEFT_MAXDEV": "17", "LEFT_POLICY": strconv.Itoa(int(PolicyMulti)), "LEFT_KICK": "3607000",
			"LEFT_MAX": strconv.Itoa(leftChunk), "LEFT_HEAL": e.settings.heal, "LEFT_SEED": "", "LEFT_PAGE": sufPage, "LEFT_COUNTS": sufCounts,
			"LEFT_OUTBOX": sufOutbox, "LEFT_DUE": sufDue, "LEFT_MANUAL": sufManual}
		for name, w := range want {
			if got := field(name, 0); got != w {
				t.Errorf("ARG_LEFT's %s = %q, want %q", name, got, w)
			}
		}
		for k := range kindNames {
			if got := field("LEFT_INTERVAL", k); got != itoa(e.settings.interval[k]) {
				t.Errorf("ARG_LEFT's interval of %s = %q, want %q", Kind(k), got, itoa(e.settings.interval[k]))
			}
		}
		for name := range names {
			if _, ok := want[name]; strings.HasPrefix(name, "LEFT_") && name != "LEFT_INTERVAL" && !ok {
				t.Errorf("%s is not checked", name)
			}
		}
		if n := atoi(t, names["LEFT_INTERVAL"]) + len(kindNames) - 1; len(left) != n {
			t.Errorf("ARG_LEFT has %d fields, want %d, the intervals last", len(left), n)
		}
		// the steady beat up to the call of the full path, which here
		// returns what it was called with; the beat misses, as no record
		// is stored
		src := inlineLua(t, joinLua("recordlib", "heartbeat_steady")+"return { ARGV, KEYS }\nend)(fullArgv, fullKeys)\nreturn decided\n")
		c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
		defer c.Close()
		var keys []string
		for _, call := range rec.calls {
			if call.SHA == e.scripts.beat.sha {
				keys = call.Keys
				break
			}
		}
		args := make([]any, len(steady))
		for i, a := range steady {
			args[i] = a
		}
		res, err := c.Eval(ctx, src, keys, args...).Slice()
		if err != nil || len(res) != 2 {
			t.Fatalf("steady beat, stopped at the full path: %v, %v", res, err)
		}
		strs := func(v any) []string {
			var out []string
			items, _ := v.([]any)
			for _, x := range items {
				out = append(out, fmt.Sprint(x))
			}
			return out
		}
		full := rec.argsOf(t, e.scripts.heartbeat)
		if got := strs(res[0]); !slices.Equal(got, full) {
			t.Errorf("heartbeat_full.lua's ARGV from the steady beat:\n%q\nthe engine's:\n%q", got, full)
		}
		if got := strs(res[1]); !slices.Equal(got, e.plans.userKeys(b)) {
			t.Errorf("heartbeat_full.lua's KEYS from the steady beat: %q, the engine's %q", got, e.plans.userKeys(b))
		}
	})
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// anyToken stands for a value drawn at random, a 16-digit token.
const anyToken = "<token>"

func ptr[T any](v T) *T { return &v }

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// TestLuaEnumNames checks the enumerations go generate ./core reads from
// status.go (luabuild.Enums) against the Go values, and the numbers the
// scripts take for them (luabuild.LuaConsts) against what the engine
// sends and stores.
func TestLuaEnumNames(t *testing.T) {
	enums, err := luabuild.Enums(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"Status": statusNames[:], "Manual": manualNames[:], "Kind": kindNames[:],
		"Policy": policyNames[:], "Layout": layoutNames[:]}
	for _, e := range enums {
		if !slices.Equal(e.Names, want[e.Type]) {
			t.Errorf("%s: luabuild reads %q, Go has %q", e.Type, e.Names, want[e.Type])
		}
		delete(want, e.Type)
	}
	for typ := range want {
		t.Errorf("luabuild reads no enumeration %s", typ)
	}
	consts := luabuild.LuaConsts(enums)
	for name, v := range map[string]string{
		"StatusOffline":          strconv.Itoa(int(StatusOffline)),
		"StatusPushOnline":       strconv.Itoa(int(StatusPushOnline)),
		"StatusDND":              strconv.Itoa(int(StatusDND)),
		"ManualInvisible":        strconv.Itoa(int(ManualInvisible)),
		"PolicyExclusivePerKind": strconv.Itoa(int(PolicyExclusivePerKind)),
		"KindIOS":                "'" + kindCodes[KindIOS] + "'",
		"KindAndroid":            "'" + kindCodes[KindAndroid] + "'",
		"LayoutApprox":           "'" + strconv.Itoa(int(LayoutApprox)) + "'",
	} {
		if consts[name] != v {
			t.Errorf("Lua %s = %q, Go %s", name, consts[name], v)
		}
	}
	// the scripts take a kind as the engine sends it
	for k, code := range kindCodes {
		if code != strconv.Itoa(k) {
			t.Errorf("kindCodes[%s] = %q, the scripts take %d", Kind(k), code, k)
		}
	}
	if KindIOS.classCode() != KindAndroid.classCode() || KindWeb.classCode() == KindIOS.classCode() {
		t.Errorf("Go's kind classes are not login.lua's (KindIOS and KindAndroid share one)")
	}
}

// luaWord is a name that starts with a capital in a line of Lua code,
// after its strings and comment are removed (luaCode): a constant of the
// file's (in capitals) or of core's (named as in Go).
var luaWord = regexp.MustCompile(`\b[A-Z]\w*\b`)

// luaDeclared finds the names a line of Lua code declares: locals,
// functions, functions' parameters and loop variables.
var luaDeclared = []*regexp.Regexp{
	regexp.MustCompile(`(?:local function|local|for)\s+([\w, ]+)`),
	regexp.MustCompile(`function[^(]*\(([\w, ]*)\)`),
}

// luaCode returns a line of Lua without its strings and its comment.
func luaCode(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '-' && strings.HasPrefix(line[i:], "--"):
			return b.String()
		case c == '\'' || c == '"':
			for i++; i < len(line) && line[i] != c; i++ {
				if line[i] == '\\' {
					i++
				}
			}
			b.WriteString("''")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// TestLuaConstantsDefined checks that every name starting with a capital
// that a script sent reads is one it declares, or KEYS or ARGV: a constant
// misspelt in a Lua file (core's, luabuild.LuaConsts, are written in as
// numbers) would otherwise reach Redis as a global, which a script may
// not read.
func TestLuaConstantsDefined(t *testing.T) {
	for _, s := range luascripts.All() {
		declared := map[string]bool{"KEYS": true, "ARGV": true}
		lines := strings.Split(s.Source(), "\n")
		for _, line := range lines {
			for _, re := range luaDeclared {
				for _, m := range re.FindAllStringSubmatch(luaCode(line), -1) {
					for _, n := range strings.Split(m[1], ",") {
						declared[strings.TrimSpace(n)] = true
					}
				}
			}
		}
		for i, line := range lines {
			for _, w := range luaWord.FindAllString(luaCode(line), -1) {
				if !declared[w] {
					t.Errorf("%s:%d reads %s, which it does not declare: %q", s.Name, i+1, w, line)
				}
			}
		}
	}
}

// TestLuaNoBareARGV checks that no Lua file indexes ARGV by a bare number:
// each names its positions once (userlib.lua the common ones of the user
// scripts).
func TestLuaNoBareARGV(t *testing.T) {
	files, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		src, err := luaFiles.ReadFile("lua/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			code := strings.SplitN(line, "--", 2)[0]
			if m := bareARGV.FindString(code); m != "" {
				t.Errorf("%s:%d indexes ARGV by a bare number: %q", f.Name(), i+1, m)
			}
		}
	}
}
