package fuzz

import (
	"context"
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// skewed reports whether the instant at is further than skew from now, in
// exact arithmetic (no int64 can overflow here).
func skewed(at, now time.Time, skew time.Duration) bool {
	ns := func(t time.Time) *big.Int {
		n := big.NewInt(t.Unix())
		n.Mul(n, big.NewInt(1e9))
		return n.Add(n, big.NewInt(int64(t.Nanosecond())))
	}
	d := new(big.Int).Sub(ns(at), ns(now))
	return d.Abs(d).Cmp(big.NewInt(int64(skew))) > 0
}

// FuzzTimes fuzzes every time a request carries: Heartbeat.At (int64
// milliseconds from math.MinInt64 to math.MaxInt64, far past and future,
// near the skew limit, or whole seconds, as a gateway parsing a client's
// seconds would build it), the MaxSkew it is held to, SetManual's ttl and
// ActiveWithin's d, on an engine on miniredis and the model with an
// injected clock. No call may panic; an invalid duration is an *InputError;
// ErrClockSkew is returned exactly when |At − now| > MaxSkew and then
// nothing changes; an accepted At moves last-active to min(At, now) at
// most, never back; a manual status shows its expiry and ends at it.
func FuzzTimes(f *testing.F) {
	f.Add(int64(0), int64(-1000), int64(0), int64(time.Minute), int64(10*time.Second), uint8(1))
	f.Add(int64(12345), int64(math.MinInt64), int64(time.Second), int64(0), int64(time.Minute), uint8(0))
	f.Add(int64(1), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), uint8(0))
	f.Add(int64(0), int64(300000), int64(0), int64(999999), int64(999999), uint8(1))
	f.Fuzz(func(t *testing.T, nowOff, atRaw, skewNs, ttlNs, dNs int64, sel uint8) {
		// "Now" is the server's clock: somewhere in 2001..2200, never the
		// epoch itself (0 ms reads as "no time" in replies).
		now := time.UnixMilli(1_000_000_000_000 + int64(uint64(nowOff)%6_000_000_000_000))
		skew := time.Duration(skewNs)
		if sel&0x80 != 0 {
			skew = 0 // the default
		}
		var at time.Time
		switch sel & 3 {
		case 0: // any int64 milliseconds
			at = time.UnixMilli(atRaw)
		case 1: // near the limit, in milliseconds
			at = time.UnixMilli(now.UnixMilli() + atRaw%(2*orSkew(skew).Milliseconds()+3))
		case 2: // any int64 seconds
			at = time.Unix(atRaw, 0)
		case 3: // exactly at the limit, or one millisecond either side
			at = now.Add(orSkew(skew).Truncate(time.Millisecond) * time.Duration(1-2*(atRaw&1)))
			at = at.Add(time.Duration(atRaw%3-1) * time.Millisecond)
		}
		ttl := time.Duration(ttlNs)
		if sel&0x04 != 0 {
			ttl = time.Duration(ttlNs % int64(10*time.Second))
		}
		d := time.Duration(dNs)
		if sel&0x08 != 0 {
			d = time.Duration(dNs % int64(2*time.Minute))
		}

		ctx := context.Background()
		m := newMini(t, now.Add(-1234*time.Millisecond))
		cfg := core.Config{MaxSkew: skew, Clock: m.clk.Now, Classes: testClasses()}
		eng, errE := core.New(m.rec, cfg)
		mod, errM := core.NewModel(cfg)
		if bad := skew != 0 && skew < time.Millisecond; bad {
			checkRejected(t, "New", errE, []string{"Config.MaxSkew"})
			checkRejected(t, "NewModel", errM, []string{"Config.MaxSkew"})
			return
		}
		if errE != nil || errM != nil {
			t.Fatalf("valid MaxSkew %v refused: %v, %v", skew, errE, errM)
		}
		at0 := now.Add(-1234 * time.Millisecond) // the device's first heartbeat
		sc := core.Scope{Class: "room", ID: "r"}
		for _, p := range []core.Presence{eng, mod} {
			if _, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d", Kind: core.KindWeb}); err != nil {
				t.Fatal(err)
			}
			if err := opdo.Err(ctx, p, core.ScopeTouch{Scope: sc, Member: "old"}); err != nil {
				t.Fatal(err)
			}
		}
		m.set(now)
		wantSkew := !at.IsZero() && skewed(at, now, orSkew(skew))
		for i, p := range []core.Presence{eng, mod} {
			name := [2]string{"engine", "model"}[i]
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d", Kind: core.KindWeb, Active: true, At: at})
			if gotSkew := errors.Is(err, core.ErrClockSkew); gotSkew != wantSkew {
				t.Fatalf("%s: Heartbeat At %d ms (now %d, MaxSkew %v): err %v, want skew: %v", name, at.UnixMilli(), now.UnixMilli(), orSkew(skew), err, wantSkew)
			}
			if err != nil && !wantSkew {
				t.Fatalf("%s: Heartbeat: %v", name, err)
			}
			st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: "u"})
			if err != nil || len(st.Devices) != 1 {
				t.Fatalf("%s: Status = %+v, %v", name, st, err)
			}
			dev := st.Devices[0]
			wantSeen, wantActive := now, at0
			if wantSkew {
				wantSeen = at0 // refused: nothing changed
			} else if !at.IsZero() && at.Before(now) {
				if at.After(at0) {
					wantActive = time.UnixMilli(at.UnixMilli())
				}
			} else {
				wantActive = now
			}
			if !dev.LastSeen.Equal(wantSeen) || !dev.LastActive.Equal(wantActive) {
				t.Errorf("%s: after At %d: seen %d active %d, want %d %d", name, at.UnixMilli(), ms(dev.LastSeen), ms(dev.LastActive), wantSeen.UnixMilli(), wantActive.UnixMilli())
			}
		}

		// SetManual's ttl: 0 (until cleared) or at least 1 ms.
		badTTL := ttl < 0 || ttl > 0 && ttl < time.Millisecond
		for i, p := range []core.Presence{eng, mod} {
			before := m.rec.count()
			_, err := opdo.Do[[]core.Change](ctx, p, core.SetManual{User: "u", Manual: core.ManualDND, TTL: ttl})
			if badTTL {
				checkRejected(t, "SetManual", err, []string{"ttl"})
				if m.rec.count() != before {
					t.Errorf("a refused SetManual sent %d calls", m.rec.count()-before)
				}
				continue
			}
			if err != nil {
				t.Fatalf("SetManual(ttl %v): %v", ttl, err)
			}
			st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: "u"})
			want := time.Time{}
			if ttl > 0 {
				want = now.Add(ttl.Truncate(time.Millisecond))
			}
			if err != nil || st.Manual != core.ManualDND || !st.ManualUntil.Equal(want) {
				t.Errorf("%d: after SetManual(DND, %v): manual %v until %d, %v; want until %d", i, ttl, st.Manual, ms(st.ManualUntil), err, ms(want))
			}
		}

		// ActiveWithin's d: 1 ms to the class window (60 s for "room").
		for _, p := range []core.Presence{eng, mod} {
			if err := opdo.Err(ctx, p, core.ScopeTouch{Scope: sc, Member: "new"}); err != nil {
				t.Fatal(err)
			}
			n, err := opdo.Do[int64](ctx, p, core.ReadActive{Scope: sc, Within: d})
			if d < time.Millisecond || d.Truncate(time.Millisecond) > time.Minute {
				checkRejected(t, "ActiveWithin", err, []string{"d"})
				continue
			}
			want := int64(1)
			if d >= 1234*time.Millisecond {
				want = 2
			}
			if err != nil || n != want {
				t.Errorf("ActiveWithin(%v) = %d, %v; want %d", d, n, err, want)
			}
		}

		// The manual status ends at its expiry, not before.
		if !badTTL && ttl >= 2*time.Millisecond {
			end := now.Add(ttl.Truncate(time.Millisecond))
			for _, c := range []struct {
				at   time.Time
				want core.Manual
			}{{end.Add(-time.Millisecond), core.ManualDND}, {end, core.ManualNone}} {
				m.set(c.at)
				for _, p := range []core.Presence{eng, mod} {
					st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: "u"})
					if err != nil || st.Manual != c.want {
						t.Errorf("Status at %d (manual until %d): manual %v, %v; want %v", c.at.UnixMilli(), end.UnixMilli(), st.Manual, err, c.want)
					}
				}
			}
		}
	})
}

func orSkew(d time.Duration) time.Duration {
	if d == 0 {
		return 5 * time.Minute
	}
	return d
}
