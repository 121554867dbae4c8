package fuzz

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/luascripts"
	"github.com/presencekit/presence/internal/slot"
)

// crcTable is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection) by table, built independently of core's bitwise loop.
var crcTable = func() (tab [256]uint16) {
	for i := range tab {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		tab[i] = c
	}
	return tab
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^s[i]]
	}
	return c
}

// refSlot is the hash slot as the Redis Cluster specification defines it:
// if the key holds a '{' followed later by a '}' with at least one byte
// between them, only the bytes between the first '{' and the first '}' after
// it are hashed; otherwise the whole key is.
func refSlot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return crc16(key) % 16384
}

// TestSlotVectors checks slot.Of against published values and the hash
// tag rules of the Redis Cluster specification.
func TestSlotVectors(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("reference CRC16(123456789) = %#x, want 0x31C3", got)
	}
	tests := []struct {
		key  string
		want uint16
	}{
		{"foo", 12182},
		{"123456789", 0x31C3 % 16384},
		{"{user1000}.following", slot.Of("user1000")},
		{"{user1000}.followers", slot.Of("user1000")},
		{"foo{}{bar}", crc16("foo{}{bar}") % 16384}, // empty tag: the whole key
		{"foo{{bar}}zap", crc16("{bar") % 16384},    // tag runs to the first '}'
		{"foo{bar}{zap}", crc16("bar") % 16384},     // only the first tag counts
		{"", 0},
		{"{", crc16("{") % 16384},
		{"}{", crc16("}{") % 16384},
		{"{}", crc16("{}") % 16384},
		{"{a}", crc16("a") % 16384},
	}
	for _, tt := range tests {
		if got := slot.Of(tt.key); got != tt.want {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
	if slot.Of("{user1000}.following") != slot.Of("{user1000}.followers") {
		t.Error("keys with one hash tag map to different slots")
	}
	if err := slot.Check([]string{"{a}x", "{a}y", "z{a}"}); err != nil {
		t.Errorf("slot.Check of one tag: %v", err)
	}
	if err := slot.Check([]string{"{a}x", "{b}x"}); err == nil {
		t.Error("slot.Check of two tags: no error")
	}
}

// FuzzSlot checks slot.Of against the reference for any key, and the
// property the engine's layout relies on: a key with a non-empty tag and no
// brace before it hashes like its tag alone, whatever follows.
func FuzzSlot(f *testing.F) {
	f.Add("foo", "bar")
	f.Add("presence:", "u3")
	f.Fuzz(func(t *testing.T, key, tag string) {
		if got, want := slot.Of(key), refSlot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
		if tag == "" || strings.ContainsAny(tag, "}") || strings.ContainsAny(key, "{") {
			return
		}
		tagged := key + "{" + tag + "}" + key
		if slot.Of(tagged) != slot.Of(tag) {
			t.Errorf("Slot(%q) = %d, Slot(%q) = %d", tagged, slot.Of(tagged), tag, slot.Of(tag))
		}
	})
}

// tuple is one (user, device, scope, member) of the key-layout target.
type tuple struct{ user, device, scope, member string }

func (t tuple) valid() bool {
	return validID(t.user) && validID(t.device) && validID(t.scope) && validID(t.member)
}

// FuzzKeyLayout runs the same operations for two fuzzed tuples and observes
// the keys, since core does not export its key builders. Through a
// recording store it checks that every call's keys, and every key-shaped
// argument from which a script builds further keys, map to one cluster slot
// and carry the prefix and a hash tag. With both tuples in one Redis it
// checks that neither's state shows in the other's Status, Count or Members
// unless their IDs coincide. And it checks the mapping itself (see
// keyTemplates): the keys and fields each tuple writes are a function of its
// IDs, and two tuples share a key or a field only where the IDs that key or
// field is built from are equal, whatever bytes the IDs hold.
func FuzzKeyLayout(f *testing.F) {
	f.Add("alice", "phone", "10086", "alice", "bob", "phone", "10086", "bob", uint8(0))
	f.Add("a", "d", "s:1", "m", "a:d", "d", "s", "1:m", uint8(0xff))
	f.Add("st", "d", "reg", "m", "due", "st", "rel", "lock", uint8(0x15))
	f.Fuzz(func(t *testing.T, u1, d1, s1, m1, u2, d2, s2, m2 string, sel uint8) {
		t1, t2 := tuple{u1, d1, s1, m1}, tuple{u2, d2, s2, m2}
		if !t1.valid() || !t2.valid() {
			return // rejected before any key is built: FuzzIdentifiers' ground
		}
		buckets := []int{1, 2, 3, 16} // few: a sweep makes one call per bucket
		prefix := []string{"", "p", "a:b", "x y*"}[sel>>4&3]
		cfg := core.Config{Prefix: prefix, UserBuckets: buckets[sel&3], ScopeBuckets: buckets[sel>>2&3], Classes: testClasses()}
		if prefix == "" {
			prefix = "presence"
		}
		checkIsolation(t, cfg, prefix, t1, t2)
		cfg.UserBuckets, cfg.ScopeBuckets = 1, 1
		cfg.Classes = map[string]core.ScopeClass{"room": {}, "video": {Layout: core.LayoutCompact, Shards: 1}, "approx": {Layout: core.LayoutApprox}}
		checkInjective(t, cfg, t1, t2)
	})
}

var layoutClasses = []string{"room", "video", "approx"}

// layoutOps are the operations of the key-layout target for one tuple i.
func layoutOps(t *testing.T, ctx context.Context, e *core.Engine, i int, tp tuple) {
	t.Helper()
	if _, err := e.Login(ctx, core.Login{User: tp.user, Device: tp.device, Kind: core.KindWeb,
		Gateway: "gw", Meta: map[string]string{"tuple": strconv.Itoa(i)}}); err != nil {
		t.Fatal(err)
	}
	if i == 0 {
		if _, err := e.SetManual(ctx, tp.user, core.ManualDND, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range layoutClasses {
		if err := e.Touch(ctx, core.Scope{Class: c, ID: tp.scope}, tp.member); err != nil {
			t.Fatal(err)
		}
	}
}

// checkIsolation runs both tuples in one Redis and checks every call's slots
// and what each tuple observes.
func checkIsolation(t *testing.T, cfg core.Config, prefix string, t1, t2 tuple) {
	ctx := context.Background()
	m := newMini(t, t0)
	e := m.engine(t, cfg)
	tuples := []tuple{t1, t2}
	for i, tp := range tuples {
		layoutOps(t, ctx, e, i, tp)
	}
	if _, err := e.HeartbeatBatch(ctx, []core.Heartbeat{{User: t1.user, Device: t1.device}, {User: t2.user, Device: t2.device}}); err != nil {
		t.Fatal(err)
	}
	for _, tp := range tuples {
		devices := map[string]string{}
		for j, o := range tuples {
			if o.user == tp.user {
				devices[o.device] = strconv.Itoa(j) // a later login replaces an earlier one
			}
		}
		st, err := e.Status(ctx, tp.user)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, d := range st.Devices {
			got[d.ID] = d.Meta["tuple"]
		}
		if !maps.Equal(got, devices) {
			t.Errorf("Status(%q) devices = %q, want %q", tp.user, got, devices)
		}
		if want := tp.user == t1.user; (st.Manual == core.ManualDND) != want {
			t.Errorf("Status(%q).Manual = %v, want DND: %v", tp.user, st.Manual, want)
		}
		members := map[string]bool{}
		for _, o := range tuples {
			if o.scope == tp.scope {
				members[o.member] = true
			}
		}
		want := sorted(slices.Collect(maps.Keys(members)))
		for _, c := range layoutClasses {
			sc := core.Scope{Class: c, ID: tp.scope}
			n, err := e.Count(ctx, sc)
			if err != nil {
				t.Fatal(err)
			}
			if c == "approx" {
				// HyperLogLog: two members may estimate as one.
				if n.N < 1 || n.N > int64(len(want)) {
					t.Errorf("Count(%v) = %d, want about %d", sc, n.N, len(want))
				}
				continue
			}
			if n.N != int64(len(want)) {
				t.Errorf("Count(%v) = %d, want %d", sc, n.N, len(want))
			}
			page, err := e.Members(ctx, sc, "", core.MaxPage)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mb := range page.Members {
				got = append(got, mb.ID)
			}
			if !slices.Equal(sorted(got), want) {
				t.Errorf("Members(%v) = %q, want %q", sc, got, want)
			}
			if _, err := e.ActiveWithin(ctx, sc, time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Sweeps visit every bucket; run them past the room window so that they
	// delete and release.
	m.set(t0.Add(61*time.Second + 7*time.Millisecond))
	if _, err := e.SweepScopes(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SweepUsers(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.rec.taken() {
		checkSlots(t, prefix, c)
	}
	for _, k := range m.mr.Keys() {
		if !strings.HasPrefix(k, prefix+":{") {
			t.Errorf("key %q is outside the layout", k)
		}
	}
}

var scriptNames = func() map[string]string {
	out := map[string]string{}
	for _, s := range luascripts.All() {
		out[s.SHA] = s.Name
		out[s.Source()] = s.Name
	}
	return out
}()

// scriptName names the script a call runs ("" if unknown).
func scriptName(c core.Call) string {
	if c.Source != "" {
		return scriptNames[c.Source]
	}
	return scriptNames[c.SHA]
}

// checkSlots: a call's keys share one slot, and so does every argument
// shaped like a key (prefix and tag), from which its script builds more.
func checkSlots(t *testing.T, prefix string, c core.Call) {
	t.Helper()
	name := scriptName(c)
	if len(c.Keys) == 0 {
		t.Errorf("%s call without keys: a cluster cannot route it", name)
		return
	}
	if err := slot.Check(c.Keys); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	want := slot.Of(c.Keys[0])
	for _, k := range c.Keys {
		if !strings.HasPrefix(k, prefix+":{") {
			t.Errorf("%s: key %q lacks the prefix and hash tag", name, k)
		}
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, prefix+":{") && slot.Of(a) != want {
			t.Errorf("%s: key argument %q is in slot %d, the call's keys in %d", name, a, slot.Of(a), want)
		}
	}
}

// Markers stand for the IDs of a tuple when the target learns the layout;
// they hold a byte no fuzzed ID of interest needs ('\u00a7').
var markers = tuple{"\u00a7U\u00a7", "\u00a7D\u00a7", "\u00a7S\u00a7", "\u00a7M\u00a7"}

// snapshot is the layout Redis holds: each key with its fields (hash
// fields, sorted-set and set members; nil for strings and HyperLogLogs).
// Where a user's records go depends on their length: a page, or the
// bucket's big hash (core/lua/recordlib.lua), indexed by page or by user.
// The one user of a layout run is in page 0 or the big hash, so the
// snapshot folds the big hash into page 0, and a user's due entry into
// page 0's, so that the templates do not depend on the IDs' lengths.
type snapshot map[string][]string

func snap(t *testing.T, m *mini) snapshot {
	t.Helper()
	out := snapshot{}
	for _, k := range m.mr.Keys() {
		var fields []string
		var err error
		switch m.mr.Type(k) {
		case "hash":
			fields, err = m.mr.HKeys(k)
		case "zset":
			fields, err = m.mr.ZMembers(k)
		case "set":
			fields, err = m.mr.Members(k)
		}
		if err != nil {
			t.Fatal(err)
		}
		if base, ok := strings.CutSuffix(k, ":big"); ok {
			k = base + ":p:0"
		}
		if strings.HasSuffix(k, ":due") && strings.Contains(k, ":{u") {
			for i, f := range fields {
				if !strings.HasPrefix(f, "\x01") {
					fields[i] = "\x010"
				}
			}
			fields = slices.Compact(sorted(fields))
		}
		out[k] = sorted(append(out[k], fields...))
	}
	return out
}

// inst replaces the markers of s by tp's IDs.
func inst(s string, tp tuple) string {
	return strings.NewReplacer(markers.user, tp.user, markers.device, tp.device, markers.scope, tp.scope,
		markers.member, tp.member).Replace(s)
}

// uses reports which components of a tuple s is built from.
func uses(s string) [4]bool {
	return [4]bool{strings.Contains(s, markers.user), strings.Contains(s, markers.device),
		strings.Contains(s, markers.scope), strings.Contains(s, markers.member)}
}

// agree reports whether a and b have equal IDs in every component used.
func agree(u [4]bool, a, b tuple) bool {
	pa, pb := [4]string{a.user, a.device, a.scope, a.member}, [4]string{b.user, b.device, b.scope, b.member}
	for i := range u {
		if u[i] && pa[i] != pb[i] {
			return false
		}
	}
	return true
}

// keyTemplates runs the operations of one tuple with marker IDs, in one
// bucket and one compact shard (so that no key name depends on a hash of an
// ID), and returns the layout as templates over the markers.
func keyTemplates(t *testing.T, cfg core.Config, tp tuple) snapshot {
	m := newMini(t, t0)
	layoutOps(t, context.Background(), m.engine(t, cfg), 0, tp)
	return snap(t, m)
}

// checkInjective learns the layout from marker IDs, checks that each tuple
// writes exactly its instance of it, and that the two instances overlap only
// where the IDs they are built from are equal.
func checkInjective(t *testing.T, cfg core.Config, t1, t2 tuple) {
	for _, tp := range []tuple{t1, t2} {
		for _, id := range []string{tp.user, tp.device, tp.scope, tp.member} {
			if strings.Contains(id, "\u00a7") {
				return // could be mistaken for a marker
			}
		}
	}
	tmpl := keyTemplates(t, cfg, markers)
	for _, tp := range []tuple{t1, t2} {
		want := snapshot{}
		for k, fields := range tmpl {
			for _, f := range fields {
				want[inst(k, tp)] = append(want[inst(k, tp)], inst(f, tp))
			}
			if len(fields) == 0 {
				want[inst(k, tp)] = nil
			}
		}
		for k := range want {
			want[k] = sorted(want[k])
		}
		got := keyTemplates(t, cfg, tp)
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("the keys of %q are not the layout's instance:\n got  %q\n want %q", tp, got, want)
		}
	}
	// Two instances share a key only if the IDs in its name agree, and a
	// field of a shared key only if the IDs in the key and field agree.
	for k1, f1s := range tmpl {
		for k2, f2s := range tmpl {
			if inst(k1, t1) != inst(k2, t2) {
				continue
			}
			if k1 != k2 || !agree(uses(k1), t1, t2) {
				t.Errorf("key %q of %q and key %q of %q are both %q", k1, t1, k2, t2, inst(k1, t1))
				continue
			}
			for _, f1 := range f1s {
				for _, f2 := range f2s {
					if inst(f1, t1) == inst(f2, t2) && (f1 != f2 || !agree(uses(k1+f1), t1, t2)) {
						t.Errorf("key %q: field %q of %q and field %q of %q are both %q", inst(k1, t1), f1, t1, f2, t2, inst(f1, t1))
					}
				}
			}
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
