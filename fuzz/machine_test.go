package fuzz

import (
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

// machineClasses are the scope classes of the state-machine target: one per
// layout, with short windows so that sequences see members expire, and few
// compact shards so that members share them and pages cross them (a
// self-sized scope of two members a shard splits and merges among them).
func machineClasses() map[string]core.ScopeClass {
	return map[string]core.ScopeClass{
		"room":   {Layout: core.LayoutExact},
		"video":  {Layout: core.LayoutCompact, Window: 3 * time.Minute, ShardSize: 2, SweepInterval: 20 * time.Second},
		"approx": {Layout: core.LayoutApprox, Window: 2 * time.Minute},
		// Shards in slots of their own: the engine counts, pages and
		// sweeps them shard by shard, the model as one.
		"wide": {Layout: core.LayoutCompact, Window: 90 * time.Second, Shards: 3, Spread: true, SweepInterval: 10 * time.Second},
	}
}

// machineLongest bounds every window and delay of the target's configs, so
// that quiescence moves past all of them.
const machineLongest = 30 * time.Minute

// FuzzStateMachine decodes the input into a configuration and a sequence of
// events (heartbeats with or without activity, background, token, metadata
// and client time; batches; logins under each policy; logouts; disconnects;
// manual statuses with and without expiry; clock advances, some to the exact
// edge of a device's window; user and scope sweeps; scope touches, leaves,
// counts, pages and activity windows) and runs it against an Engine on
// miniredis and the Model in lockstep. After every event it compares all
// users' statuses and holds them to docs/design.md §5 and §6 computed here
// from the devices' own fields; every operation's results must be equal
// (approx counts within a small tolerance), counts never negative, published
// changes never From == To and chained per user. At the end the clock moves
// past everything: every user must be OFFLINE and have been published so.
func FuzzStateMachine(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
		"\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00" + // heartbeat u0/web active
		"\x07\x10\x20" + // advance
		"\x03\x01\x01\x01\x01\x00\x00\x00" + // login u:1/ios
		"\x09\x0a"))
	f.Fuzz(func(t *testing.T, data []byte) { runMachine(t, data) })
}

// runMachine is the body of FuzzStateMachine.
func runMachine(t testing.TB, data []byte) {
	s := newSource(data)
	cfg := core.Config{
		Policy:         core.Policy(s.intn(3)),
		MaxDevices:     pick(s, 0, 2, 3),
		LeaveDelay:     pick(s, 0, -1, 3*time.Second+250*time.Millisecond),
		CoalesceWindow: pick(s, 0, -1, 2500*time.Millisecond),
		IdleAfter:      pick(s, 0, 90*time.Second),
		PushWindow:     pick(s, 0, 3*time.Minute),
		UserBuckets:    pick(s, 1, 2, 16),
		ScopeBuckets:   pick(s, 1, 16),
		SweepBatch:     pick(s, 0, 1, 2),
		SweepBudget:    pick(s, 0, 1, 3),
		ReleaseAfter:   pick(s, 0, 1),
		Classes:        machineClasses(),
	}
	users := []string{"u0", "u:1", "{u2}"}
	devices := []string{"web", "ios", "desk", "droid", "x y"}
	kinds := []core.Kind{core.KindWeb, core.KindIOS, core.KindDesktop, core.KindAndroid, core.KindOther}
	scopes := []core.Scope{{Class: "room", ID: "r1"}, {Class: "room", ID: "r:2"}, {Class: "video", ID: "v1"},
		{Class: "approx", ID: "a1"}, {Class: "wide", ID: "w1"}}
	members := []string{"u0", "u:1", "{u2}", "m*", "m5"}
	p, err := newPair(t, cfg, users)
	if err != nil {
		t.Fatal(err)
	}
	var last []core.UserStatus // the engine's statuses after the previous event

	kind := func(dev int) core.Kind {
		if s.intn(8) == 0 {
			return kinds[s.intn(len(kinds))] // a device may change kind
		}
		return kinds[dev]
	}
	heartbeat := func() beat {
		u, d := s.intn(len(users)), s.intn(len(devices))
		hb := core.Heartbeat{User: users[u], Device: devices[d], Kind: kind(d), Gateway: pick(s, "", "gw1", "gw2"),
			Active: s.bool(), Background: s.intn(4) == 0}
		if s.intn(4) == 0 {
			hb.Meta = map[string]string{"v": pick(s, "", "1", "two")}
		}
		switch s.intn(4) {
		case 1:
			hb.At = p.now.Add(-time.Duration(s.intn(400)) * 997 * time.Millisecond)
		case 2:
			hb.At = p.now.Add(time.Duration(s.intn(400)) * 997 * time.Millisecond)
		}
		return beat{hb: hb, tokenMode: s.intn(4)}
	}
	for n := 0; n < 120 && !s.exhausted(); n++ {
		switch op := s.intn(18); op {
		case 0, 1:
			p.heartbeats([]beat{heartbeat()})
		case 2:
			beats := make([]beat, 2+s.intn(3))
			for i := range beats {
				beats[i] = heartbeat()
			}
			p.heartbeats(beats)
		case 3:
			u, d := s.intn(len(users)), s.intn(len(devices))
			l := core.Login{User: users[u], Device: devices[d], Kind: kind(d), Gateway: pick(s, "", "gw1", "gw2"),
				Background: s.intn(4) == 0, Meta: pick(s, map[string]string(nil), map[string]string{"k": "v"})}
			if pol := s.intn(4); pol > 0 {
				policy := core.Policy(pol - 1)
				l.Policy = &policy
			}
			p.login(l)
		case 4, 5:
			p.end(op == 4, users[s.intn(len(users))], devices[s.intn(len(devices))], s.intn(4))
		case 6:
			ttl := pick(s, 0, 1500*time.Millisecond, 45*time.Second, 4*time.Minute+333*time.Millisecond)
			p.manual(users[s.intn(len(users))], core.Manual(s.intn(3)), ttl)
		case 7:
			p.advance(time.Duration(1+s.intn(3000)) * time.Millisecond)
		case 8:
			p.advance(time.Duration(s.intn(200_000)) * time.Millisecond)
		case 9:
			p.advance(time.Duration(s.intn(1_300_000)) * time.Millisecond)
		case 10:
			// To the exact edge of a live device's window or idle time,
			// where the table's strict and non-strict comparisons differ.
			if target, ok := p.edge(last, s); ok {
				p.advance(target.Sub(p.now))
			}
		case 11:
			p.sweepUsers()
		case 12:
			p.sweepScopes()
		case 13:
			ts := make([]core.ScopeTouch, 1+s.intn(3))
			for i := range ts {
				ts[i] = core.ScopeTouch{Scope: scopes[s.intn(len(scopes))], Member: members[s.intn(len(members))]}
			}
			p.touch(ts)
		case 14:
			p.leave(scopes[s.intn(len(scopes))], members[s.intn(len(members))])
		case 15:
			sc := scopes[s.intn(len(scopes))]
			p.count(sc, sc.Class == "approx")
		case 16:
			p.members(scopes[s.intn(len(scopes))], 1+s.intn(4))
		case 17:
			sc := scopes[s.intn(len(scopes))]
			d := pick(s, time.Millisecond, 10*time.Second, 59*time.Second+999*time.Millisecond, time.Minute)
			p.activeWithin(sc, d, sc.Class == "approx")
		}
		last = p.observe()
	}
	p.quiesce(machineLongest)
}

// edge returns an instant at the exact edge of one live device's state:
// the last instant of its window or the one after, or the instant its idle
// time is reached or the one before.
func (p *pair) edge(sts []core.UserStatus, s *source) (time.Time, bool) {
	var devs []core.Device
	for _, st := range sts {
		devs = append(devs, st.Devices...)
	}
	if len(devs) == 0 {
		return time.Time{}, false
	}
	d := devs[s.intn(len(devs))]
	window := 2 * p.r.interval[d.Kind]
	if d.Background {
		window = p.r.push
	}
	target := pick(s,
		d.LastSeen.Add(window), d.LastSeen.Add(window+time.Millisecond),
		d.LastActive.Add(p.r.idle-time.Millisecond), d.LastActive.Add(p.r.idle))
	return target, target.After(p.now)
}
