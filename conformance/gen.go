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

func randomBeat(r *rand.Rand) beatSpec {
	b := beatSpec{
		user: pick(r, genUsers...), dev: pick(r, genDevices...), kind: pick(r, genKinds...),
		tok:    pick(r, tokCur, tokCur, tokCur, tokNone, tokNone, tokStale, tokBogus),
		active: r.Intn(3) != 0, bg: r.Intn(6) == 0, gw: pick(r, genGateways...), meta: pick(r, genMetas...),
	}
	switch r.Intn(12) {
	case 0:
		b.at = 1
	case 1:
		b.at = 2
	}
	return b
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
		return beatOp{beats: []beatSpec{randomBeat(r)}, skew: maxSkew}
	case n < 37:
		beats := make([]beatSpec, 2+r.Intn(2))
		for i := range beats {
			beats[i] = randomBeat(r)
		}
		return beatOp{beats: beats, skew: maxSkew}
	case n < 44:
		o := loginOp{user: pick(r, genUsers...), dev: pick(r, genDevices...), kind: pick(r, genKinds...),
			gw: pick(r, genGateways...), bg: r.Intn(6) == 0, meta: pick(r, genMetas...)}
		if r.Intn(3) == 0 {
			p := pick(r, core.PolicyMulti, core.PolicyExclusive, core.PolicyExclusivePerKind)
			o.policy = &p
		}
		switch r.Intn(8) {
		case 0, 1:
			o.tok = tokCur
		case 2:
			o.tok = tokBogus
		}
		return o
	case n < 50:
		return endOp{logout: r.Intn(2) == 0, user: pick(r, genUsers...), dev: pick(r, genDevices...),
			tok: pick(r, tokCur, tokCur, tokNone, tokStale)}
	case n < 53:
		o := manualOp{user: pick(r, genUsers...), m: pick(r, core.ManualNone, core.ManualDND, core.ManualInvisible)}
		if o.m != core.ManualNone && r.Intn(2) == 0 {
			o.ttl = evenMillis(r, time.Second, 30*time.Second)
		}
		return o
	case n < 59:
		return statusOp{users: []string{pick(r, genUsers...)}}
	case n < 61:
		return statusOp{users: []string{pick(r, genUsers...), pick(r, genUsers...), pick(r, genUsers...)}}
	case n < 70:
		return touchOp{touches: []core.ScopeTouch{{Scope: pick(r, genScopes...), Member: pick(r, genMembers...)}}}
	case n < 72:
		ts := make([]core.ScopeTouch, 2+r.Intn(3))
		for i := range ts {
			ts[i] = core.ScopeTouch{Scope: pick(r, genScopes...), Member: pick(r, genMembers...)}
		}
		return touchOp{touches: ts}
	case n < 75:
		return leaveOp{sc: pick(r, genScopes...), member: pick(r, genMembers...)}
	case n < 81:
		return countOp{sc: pick(r, genScopes...), twice: r.Intn(3) == 0}
	case n < 84:
		return membersOp{sc: pick(r, genScopes...), limit: pick(r, 1, 2, 3, 1000)}
	case n < 86:
		sc := pick(r, genScopes...)
		win := 20 * time.Second
		if sc.Class != "ex" {
			win = 30 * time.Second
		}
		return activeOp{sc: sc, d: evenMillis(r, time.Second, win)}
	case n < 92:
		return sweepOp{scopes: false}
	case n < 98:
		return sweepOp{scopes: true}
	}
	return invalidOp{which: r.Intn(len(invalidNames))}
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
		return beatOp{beats: []beatSpec{{user: focusUser, dev: focusPhone, kind: core.KindIOS, bg: true,
			tok: pick(r, tokCur, tokCur, tokCur, tokNone)}}, skew: maxSkew}
	case n < 68:
		return beatOp{beats: []beatSpec{{user: focusUser, dev: focusTab, kind: core.KindWeb, active: r.Intn(2) == 0,
			tok: pick(r, tokCur, tokCur, tokCur, tokNone)}}, skew: maxSkew}
	case n < 72:
		if r.Intn(2) == 0 {
			return loginOp{user: focusUser, dev: focusPhone, kind: core.KindIOS, bg: true}
		}
		return loginOp{user: focusUser, dev: focusTab, kind: core.KindWeb}
	case n < 75:
		return endOp{logout: r.Intn(2) == 0, user: focusUser, dev: pick(r, focusPhone, focusTab), tok: tokCur}
	case n < 77:
		o := manualOp{user: focusUser, m: pick(r, core.ManualNone, core.ManualDND)}
		if o.m != core.ManualNone {
			o.ttl = evenMillis(r, time.Second, 30*time.Second)
		}
		return o
	case n < 92:
		return sweepOp{scopes: false}
	}
	return statusOp{users: []string{focusUser}}
}
