package conformance

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/presencekit/presence/core"
)

// seqConfig is the generated part of a sequence's configuration: the
// initial state of a gopter commands run. Everything else is fixed (see
// config).
type seqConfig struct {
	Seed                      uint64
	Policy                    core.Policy
	UserBuckets, ScopeBuckets int
	Shards                    int
	Spread                    bool
	SweepBatch, SweepBudget   int
	ReleaseAfter              int
	LeaveDelay, Coalesce      time.Duration
	KickFence                 time.Duration
	MaxDevices                int
	// Focus draws the sequence's steps from randomFocusedOp instead of
	// randomOp.
	Focus bool
}

func (c seqConfig) String() string {
	return fmt.Sprintf("seed=%d policy=%s userBuckets=%d scopeBuckets=%d shards=%d spread=%t sweepBatch=%d sweepBudget=%d releaseAfter=%d leaveDelay=%v coalesce=%v kickFence=%v maxDevices=%d focus=%t",
		c.Seed, c.Policy, c.UserBuckets, c.ScopeBuckets, c.Shards, c.Spread, c.SweepBatch, c.SweepBudget,
		c.ReleaseAfter, c.LeaveDelay, c.Coalesce, c.KickFence, c.MaxDevices, c.Focus)
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

func randomConfig(r *rand.Rand) seqConfig {
	return seqConfig{
		Seed:         r.Uint64(),
		Policy:       pick(r, core.PolicyMulti, core.PolicyMulti, core.PolicyExclusive, core.PolicyExclusivePerKind),
		UserBuckets:  pick(r, 1, 2, 5),
		ScopeBuckets: pick(r, 1, 3, 5),
		Shards:       pick(r, 1, 2, 5),
		Spread:       r.Intn(4) == 0,
		SweepBatch:   pick(r, 1, 2, 256),
		SweepBudget:  pick(r, 1, 4, 512),
		ReleaseAfter: pick(r, 1, 2, 3),
		LeaveDelay:   pick(r, -1, 3*time.Second, 15*time.Second),
		Coalesce:     pick(r, -1, time.Second, 4*time.Second),
		KickFence:    pick(r, 40*time.Second, 90*time.Second, time.Hour),
		MaxDevices:   pick(r, 2, 3, 16),
		Focus:        r.Intn(4) == 0,
	}
}

// nextOp draws the next step of a sequence of configuration c: now and
// then an edge of a rule (edgeOp) or, over every user, a concurrent step
// (concOp), else a step of randomOp or randomFocusedOp.
func (c seqConfig) nextOp(r *rand.Rand) op {
	n := r.Intn(100)
	if c.Focus {
		if n < 10 {
			return c.randomEdgeOp(r, false)
		}
		return randomFocusedOp(r)
	}
	switch {
	case n < 4:
		return c.randomEdgeOp(r, false)
	case n < 6:
		return c.randomEdgeOp(r, true)
	case n < 9:
		return randomConcOp(r)
	}
	return randomOp(r)
}

// Timing of the generated configurations. Every duration that a key's
// lifetime is made of is an even number of milliseconds except the key
// grace and the count lifetime, which are odd, and the clock only moves by
// even amounts: so no instant of a sequence falls exactly on a key's expiry,
// where miniredis (expired at TTL 0) and Redis (expired below 0) differ.
const (
	graceVirtual    = 10*time.Second + time.Millisecond
	countTTLVirtual = 45*time.Second + time.Millisecond
	// On a server that keeps wall-clock time no key may expire during a
	// sequence in virtual time either: longer than any sequence lasts.
	graceWall = time.Hour + time.Millisecond
	maxSkew   = time.Minute
)

// config turns a generated configuration into the core's, for a backend
// whose expiry follows the virtual clock or not.
func (c seqConfig) config(prefix string, virtual bool) core.Config {
	grace, countTTL := graceVirtual, countTTLVirtual
	if !virtual {
		grace, countTTL = graceWall, graceWall
	}
	return core.Config{
		Prefix: prefix,
		Intervals: map[core.Kind]time.Duration{
			core.KindWeb: 10 * time.Second, core.KindDesktop: 12 * time.Second, core.KindOther: 10 * time.Second,
			core.KindIOS: 24 * time.Second, core.KindAndroid: 30 * time.Second,
		},
		IdleAfter:      30 * time.Second,
		PushWindow:     70 * time.Second,
		LeaveDelay:     c.LeaveDelay,
		CoalesceWindow: c.Coalesce,
		KeyGrace:       grace,
		KickFence:      c.KickFence,
		MaxDevices:     c.MaxDevices,
		MaxSkew:        maxSkew,
		Policy:         c.Policy,
		UserBuckets:    c.UserBuckets,
		ScopeBuckets:   c.ScopeBuckets,
		Classes: map[string]core.ScopeClass{
			"ex": {Layout: core.LayoutExact, Window: 20 * time.Second, SweepInterval: 3 * time.Second},
			// Shards: a spread scope's fixed shards; else, as ShardSize,
			// a self-sized scope splits and merges among the generated
			// members
			"cp": {Layout: core.LayoutCompact, Window: 30 * time.Second, SweepInterval: 5 * time.Second,
				Shards: c.Shards, ShardSize: c.Shards, Spread: c.Spread},
			"ap": {Layout: core.LayoutApprox, Window: 30 * time.Second, SweepInterval: 4 * time.Second, Bucket: 6 * time.Second},
		},
		SweepBatch:     c.SweepBatch,
		SweepBudget:    c.SweepBudget,
		ReleaseAfter:   c.ReleaseAfter,
		CountTTL:       countTTL,
		LastGoodCounts: -1,
	}
}

// Identifiers of the generated steps: few, so that steps collide, and some
// with the bytes that key layouts must survive (':', '{', '}', spaces).
var (
	genUsers    = []string{"u1", "u2", "u3", "a:b {c}"}
	genDevices  = []string{"d1", "d2", "d:3"}
	genGateways = []string{"", "g1", "g2"}
	feedGateway = []string{"g1", "g2"}
	genKinds    = []core.Kind{core.KindWeb, core.KindDesktop, core.KindIOS, core.KindAndroid, core.KindOther}
	genScopes   = []core.Scope{
		{Class: "ex", ID: "r1"}, {Class: "ex", ID: "r{2}"},
		{Class: "cp", ID: "v1"}, {Class: "cp", ID: "v:2"},
		{Class: "ap", ID: "a1"},
	}
	genMembers = []string{"m1", "m2", "m3", "m4", "u1", "m {5}"}
	genMetas   = []map[string]string{nil, nil, nil, {}, {"app": "1.2"}, {"os": "ios", "lang": "de:CH"}}
)

// evenMillis returns an even number of milliseconds in [lo, hi), not a
// whole second.
func evenMillis(r *rand.Rand, lo, hi time.Duration) time.Duration {
	for {
		ms := lo.Milliseconds() + r.Int63n((hi - lo).Milliseconds())
		ms &^= 1
		if ms%1000 != 0 && ms >= lo.Milliseconds() {
			return time.Duration(ms) * time.Millisecond
		}
	}
}

// randomBeat draws a heartbeat and the token and client time it sends.
func randomBeat(r *rand.Rand) (core.Heartbeat, sym) {
	// drawn in this order, so that a seed makes the sequences it always made
	hb := core.Heartbeat{User: pick(r, genUsers...), Device: pick(r, genDevices...), Kind: pick(r, genKinds...)}
	s := sym{tok: pick(r, tokCur, tokCur, tokCur, tokNone, tokNone, tokStale, tokBogus)}
	hb.Active, hb.Background, hb.Gateway, hb.Meta = r.Intn(3) != 0, r.Intn(6) == 0, pick(r, genGateways...), pick(r, genMetas...)
	switch r.Intn(12) {
	case 0:
		s.at = 1
	case 1:
		s.at = 2
	}
	return hb, s
}

// randomOp draws one step. The weights favour the steps that move state
// and the clock, and read back often enough to see every change.
func randomOp(r *rand.Rand) op {
	n := r.Intn(100)
	switch {
	case n < 18:
		switch r.Intn(10) {
		case 0, 1, 2, 3:
			return advanceOp{evenMillis(r, 2*time.Millisecond, time.Second)}
		case 4, 5, 6, 7, 8:
			return advanceOp{evenMillis(r, time.Second, 20*time.Second)}
		default:
			return advanceOp{evenMillis(r, 20*time.Second, 40*time.Second)}
		}
	case n < 34:
		hb, s := randomBeat(r)
		return call{op: hb, syms: []sym{s}}
	case n < 37:
		c := call{}
		beats := make(core.HeartbeatBatch, 2+r.Intn(2))
		for i := range beats {
			var s sym
			beats[i], s = randomBeat(r)
			c.syms = append(c.syms, s)
		}
		c.op = beats
		return c
	case n < 44:
		l := core.Login{User: pick(r, genUsers...), Device: pick(r, genDevices...), Kind: pick(r, genKinds...),
			Gateway: pick(r, genGateways...), Background: r.Intn(6) == 0, Meta: pick(r, genMetas...)}
		if r.Intn(3) == 0 {
			p := pick(r, core.PolicyMulti, core.PolicyExclusive, core.PolicyExclusivePerKind)
			l.Policy = &p
		}
		s := sym{}
		switch r.Intn(8) {
		case 0, 1:
			s.tok = tokCur
		case 2:
			s.tok = tokBogus
		}
		return call{op: l, syms: []sym{s}}
	case n < 50:
		logout, user, dev := r.Intn(2) == 0, pick(r, genUsers...), pick(r, genDevices...)
		return endCall(logout, user, dev, pick(r, tokCur, tokCur, tokNone, tokStale))
	case n < 53:
		o := core.SetManual{User: pick(r, genUsers...), Manual: pick(r, core.ManualNone, core.ManualDND, core.ManualInvisible)}
		if o.Manual != core.ManualNone && r.Intn(2) == 0 {
			o.TTL = evenMillis(r, time.Second, 30*time.Second)
		}
		return call{op: o}
	case n < 59:
		return call{op: core.ReadStatus{User: pick(r, genUsers...)}}
	case n < 61:
		return call{op: core.ReadStatuses{Users: []string{pick(r, genUsers...), pick(r, genUsers...), pick(r, genUsers...)}}}
	case n < 70:
		return call{op: core.ScopeTouch{Scope: pick(r, genScopes...), Member: pick(r, genMembers...)}}
	case n < 72:
		ts := make(core.TouchBatch, 2+r.Intn(3))
		for i := range ts {
			ts[i] = core.ScopeTouch{Scope: pick(r, genScopes...), Member: pick(r, genMembers...)}
		}
		return call{op: ts}
	case n < 75:
		return call{op: core.Leave{Scope: pick(r, genScopes...), Member: pick(r, genMembers...)}}
	case n < 81:
		return call{op: core.ReadCount{Scope: pick(r, genScopes...)}, twice: r.Intn(3) == 0}
	case n < 84:
		return call{op: core.ReadMembers{Scope: pick(r, genScopes...), Limit: pick(r, 1, 2, 3, 1000)}}
	case n < 86:
		sc := pick(r, genScopes...)
		win := 20 * time.Second
		if sc.Class != "ex" {
			win = 30 * time.Second
		}
		return call{op: core.ReadActive{Scope: sc, Within: evenMillis(r, time.Second, win)}}
	case n < 92:
		return call{op: core.SweepUsers{}}
	case n < 98:
		return call{op: core.SweepScopes{}}
	}
	return invalidCalls[r.Intn(len(invalidCalls))]
}

// The devices of a focused sequence's one user: a phone that stays in the
// background and a browser tab in the foreground.
const (
	focusUser  = "u1"
	focusPhone = "d1"
	focusTab   = "d2"
)

// randomFocusedOp draws one step of a sequence that plays one user's two
// devices against each other, so that one device's deadline passes while
// the other keeps beating and the sweeps run between them. Sequences over
// every user, device and scope seldom line these up (a steady beat that
// re-indexed its user past another device's deadline went unnoticed by
// them).
func randomFocusedOp(r *rand.Rand) op {
	n := r.Intn(100)
	switch {
	case n < 30:
		if r.Intn(4) == 0 {
			return advanceOp{evenMillis(r, 2*time.Millisecond, time.Second)}
		}
		return advanceOp{evenMillis(r, time.Second, 15*time.Second)}
	case n < 50:
		return call{op: core.Heartbeat{User: focusUser, Device: focusPhone, Kind: core.KindIOS, Background: true},
			syms: []sym{{tok: pick(r, tokCur, tokCur, tokCur, tokNone)}}}
	case n < 68:
		return call{op: core.Heartbeat{User: focusUser, Device: focusTab, Kind: core.KindWeb, Active: r.Intn(2) == 0},
			syms: []sym{{tok: pick(r, tokCur, tokCur, tokCur, tokNone)}}}
	case n < 72:
		if r.Intn(2) == 0 {
			return call{op: core.Login{User: focusUser, Device: focusPhone, Kind: core.KindIOS, Background: true}, syms: []sym{{}}}
		}
		return call{op: core.Login{User: focusUser, Device: focusTab, Kind: core.KindWeb}, syms: []sym{{}}}
	case n < 75:
		logout := r.Intn(2) == 0
		return endCall(logout, focusUser, pick(r, focusPhone, focusTab), tokCur)
	case n < 77:
		o := core.SetManual{User: focusUser, Manual: pick(r, core.ManualNone, core.ManualDND)}
		if o.Manual != core.ManualNone {
			o.TTL = evenMillis(r, time.Second, 30*time.Second)
		}
		return call{op: o}
	case n < 92:
		return call{op: core.SweepUsers{}}
	}
	return call{op: core.ReadStatus{User: focusUser}}
}

// endCall is a logout (or a disconnect) of user/dev sending token tok.
func endCall(logout bool, user, dev string, tok tokenMode) call {
	var op core.Op = core.Disconnect{User: user, Device: dev}
	if logout {
		op = core.Logout{User: user, Device: dev}
	}
	return call{op: op, syms: []sym{{tok: tok}}}
}
