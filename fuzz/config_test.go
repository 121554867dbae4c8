package fuzz

import (
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

// FuzzConfig fuzzes the durations and integers of core.Config and of a scope
// class. New and NewModel must agree, accept exactly the configurations the
// documented rules allow (zero means the default; durations at least 1 ms,
// LeaveDelay and CoalesceWindow may be negative; integers in range) and
// refuse the others with an *InputError naming a field at fault. A
// configuration they accept then runs a short scenario on an engine on
// miniredis and the model in lockstep (see pair) with clock steps derived
// from it, so that extreme windows, delays and counts are exercised too.
func FuzzConfig(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), 0, 0, 0, uint8(0))
	f.Add(int64(time.Minute), int64(3*time.Minute), int64(-1), int64(-1), int64(time.Second), int64(10*time.Second),
		int64(time.Minute), int64(0), 2, 3, 7, uint8(0x25))
	f.Add(int64(time.Millisecond), int64(time.Millisecond), int64(time.Millisecond), int64(time.Millisecond),
		int64(time.Millisecond), int64(time.Millisecond), int64(time.Millisecond), int64(time.Millisecond), 1, 1, 1, uint8(0x29))
	f.Add(int64(999_999), int64(1), int64(-5), int64(1_000_001), int64(-1), int64(0), int64(5*time.Millisecond), int64(0), 1025, 16385, 65537, uint8(0x20))
	f.Fuzz(func(t *testing.T, idle, push, leave, coalesce, grace, interval, window, bucket int64, maxDev, buckets, shards int, sel uint8) {
		d := func(v int64) time.Duration {
			if sel&0x10 != 0 {
				return time.Duration(v%3_600_000) * time.Millisecond // the scale of real settings
			}
			return time.Duration(v)
		}
		layout := core.Layout(sel >> 2 & 3) // 3 is not a layout
		cfg := core.Config{
			IdleAfter: d(idle), PushWindow: d(push), LeaveDelay: d(leave), CoalesceWindow: d(coalesce), KeyGrace: d(grace),
			MaxDevices: maxDev, UserBuckets: buckets, ScopeBuckets: buckets, Policy: core.Policy(sel & 3),
			Classes: map[string]core.ScopeClass{"x": {Layout: layout, Window: d(window), Bucket: d(bucket), Shards: shards}},
		}
		if sel&0x20 != 0 {
			cfg.Intervals = map[core.Kind]time.Duration{core.KindWeb: d(interval)}
		}

		// The documented rules, applied here independently.
		var bad []string
		dur := func(name string, v time.Duration, negOK bool) {
			if v != 0 && v < time.Millisecond && !(negOK && v < 0) {
				bad = append(bad, "Config."+name)
			}
		}
		dur("IdleAfter", cfg.IdleAfter, false)
		dur("PushWindow", cfg.PushWindow, false)
		dur("LeaveDelay", cfg.LeaveDelay, true)
		dur("CoalesceWindow", cfg.CoalesceWindow, true)
		dur("KeyGrace", cfg.KeyGrace, false)
		webInterval := 30 * time.Second
		if v, ok := cfg.Intervals[core.KindWeb]; ok {
			webInterval = v
			if v < time.Millisecond {
				bad = append(bad, "Config.Intervals")
			}
		}
		between := func(name string, v, lo, hi int) {
			if v != 0 && (v < lo || v > hi) {
				bad = append(bad, "Config."+name)
			}
		}
		between("MaxDevices", maxDev, 1, 1024)
		between("UserBuckets", buckets, 1, 16384)
		between("Classes[x].Shards", shards, 1, 65536)
		if cfg.Policy > core.PolicyExclusivePerKind {
			bad = append(bad, "Config.Policy")
		}
		if layout > core.LayoutApprox {
			bad = append(bad, "Config.Classes[x].Layout")
		}
		win := cfg.Classes["x"].Window.Milliseconds()
		if cfg.Classes["x"].Window == 0 {
			win = 2 * webInterval.Milliseconds()
		}
		// Bucket is an approx class's alone (ignored otherwise): by
		// default Window/10 but at least 1 ms, and a window spans at most
		// 1,000 buckets.
		bkt := cfg.Classes["x"].Bucket.Milliseconds()
		if cfg.Classes["x"].Bucket == 0 {
			bkt = max(win/10, 1)
		}
		switch {
		case win < 1:
			bad = append(bad, "Config.Classes[x]")
		case layout == core.LayoutCompact && win > (7*24*time.Hour).Milliseconds():
			// compact shards store stamps modulo 2^31 ms: at most 7 days
			bad = append(bad, "Config.Classes[x].Window")
		case layout == core.LayoutApprox && bkt < 1:
			bad = append(bad, "Config.Classes[x]")
		case layout == core.LayoutApprox && win/bkt > 1000:
			bad = append(bad, "Config.Classes[x].Bucket")
		}

		m := newMini(t, t0)
		ecfg := cfg
		ecfg.Clock = m.clk.Now
		_, errE := core.New(m.rec, ecfg)
		_, errM := core.NewModel(ecfg)
		if errName(errE) != errName(errM) {
			t.Fatalf("New: %v; NewModel: %v", errE, errM)
		}
		if len(bad) > 0 {
			checkConfigRejected(t, errE, bad)
			return
		}
		if errE != nil {
			t.Fatalf("a valid configuration refused: %v", errE)
		}
		runConfigScenario(t, cfg, layout, win)
	})
}

// checkConfigRejected is checkRejected for Config fields, whose names the
// test knows up to an index or a suffix.
func checkConfigRejected(t *testing.T, err error, bad []string) {
	t.Helper()
	field := strings.TrimPrefix(errName(err), "invalid ")
	if field == errName(err) {
		t.Fatalf("an invalid configuration (%q) accepted or refused otherwise: %v", bad, err)
	}
	for _, b := range bad {
		if strings.HasPrefix(field, b) {
			return
		}
	}
	t.Errorf("configuration error blames %q, want one of %q (%v)", field, bad, err)
}

// scenarioLimit bounds the windows a scenario runs with: miniredis keeps
// TTLs as time.Duration, which holds at most 292 years, where Redis takes
// any millisecond count; longer windows would expire there at once.
const scenarioLimit = 50 * 365 * 24 * time.Hour

func runConfigScenario(t *testing.T, cfg core.Config, layout core.Layout, win int64) {
	longest := time.Duration(0)
	for _, v := range []time.Duration{cfg.IdleAfter, cfg.PushWindow, cfg.LeaveDelay, cfg.CoalesceWindow, cfg.KeyGrace,
		2 * cfg.Intervals[core.KindWeb], 2 * time.Minute, 10 * time.Minute, time.Duration(win) * time.Millisecond} {
		longest = max(longest, v)
	}
	if longest > scenarioLimit || longest < 0 || cfg.UserBuckets > 64 {
		return // see scenarioLimit; and a sweep makes one call per bucket
	}
	p, err := newPair(t, cfg, []string{"u"})
	if err != nil {
		t.Fatal(err)
	}
	sc := core.Scope{Class: "x", ID: "s"}
	p.login(core.Login{User: "u", Device: "web", Kind: core.KindWeb, Gateway: "gw"})
	p.heartbeats([]beat{{hb: core.Heartbeat{User: "u", Device: "phone", Kind: core.KindIOS, Background: true}}})
	p.touch([]core.ScopeTouch{{Scope: sc, Member: "m1"}, {Scope: sc, Member: "m2"}})
	p.observe()
	r := rulesOf(cfg)
	for _, step := range []time.Duration{
		2*r.interval[core.KindWeb] + time.Millisecond, r.idle, time.Millisecond, r.push,
		time.Duration(win)*time.Millisecond + 3*time.Millisecond,
	} {
		if step > scenarioLimit {
			continue
		}
		p.advance(step)
		p.observe()
		p.sweepUsers()
		p.sweepScopes()
		p.count(sc, layout == core.LayoutApprox)
		p.activeWithin(sc, time.Duration(win)*time.Millisecond, layout == core.LayoutApprox)
		if layout != core.LayoutApprox {
			p.members(sc, 1)
		}
		p.observe()
		p.heartbeats([]beat{{hb: core.Heartbeat{User: "u", Device: "web", Kind: core.KindWeb, Active: step == time.Millisecond}}})
		p.touch([]core.ScopeTouch{{Scope: sc, Member: "m1"}})
	}
	p.quiesce(longest)
}
