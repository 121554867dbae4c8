package conformance_test

import (
	"context"
	"strings"
	"testing"

	"github.com/presencekit/presence/conformance"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/redistest"
)

// A planted bug is a wrapped Store that makes the engine misbehave in one
// known way: it rewrites the source of scripts (sent with EVAL instead of
// the genuine EVALSHA), or the engine's publications. Each must make the
// suite fail; the test logs which property caught it.

// edit is one textual change to the scripts that contain old.
type edit struct{ old, new string }

// plantBug is a planted bug: a name, the scripts it rewrites, and
// optionally the round trips it rewrites.
type plantBug struct {
	name    string
	scripts []string // script names; empty: every script that contains the text
	edits   []edit
	// eval, if set, rewrites round trips after the edits.
	eval func(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result
	// raceBlind says why the race suite is not expected to catch the bug;
	// "" means it must.
	raceBlind string
}

var plantedBugs = []plantBug{
	{
		name:    "a sweep that deletes without re-checking",
		scripts: []string{"sweep_users"},
		// The sweep's load drops every record of a visited user instead of
		// those past their deadline inside the script.
		edits: []edit{{"if P.now <= deadline(r, P) then u.devs[id] = r end", "if false then u.devs[id] = r end"}},
	},
	{
		name:    "a sweep that takes a live device for gone",
		scripts: []string{"sweep_users"},
		// The check by which a sweep settles a user without loading it
		// finds every device past its deadline.
		edits: []edit{{"return P.now > deadlineOf(", "return P.now >= 0 or deadlineOf("}},
	},
	{
		name:    "a sweep that takes a device for gone 1 ms before its deadline",
		scripts: []string{"sweep_users"},
		// The same check off by one: at a device's deadline, its last
		// live millisecond, the sweep settles its user as if it were gone.
		// Only a sweep at exactly that instant sees it (edgeOp).
		edits:     []edit{{"return P.now > deadlineOf(", "return P.now + 1 > deadlineOf("}},
		raceBlind: "its operations seldom run a sweep at a device's exact deadline",
	},
	{
		name:    "a scope sweep that keeps expired members",
		scripts: []string{"sweep_scopes"},
		// A due compact shard keeps its expired members, counted, and is
		// indexed at its earliest live member.
		edits: []edit{{"removed = removed + redis.call('HDEL', key, unpack(dead, i, math.min(i + 3999, #dead)))",
			"removed = removed + 0"}},
	},
	{
		name:    "a heartbeat that ignores the session token",
		scripts: []string{"heartbeat"},
		edits: []edit{
			{"if token ~= '' and token ~= r.token then", "if false then"},
			{"elseif r and token ~= '' then", "elseif false then"},
			{"elseif f and token ~= '' and token ~= f.token then", "elseif false then"},
		},
	},
	{
		name: "a count that forgets a shard",
		// A self-sized compact scope's member total misses what a sweep,
		// a split or a merge changes in shard 0.
		edits: []edit{
			{"c.t = c.t + size - rec", "if n ~= 0 then c.t = c.t + size - rec end"},
		},
	},
	{
		name: "a debounce that publishes twice",
		// The last published status is never recorded, so the same change
		// is published again at the next settle.
		edits: []edit{{"u.pub, u.pend, u.due = cur, nil, 0", "u.pend, u.due = nil, 0"}},
	},
	{
		name:    "a steady beat that leaves an unseen change to the sweep",
		scripts: []string{"beat"},
		// The steady beat applies a beat although its user's status is no
		// longer the one published (a device went idle or its window passed
		// unseen), so the change waits for a sweep instead of this beat.
		edits: []edit{{"and pub ~= best then return false end", "and false then return false end"},
			{"and pub ~= st then break end", "and false then break end"}},
		raceBlind: "its rounds seldom let one device's instant pass unseen while another of its user beats steadily",
	},
	{
		name: "a group commit that hands two callers each other's results",
		// Only the engine's group commit sends the calls of several
		// operations, of several scripts, in one round trip; there two
		// calls of one script, or two users' parts of one status reply,
		// trade results, as a batch whose outcomes went to the wrong
		// callers would. One call at a time never shows it (concOp does).
		eval:      swapCombined,
		raceBlind: "each race worker calls an engine of its own one call at a time, so its group commit never combines",
	},
	{
		name: "a publisher that sends every event twice, as two events",
		// A repeat under the same outbox ID is what at-least-once delivery
		// allows, and readers drop it; a repeat under another ID is a
		// second event.
		scripts: []string{"outbox_ack"},
		edits: []edit{{"redis.call('PUBLISH', ARGV[a + 1], ARGV[a + 2])",
			"redis.call('PUBLISH', ARGV[a + 1], ARGV[a + 2]); redis.call('PUBLISH', ARGV[a + 1], (string.gsub(ARGV[a + 2], '\"id\":\"', '\"id\":\"again.', 1)))"}},
	},
}

// wrap returns the Options.Wrap that plants b. It fails the test if an
// edit no longer applies to any script (the core changed under it).
func (b plantBug) wrap(tb testing.TB) func(core.Store) core.Store {
	tb.Helper()
	mutated := map[string]string{} // SHA → rewritten source
	used := make([]bool, len(b.edits))
	for _, s := range luascripts.All() {
		if len(b.scripts) > 0 && !contains(b.scripts, s.Name) {
			continue
		}
		src := s.Source()
		for i, e := range b.edits {
			if strings.Contains(src, e.old) {
				src = strings.ReplaceAll(src, e.old, e.new)
				used[i] = true
			}
		}
		if src != s.Source() {
			mutated[s.SHA] = src
		}
	}
	for i, u := range used {
		if !u {
			tb.Fatalf("planted bug %q: %q is in no script any more; update the plant", b.name, b.edits[i].old)
		}
	}
	return func(s core.Store) core.Store {
		return conformance.Intercept(s, conformance.Interceptor{
			Eval: func(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result {
				out := make([]core.Call, len(calls))
				for i, c := range calls {
					out[i] = c
					if src, ok := mutated[c.SHA]; ok {
						out[i] = core.Call{Source: src, Keys: c.Keys, Args: c.Args}
					}
				}
				if b.eval != nil {
					return b.eval(ctx, out, next)
				}
				return next(ctx, out)
			},
		})
	}
}

// swapCombined is the round trip of a group commit that mixes up its
// callers: in a round trip that carries calls of more than one script, the
// results of the first two calls of one script trade places or, if no
// script has two, the first two users' parts of a status reply do.
func swapCombined(ctx context.Context, calls []core.Call, next func(context.Context, []core.Call) []core.Result) []core.Result {
	res := next(ctx, calls)
	if len(res) != len(calls) || !mixed(calls) {
		return res
	}
	first := map[string]int{}
	for i, c := range calls {
		if j, ok := first[scriptOf(c)]; ok {
			res[i], res[j] = res[j], res[i]
			return res
		}
		first[scriptOf(c)] = i
	}
	for i, c := range calls {
		if c.SHA != statusSHA || res[i].Err != nil || res[i].Value.Kind != core.ValueArray || len(res[i].Value.Array) != 2 {
			continue
		}
		parts := res[i].Value.Array[1]
		if parts.Kind == core.ValueArray && len(parts.Array) >= 2 {
			swapped := append([]core.Value(nil), parts.Array...)
			swapped[0], swapped[1] = swapped[1], swapped[0]
			res[i].Value = core.Value{Kind: core.ValueArray, Array: []core.Value{res[i].Value.Array[0], {Kind: core.ValueArray, Array: swapped}}}
			return res
		}
	}
	return res
}

// statusSHA is the SHA of status.lua, whose reply swapCombined rewrites.
var statusSHA = luascripts.Status.SHA

func scriptOf(c core.Call) string {
	if c.SHA != "" {
		return c.SHA
	}
	return c.Source
}

// mixed reports whether calls are of more than one script.
func mixed(calls []core.Call) bool {
	for _, c := range calls[1:] {
		if scriptOf(c) != scriptOf(calls[0]) {
			return true
		}
	}
	return false
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestTeethSequences plants each bug under the model-based sequences on
// miniredis (go-redis) and checks that the suite fails within the everyday
// tier's number of sequences.
func TestTeethSequences(t *testing.T) {
	for _, b := range plantedBugs {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			opts := conformance.Options{Sequences: everydaySequences, MaxShrinks: 100, Seed: 1, Wrap: b.wrap(t)}
			r := conformance.Check(context.Background(), conformance.MiniredisTargets()[0], opts)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r.Passed() {
				t.Fatalf("the suite passed %d sequences with %q planted", r.Sequences, b.name)
			}
			t.Logf("planted %q: caught by %q after %d passing sequences; shrunk failure:\n%s", b.name, r.Property, r.Sequences, r.Failure)
		})
	}
}

// TestTeethRace plants each bug under the race suite on a real server and
// checks that it fails within half the everyday tier's race run.
func TestTeethRace(t *testing.T) {
	srv := redistest.Server(t)
	for _, b := range plantedBugs {
		t.Run(b.name, func(t *testing.T) {
			if b.raceBlind != "" {
				t.Skip("not a race-suite catch: " + b.raceBlind)
			}
			opts := conformance.Options{RaceDuration: everydayRace / 2, Seed: 1, Wrap: b.wrap(t)}
			r := conformance.CheckRace(context.Background(), conformance.AdapterTargets(srv.Addr), opts)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r.Passed() {
				t.Fatalf("the race suite passed %d rounds with %q planted", r.Rounds, b.name)
			}
			t.Logf("planted %q: caught by %q in round %d:\n%s", b.name, r.Property, r.Rounds, r.Failure)
		})
	}
}
