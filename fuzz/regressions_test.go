package fuzz

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
	"github.com/presencekit/presence/wasm/abi"
)

// Regression tests for bugs the fuzz targets found in core, each with the
// input that showed it. All were fixed in core (commit 648d4b4, "fixes for
// bugs the fuzz suite found"); a test of a bug still open starts with
// skipKnownBug, so that the suite stays green until the fix, and runs with
//
//	FUZZ_KNOWN_BUGS=1 go test ./fuzz -run Regression

// skipKnownBug skips a regression test of a bug still open in core.
func skipKnownBug(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("FUZZ_KNOWN_BUGS") == "" {
		t.Skip("known bug: " + what)
	}
}

// TestRegressionModelRefusalPrunes: a request that the Model refused or
// that found nothing to do (here a Logout of a device the user does not
// have) deleted the user's expired device records although nothing was
// settled; the Engine's scripts change nothing then. The Model thereby
// forgot when the user went offline and published OFFLINE at its next
// sweep at once instead of after LeaveDelay (docs/design.md §7).
//
// Input (default Config): t0 login u/web (window 60 s) and u/ios (120 s);
// t0+2s sweep (publishes OFFLINE→ONLINE); t0+120.5s Logout(u, "absent") and
// SweepUsers; sweeps at t0+136s and t0+150s.
// Expected: nothing at t0+120.5s (u has been offline for 0.5 s, LeaveDelay
// is 15 s); ONLINE→OFFLINE once, later, alike on Engine and Model.
// Was (Model): ONLINE→OFFLINE at t0+120.5s. Cause: model.go Model.user
// pruned expired records in place and Model.end returned without settling.
func TestRegressionModelRefusalPrunes(t *testing.T) {
	var published [2][]string
	for i, name := range []string{"engine", "model"} {
		ctx := context.Background()
		m := newMini(t, t0)
		cfg := core.Config{Clock: m.clk.Now}
		var p core.Presence = m.engine(t, cfg)
		if name == "model" {
			mod, err := core.NewModel(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p = mod
		}
		for _, l := range []core.Login{{User: "u", Device: "web", Kind: core.KindWeb}, {User: "u", Device: "ios", Kind: core.KindIOS}} {
			if _, err := opdo.Do[core.LoginResult](ctx, p, l); err != nil {
				t.Fatal(err)
			}
		}
		sweep := func(at time.Duration) string {
			m.set(t0.Add(at))
			r, err := opdo.Do[core.SweepReport](ctx, p, core.SweepUsers{})
			if err != nil {
				t.Fatal(err)
			}
			return renderChanges(r.Changes)
		}
		if got := sweep(2 * time.Second); got == "" {
			t.Fatalf("%s: no OFFLINE→ONLINE after the coalesce window", name)
		}
		m.set(t0.Add(120500 * time.Millisecond))
		if r, err := opdo.Do[core.Ended](ctx, p, core.Logout{User: "u", Device: "absent", Token: ""}); err != nil || r.Removed {
			t.Fatalf("%s: Logout of an absent device = %+v, %v", name, r, err)
		}
		if got := sweep(120500 * time.Millisecond); got != "" {
			t.Errorf("%s: sweep 0.5 s after the user went offline published %s; LeaveDelay is 15 s", name, got)
		}
		for _, at := range []time.Duration{136 * time.Second, 150 * time.Second} {
			published[i] = append(published[i], sweep(at))
		}
		if strings.Join(published[i], "") == "" {
			t.Errorf("%s: OFFLINE never published", name)
		}
	}
	if !slices.Equal(published[0], published[1]) {
		t.Errorf("engine published %q, model %q", published[0], published[1])
	}
}

// TestRegressionScopeSweepVisited: SweepReport.Visited of Engine.SweepScopes
// counted a compact scope once per script step that worked on it, so a scope
// whose shards take more than one step (SweepBudget smaller than its shards
// and members: the default 512 against 256 shards is reached by ~256
// members) was reported visited several times; the Model counts it once.
//
// Input: SweepBudget 3, one scope bucket, class "video" compact with 3
// shards; touch video/v1 by m1; SweepScopes after its sweep interval.
// Expected: Visited == 1 (one scope). Was (Engine): 2.
// Cause: lua/sweep_scopes.lua increments visited before it knows
// whether the scope is finished; a resumed scope is visited again in the
// next step (the "more" loop of Engine.sweep) and counted again.
func TestRegressionScopeSweepVisited(t *testing.T) {
	ctx := context.Background()
	m := newMini(t, t0)
	e := m.engine(t, core.Config{SweepBudget: 3, ScopeBuckets: 1, Classes: map[string]core.ScopeClass{
		"video": {Layout: core.LayoutCompact, Shards: 3, SweepInterval: 20 * time.Second}}})
	if err := e.Touch(ctx, core.Scope{Class: "video", ID: "v1"}, "m1"); err != nil {
		t.Fatal(err)
	}
	m.set(t0.Add(20*time.Second + 7*time.Millisecond))
	r, err := e.SweepScopes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Visited != 1 {
		t.Errorf("SweepScopes over one scope: Visited = %d (in %d steps), want 1", r.Visited, r.Steps)
	}
}

// scriptedStore answers each script by name with a fixed reply; unlisted
// scripts get an error.
type scriptedStore map[string]core.Value

// Eval answers from the map.
func (s scriptedStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	out := make([]core.Result, len(calls))
	for i, c := range calls {
		v, ok := s[scriptName(c)]
		if !ok {
			out[i].Err = errFake
			continue
		}
		out[i].Value = v
	}
	return out
}

func scriptedEngine(t *testing.T, replies scriptedStore) *core.Engine {
	t.Helper()
	e, err := core.New(replies, core.Config{Clock: (&manualClock{t: t0}).Now, Classes: testClasses()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var nowV = core.Value{Kind: core.ValueInt, Int: t0.UnixMilli()}

// TestRegressionEnumTruncation: the engine checked statuses, kinds and manual
// statuses in replies after converting the int64 to the uint8 enum, so a
// number out of range by a multiple of 256 passed as another value.
//
// Input: a manual.lua reply {now, {"u1", 256, 259}}; a login.lua reply
// kicking a device of kind 260; a status.lua reply with manual 257.
// Expected: errors matching core.ErrReply. Was: a change OFFLINE→ONLINE,
// a kick of an android device, a user with manual DND.
// Cause: Status(from).Valid(), Kind(kind).valid() and
// Manual(manual).valid() in engine.go decodeChanges, the reply decoders (heartbeat
// results, decodeKicks, decodeStatus) and rules.go decodeRecord convert
// before they compare; compare the int64 with the number of names instead.
func TestRegressionEnumTruncation(t *testing.T) {
	ctx := context.Background()
	e := scriptedEngine(t, scriptedStore{
		"manual": core.Value{Kind: core.ValueArray, Array: []core.Value{nowV, {Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueString, Str: "u1"}, {Kind: core.ValueInt, Int: 256}, {Kind: core.ValueInt, Int: 259}}}}},
		"login": core.Value{Kind: core.ValueArray, Array: []core.Value{nowV, {Kind: core.ValueString, Str: ""},
			{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueString, Str: "d"}, {Kind: core.ValueInt, Int: 260}, {Kind: core.ValueString, Str: "gw"}}}, {Kind: core.ValueArray}}},
		"status": core.Value{Kind: core.ValueArray, Array: []core.Value{nowV, {Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueInt, Int: 257}, {Kind: core.ValueInt, Int: 0}, {Kind: core.ValueArray}}}}}}},
	})
	if cs, err := e.SetManual(ctx, "u1", core.ManualDND, 0); !errors.Is(err, core.ErrReply) {
		t.Errorf("manual reply with statuses 256, 259: changes %v, err %v; want ErrReply", renderChanges(cs), err)
	}
	if r, err := e.Login(ctx, core.Login{User: "u1", Device: "d2"}); !errors.Is(err, core.ErrReply) {
		t.Errorf("login reply kicking kind 260: kicked %+v, err %v; want ErrReply", r.Kicked, err)
	}
	if st, err := e.Status(ctx, "u1"); !errors.Is(err, core.ErrReply) {
		t.Errorf("status reply with manual 257: %s, err %v; want ErrReply", renderStatus(st), err)
	}
}

// TestRegressionNegativeCounts: counts in replies were passed on without a
// range check, so a broken reply yielded negative counts and reports; and a
// sweep added the counts of its steps without bound, so huge ones wrapped.
//
// Input: an active.lua reply {now, -5}; a sweep_users.lua reply {now, -3,
// 0, "ok", {}} for every bucket; then one with visited math.MaxInt64.
// Expected: errors matching core.ErrReply. Was: ActiveWithin returns
// -5; SweepUsers reports Visited -48, then (16 × MaxInt64) a negative sum.
// Cause: scopes.go ActiveWithin returns rest[0].AsInt() as is, and
// sweep.go adds visited, removed and released (converted to int) without
// checking them.
func TestRegressionNegativeCounts(t *testing.T) {
	ctx := context.Background()
	e := scriptedEngine(t, scriptedStore{
		"active":      core.Value{Kind: core.ValueArray, Array: []core.Value{nowV, {Kind: core.ValueInt, Int: -5}}},
		"sweep_users": core.Value{Kind: core.ValueArray, Array: []core.Value{nowV, {Kind: core.ValueInt, Int: -3}, {Kind: core.ValueInt, Int: 0}, {Kind: core.ValueString, Str: "ok"}, {Kind: core.ValueArray}}},
	})
	if n, err := e.ActiveWithin(ctx, room, time.Second); !errors.Is(err, core.ErrReply) {
		t.Errorf("active reply {now, -5}: %d, %v; want ErrReply", n, err)
	}
	if r, err := e.SweepUsers(ctx); !errors.Is(err, core.ErrReply) {
		t.Errorf("sweep reply visited -3: Visited %d, %v; want ErrReply", r.Visited, err)
	}
	e = scriptedEngine(t, scriptedStore{
		"sweep_users": core.Value{Kind: core.ValueArray, Array: []core.Value{nowV, {Kind: core.ValueInt, Int: math.MaxInt64}, {Kind: core.ValueInt, Int: 0}, {Kind: core.ValueString, Str: "ok"}, {Kind: core.ValueArray}}},
	})
	if r, err := e.SweepUsers(ctx); err == nil && r.Visited < 0 {
		t.Errorf("sweep replies visited MaxInt64 in 16 buckets: Visited %d", r.Visited)
	}
}

// TestRegressionMembersCursor: a members.lua reply whose next shard is valid
// but whose next offset was negative became a Next cursor that Members
// itself then refused as invalid input.
//
// Input: a members.lua reply {now, 0, -1, {}}.
// Expected: ErrReply (or no Next). Was: Next "0.-1", and Members(scope,
// "0.-1", n) fails with an *InputError for "cursor".
// Cause: scopes.go decodeMembers bounds the next shard and offset
// from above only.
func TestRegressionMembersCursor(t *testing.T) {
	ctx := context.Background()
	e := scriptedEngine(t, scriptedStore{
		"members": core.Value{Kind: core.ValueArray, Array: []core.Value{nowV, {Kind: core.ValueInt, Int: 0}, {Kind: core.ValueInt, Int: -1}, {Kind: core.ValueArray}}},
	})
	page, err := e.Members(ctx, room, "", 10)
	if errors.Is(err, core.ErrReply) || err == nil && page.Next == "" {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Members(ctx, room, page.Next, 10); errors.Is(err, core.ErrInvalid) {
		t.Errorf("Members handed out Next %q and then refuses it: %v", page.Next, err)
	}
}

// TestRegressionModelSkewOverflow: the Model's skew check computed At − now
// in int64 milliseconds; for At = now + math.MinInt64 ms the difference is
// exactly math.MinInt64, whose negation overflows back to itself, so a
// timestamp 292 million years in the past passes as within MaxSkew. The
// Engine (whose script compares in floating point) refuses it.
//
// Input: Heartbeat{At: time.UnixMilli(now + math.MinInt64)} on the Model.
// Expected: ErrClockSkew. Was: accepted.
// Cause: model.go Model.beat, "d > skew || -d > skew".
func TestRegressionModelSkewOverflow(t *testing.T) {
	clk := &manualClock{t: t0}
	mod, err := core.NewModel(core.Config{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(t0.UnixMilli() + math.MinInt64)
	if _, err := opdo.Do[core.Ack](context.Background(), mod, core.Heartbeat{User: "u", Device: "d", At: at}); !errors.Is(err, core.ErrClockSkew) {
		t.Errorf("Heartbeat At %d ms (now %d): %v, want ErrClockSkew", at.UnixMilli(), t0.UnixMilli(), err)
	}
}

// TestRegressionAtWraps: the skew check read Heartbeat.At with UnixMilli,
// which wraps for instants more than about 292 million years from 1970, so
// such an At could land within MaxSkew of now and pass. A gateway that builds
// At from a client's seconds with time.Unix(secs, 0) let any client do so.
// The damage is bounded (the wrapped value is itself within MaxSkew), but
// the request should be refused.
//
// Input: At = time.Unix(s, 0) with s·1000 ≡ now (mod 2^64), both backends.
// Expected: ErrClockSkew (the instant is ~584 million years away).
// Was: accepted.
// Cause: validate.go checkHeartbeat did not bound At; checking
// At.Year() (or At within ±MaxSkew as a time.Time, before UnixMilli) would.
func TestRegressionAtWraps(t *testing.T) {
	// Find k ≥ 1 and a target within a second of now with target + k·2^64
	// a multiple of 1000 (2^64 ≡ 616 mod 1000): time.Unix of that many
	// thousandths of it wraps to target in UnixMilli.
	now := t0.UnixMilli()
	var secs int64
	for k := int64(1); k < 500 && secs == 0; k++ {
		target := now + (1000-(now+k*616)%1000)%1000
		v := new(big.Int).Lsh(big.NewInt(k), 64)
		v.Add(v, big.NewInt(target))
		if v.Quo(v, big.NewInt(1000)).IsInt64() {
			secs = v.Int64()
		}
	}
	at := time.Unix(secs, 0)
	ctx := context.Background()
	m := newMini(t, t0)
	mod, err := core.NewModel(core.Config{Clock: m.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []core.Presence{m.engine(t, core.Config{}), mod} {
		if _, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d", At: at}); !errors.Is(err, core.ErrClockSkew) {
			t.Errorf("Heartbeat At year %d (UnixMilli %d, now %d): %v, want ErrClockSkew", at.Year(), at.UnixMilli(), now, err)
		}
	}
}

// TestRegressionDerivedBucket: a class whose Window is under 10 ms was refused
// because its default approx Bucket (Window/10) rounds to 0 ms, even for an
// exact or compact class, which has no buckets.
//
// Input: Config{Classes: {"x": {Layout: LayoutExact, Window: 5ms}}}.
// Expected: accepted (every field set is valid; Bucket is left at its
// default and unused). Was: *InputError "Config.Classes[x]: Window,
// SweepInterval and Bucket must be at least 1ms".
// Cause: config.go newSettings derives the default bucket for
// every layout and checks it; derive it only for LayoutApprox, or clamp
// the default to 1 ms.
func TestRegressionDerivedBucket(t *testing.T) {
	for _, l := range []core.Layout{core.LayoutExact, core.LayoutCompact} {
		cfg := core.Config{Classes: map[string]core.ScopeClass{"x": {Layout: l, Window: 5 * time.Millisecond}}}
		if _, err := core.New(scriptedStore{}, cfg); err != nil {
			t.Errorf("%v class with a 5 ms window: %v", l, err)
		}
	}
}

// TestRegressionApproxBuckets: New accepted an approx class with any number
// of buckets per window, but every count reads all of them in one script
// and Redis's Lua unpacks at most about 8,000 values: from Window/Bucket ≈
// 8,000 on, every Count failed with "too many results to unpack" (and so
// would a release of the scope). A window now spans at most 1,000 buckets.
//
// Input: Classes {"x": {Layout: LayoutApprox, Window: 10 min, Bucket: 50
// ms}} (12,000 buckets); then 600 ms (1,000 buckets) on a real redis-server:
// Touch x/s by m, Count x/s.
// Expected: the first refused naming Bucket; the second counts 1.
func TestRegressionApproxBuckets(t *testing.T) {
	class := func(b time.Duration) core.Config {
		return core.Config{Classes: map[string]core.ScopeClass{"x": {Layout: core.LayoutApprox, Window: 10 * time.Minute, Bucket: b}}}
	}
	_, err := core.New(scriptedStore{}, class(50*time.Millisecond))
	checkRejected(t, "12,000 buckets per window", err, []string{"Config.Classes[x].Bucket"})

	ctx := context.Background()
	e, err := core.New(redisStore{startRedis(t)}, class(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sc := core.Scope{Class: "x", ID: "s"}
	if err := e.Touch(ctx, sc, "m"); err != nil {
		t.Fatal(err)
	}
	if c, err := e.Count(ctx, sc); err != nil || c.N != 1 {
		t.Errorf("Count of an approx scope with 1,000 buckets per window: %+v, %v", c, err)
	}
}

// TestKnownBugABIMetaKey (wasm/abi, not core): metadata keys are written
// with appendJSONString, which copies bytes that are not UTF-8 as they are,
// so a Heartbeat or Login whose metadata has such a key encodes, without an
// error, to a request that is not valid JSON, and the ABI's own decoder then
// refuses it as malformed. Values and IDs travel as {"b":"<base64>"}
// instead; a key cannot (JSON keys are strings).
//
// Input: abi.EncodeRequest of a heartbeat with Meta {"\xe2": ""}.
// Expected: an error from EncodeRequest (or a request that decodes to the
// same heartbeat, which the core then refuses naming Heartbeat.Meta).
// Actual: no error; the JSON is invalid; DecodeRequest fails with "invalid
// UTF-8 in a string" (the host sees a malformed-request error, not the
// core's InputError).
// Suspected cause: wasm/abi codec.go appendStrMap.
func TestKnownBugABIMetaKey(t *testing.T) {
	skipKnownBug(t, "wasm/abi writes a metadata key that is not UTF-8 as invalid JSON")
	w := abi.FromHeartbeat(core.Heartbeat{User: "u", Device: "d", Meta: map[string]string{"\xe2": ""}})
	b, err := abi.EncodeRequest(abi.Request{Op: abi.OpHeartbeat, Args: &w})
	if err != nil {
		return // refused at encoding: fine
	}
	if !json.Valid(b) {
		t.Errorf("EncodeRequest returned invalid JSON without an error: %q", b)
	}
	if _, err := abi.DecodeRequest(b); err != nil {
		t.Errorf("the ABI's own request does not decode: %v", err)
	}
}
