package conformance

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/presencekit/presence/core"
)

// The linearizability check replays a round's history on core.Model, one
// user or one scope at a time (their states are independent; sweeps appear
// in every partition, reduced to what they did there). Porcupine searches
// for an order of the operations that respects real time and in which the
// model, run at each operation's own instant with the tokens the engine
// drew, returns what the engine returned. Model states are told apart by a
// fingerprint of their fields; a state's model is handed to the first
// successor the search tries and rebuilt by replay when the search comes
// back to it.

// modelBox is a model with the clock and token source a replay sets.
type modelBox struct {
	m   *core.Model
	clk *frozenClock
	rd  *feedReader
}

// feedReader hands out the token bytes loaded for the next operation, then
// zeros.
type feedReader struct{ b []byte }

func (f *feedReader) Read(p []byte) (int, error) {
	n := copy(p, f.b)
	f.b = f.b[n:]
	clear(p[n:])
	return len(p), nil
}

// linState is a state of the search: the operations applied so far (a
// chain back to the initial state), the model in that state if no
// successor has taken it, and its fingerprint.
type linState struct {
	parent *linState
	op     *raceOp
	box    *modelBox
	fp     string
}

type linChecker struct {
	cfg core.Config
	x   *runner
	// tolerance bounds an approximate count's error: the loosest of the
	// round's backends
	tolerance func(exact int64) int64
}

func (c *linChecker) newBox() *modelBox {
	b := &modelBox{clk: &frozenClock{}, rd: &feedReader{}}
	cfg := c.cfg
	cfg.Clock, cfg.Rand = b.clk.Now, b.rd
	m, err := core.NewModel(cfg)
	if err != nil {
		panic("conformance: model of a race round: " + err.Error()) // the engines accepted the same configuration
	}
	b.m = m
	return b
}

// apply runs the projected operation p on the model in b and returns what
// the model observed, in p's form.
func (c *linChecker) apply(b *modelBox, p *raceOp) *raceOp {
	q := p.inputs()
	b.clk.ms.Store(p.now)
	b.rd.b = p.tokenBytes()
	q.exec(context.Background(), b.m)
	if r, ok := q.out.(core.SweepReport); ok && p.user != "" {
		r.Changes = changesOf(r.Changes, p.user)
		q.out = r
	}
	return q
}

func (c *linChecker) replay(s *linState) *modelBox {
	var chain []*raceOp
	for ; s.parent != nil; s = s.parent {
		chain = append(chain, s.op)
	}
	b := c.newBox()
	for i := len(chain) - 1; i >= 0; i-- {
		c.apply(b, chain[i])
	}
	return b
}

func (c *linChecker) take(s *linState) *modelBox {
	if b := s.box; b != nil {
		s.box = nil
		return b
	}
	return c.replay(s)
}

func (c *linChecker) step(state, input, _ any) (bool, any) {
	s, p := state.(*linState), input.(*raceOp)
	if p.isSweep() && p.held() {
		// Another sweeper held the lock: the sweep did nothing.
		return len(p.report().Changes) == 0, s
	}
	b := c.take(s)
	q := c.apply(b, p)
	if ok, _ := agree(q.outcome(c.x), p.outcome(c.x), c.tolerance); !ok {
		if !staleRead(p, q) {
			return false, nil
		}
		// The client's cache answered: the server ran nothing, so the
		// model's read leaves no trace (s replays its model, b is dropped).
		return true, s
	}
	return true, &linState{parent: s, op: p, box: b, fp: fingerprint(b.m)}
}

// staleRead reports whether p, a count read through a client-side cache,
// returned an older count than the model's q: the cache lags behind the
// server until the invalidation arrives, which docs/design.md §9 allows.
func staleRead(p, q *raceOp) bool {
	return p.cached && p.err == nil && q.err == nil && as[core.Count](p.out).AsOf.Before(as[core.Count](q.out).AsOf)
}

func changesOf(cs []core.Change, user string) []core.Change {
	var out []core.Change
	for _, c := range cs {
		if c.User == user {
			out = append(out, c)
		}
	}
	return out
}

func (c *linChecker) model() porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			b := c.newBox()
			return &linState{box: b, fp: fingerprint(b.m)}
		},
		Step:  c.step,
		Equal: func(a, b any) bool { return a.(*linState).fp == b.(*linState).fp },
		Hash: func(s any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(*linState).fp))
			return h.Sum64()
		},
		DescribeOperation: func(in, _ any) string { return in.(*raceOp).describe(c.x) },
	}
}

// partition splits the history into one history per user and per scope,
// each operation reduced to its part there.
func (r *round) partition() map[string][]*raceOp {
	users, scopes := map[string]bool{}, map[core.Scope]bool{}
	for _, o := range r.hist {
		if u := userOf(o.op); u != "" {
			users[u] = true
		}
		if sc, ok := scopeOf(o.op); ok {
			scopes[sc] = true
		}
		switch op := o.op.(type) {
		case core.ReadStatuses:
			for _, u := range op.Users {
				users[u] = true
			}
		case core.TouchBatch:
			for _, t := range op {
				scopes[t.Scope] = true
			}
		}
	}
	parts := map[string][]*raceOp{}
	add := func(key string, p *raceOp) { parts[key] = append(parts[key], p) }
	for _, o := range r.hist {
		if u := userOf(o.op); u != "" {
			add("user "+u, o)
			continue
		}
		if sc, ok := scopeOf(o.op); ok {
			add("scope "+sc.String(), o)
			continue
		}
		switch op := o.op.(type) {
		case core.ReadStatuses:
			sts := o.statuses()
			for i, u := range op.Users {
				p := o.inputs()
				p.op, p.err = core.ReadStatus{User: u}, o.err
				if o.err == nil {
					p.out = sts[i]
				}
				add("user "+u, p)
			}
		case core.SweepUsers:
			for u := range users {
				p := o.inputs()
				p.user, p.err = u, o.err
				p.out = core.SweepReport{Held: o.report().Held, Changes: changesOf(o.report().Changes, u)}
				add("user "+u, p)
			}
		case core.TouchBatch:
			by := map[core.Scope]core.TouchBatch{}
			for _, t := range op {
				by[t.Scope] = append(by[t.Scope], t)
			}
			for sc, ts := range by {
				p := o.inputs()
				p.op, p.err = ts, o.err
				add("scope "+sc.String(), p)
			}
		case core.SweepScopes:
			for sc := range scopes {
				p := o.inputs()
				p.err, p.out = o.err, core.SweepReport{Held: o.report().Held}
				add("scope "+sc.String(), p)
			}
		}
	}
	return parts
}

// userOf is the one user an op of the race workload concerns, or "" (a
// batch's beats are one user's).
func userOf(op core.Op) string {
	switch op := op.(type) {
	case core.Heartbeat:
		return op.User
	case core.HeartbeatBatch:
		return op[0].User
	case core.Login:
		return op.User
	case core.Logout:
		return op.User
	case core.Disconnect:
		return op.User
	case core.SetManual:
		return op.User
	case core.ReadStatus:
		return op.User
	}
	return ""
}

// scopeOf is the one scope an op concerns, if it concerns one.
func scopeOf(op core.Op) (core.Scope, bool) {
	switch op := op.(type) {
	case core.Leave:
		return op.Scope, true
	case core.ReadCount:
		return op.Scope, true
	case core.ReadMembers:
		return op.Scope, true
	case core.ReadActive:
		return op.Scope, true
	}
	return core.Scope{}, false
}

// checkLinearizable checks each partition of the round's history.
func (r *round) checkLinearizable() *failure {
	c := &linChecker{cfg: r.cfg, x: r.x, tolerance: r.tolerance}
	c.cfg.Clock, c.cfg.Rand = nil, nil
	model := c.model()
	parts := r.partition()
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops := make([]porcupine.Operation, len(parts[k]))
		for i, p := range parts[k] {
			ops[i] = porcupine.Operation{ClientId: p.client, Input: p, Output: p, Call: p.call, Return: p.ret}
		}
		res, info := porcupine.CheckOperationsVerbose(model, ops, raceCheckTimeout)
		switch res {
		case porcupine.Ok:
			r.partitions++
		case porcupine.Unknown:
			r.unknown++
		default:
			return r.illegal(c, k, parts[k], info)
		}
	}
	return nil
}

// illegal reports a partition that is not linearizable: its operations,
// and the longest prefix of an order that the model accepts.
func (r *round) illegal(c *linChecker, key string, ops []*raceOp, info porcupine.LinearizationInfo) *failure {
	var b strings.Builder
	fmt.Fprintf(&b, "the history of %s (%d operations) is not linearizable against the model\n", key, len(ops))
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	in := map[int]bool{}
	if len(longest) > 0 {
		b.WriteString("longest order the model accepts:\n")
		for _, op := range longest {
			o := op.Input.(*raceOp)
			in[o.id] = true
			b.WriteString("  " + o.describe(r.x) + "\n")
		}
	}
	b.WriteString("operations that cannot come next:\n")
	sorted := append([]*raceOp(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].call < sorted[j].call })
	n := 0
	for _, o := range sorted {
		if !in[o.id] && n < 12 {
			b.WriteString("  " + o.describe(r.x) + "\n")
			// What the model, after the longest order, makes of it.
			box := c.newBox()
			for _, op := range longest {
				if p := op.Input.(*raceOp); !(p.isSweep() && p.held()) {
					c.apply(box, p)
				}
			}
			if o.isSweep() && o.held() {
				b.WriteString("      (a held sweep: the model expects no changes)\n")
			} else {
				b.WriteString("      model then: " + render(c.apply(box, o).outcome(r.x)) + "\n")
			}
			n++
		}
	}
	return &failure{property: propLinearizable, text: b.String()}
}
