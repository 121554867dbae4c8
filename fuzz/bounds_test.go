package fuzz

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/limits"
	"github.com/presencekit/presence/internal/opdo"
)

// The caps of docs/design.md §3 and core's constants, each shown at the cap
// (accepted) and one over (refused with a clear error, before anything is
// sent), on an engine on miniredis and on the model.

// backends returns an engine on miniredis and the model on one clock, and
// the recorder that counts the engine's store calls.
func backends(t *testing.T, cfg core.Config) ([]core.Presence, *recorder) {
	t.Helper()
	m := newMini(t, t0)
	e := m.engine(t, cfg)
	cfg.Clock = m.clk.Now
	mod, err := core.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return []core.Presence{e, mod}, m.rec
}

// idOf returns a valid ID of exactly n bytes, of multi-byte runes where
// they fit, so that a byte count is not mistaken for a rune count.
func idOf(n int) string {
	s := strings.Repeat("€", n/3) // 3 bytes each
	return s + strings.Repeat("x", n-len(s))
}

// refused asserts a clear refusal: an *InputError for field whose message
// names the limit, and no store call.
func refused(t *testing.T, what string, err error, field, limit string, rec *recorder, before int) {
	t.Helper()
	var ie *core.InputError
	if !errors.Is(err, core.ErrInvalid) || !errors.As(err, &ie) {
		t.Errorf("%s: %v, want an *InputError", what, err)
		return
	}
	if !strings.HasPrefix(ie.Field, field) || !strings.Contains(ie.Reason, limit) || !strings.HasPrefix(err.Error(), "presence: invalid ") {
		t.Errorf("%s: %q (field %q), want field %s and the limit %s in the message", what, err, ie.Field, field, limit)
	}
	if rec != nil && rec.count() != before {
		t.Errorf("%s: refused request sent %d store calls", what, rec.count()-before)
	}
}

// TestBoundsIDs: every ID field takes 128 bytes (ASCII or multi-byte runes)
// and refuses 129 bytes and, where it is required, the empty string.
func TestBoundsIDs(t *testing.T) {
	if got := len(idOf(limits.IDBytes)); got != 128 || limits.IDBytes != 128 {
		t.Fatalf("limits.IDBytes = %d (id of %d bytes), docs/design.md §3 says 128", limits.IDBytes, got)
	}
	ctx := context.Background()
	sc := func(id string) core.Scope { return core.Scope{Class: "room", ID: id} }
	type request struct {
		field    string
		do       func(p core.Presence, id string) error
		optional bool // empty means "none"
	}
	requests := []request{
		{"Heartbeat.User", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: id, Device: "d"})
			return err
		}, false},
		{"Heartbeat.Device", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: id})
			return err
		}, false},
		{"Heartbeat.Gateway", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d", Gateway: id})
			return err
		}, true},
		{"Heartbeat.Token", func(p core.Presence, id string) error {
			// A new device each time: an implicit login adopts the token.
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u2", Device: fmt.Sprintf("t%d-%x", len(id), crc16(id)), Token: id})
			return err
		}, true},
		{"Login.User", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: id, Device: "d"})
			return err
		}, false},
		{"Login.Device", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: id})
			return err
		}, false},
		{"Login.Gateway", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d", Gateway: id})
			return err
		}, true},
		{"user", func(p core.Presence, id string) error {
			_, err := opdo.Do[[]core.Change](ctx, p, core.SetManual{User: id, Manual: core.ManualDND, TTL: 0})
			return err
		}, false},
		{"users[1]", func(p core.Presence, id string) error {
			_, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: []string{"u", id}})
			return err
		}, false},
		{"device", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.Ended](ctx, p, core.Logout{User: "u", Device: id, Token: ""})
			return err
		}, false},
		{"token", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.Ended](ctx, p, core.Disconnect{User: "u", Device: "x", Token: id})
			return err
		}, true},
		{"scope.ID", func(p core.Presence, id string) error {
			return opdo.Err(ctx, p, core.ScopeTouch{Scope: sc(id), Member: "m"})
		}, false},
		{"member", func(p core.Presence, id string) error {
			return opdo.Err(ctx, p, core.ScopeTouch{Scope: sc("s"), Member: id})
		}, false},
		{"scope.ID", func(p core.Presence, id string) error {
			_, err := opdo.Do[core.Count](ctx, p, core.ReadCount{Scope: sc(id)})
			return err
		}, false},
		{"member", func(p core.Presence, id string) error {
			_, err := opdo.Do[bool](ctx, p, core.Leave{Scope: sc("s"), Member: id})
			return err
		}, false},
	}
	ps, rec := backends(t, core.Config{})
	for _, r := range requests {
		for i, p := range ps {
			for _, id := range []string{idOf(limits.IDBytes), strings.Repeat("y", limits.IDBytes)} {
				if err := r.do(p, id); err != nil {
					t.Errorf("%d: %s of %d bytes: %v", i, r.field, len(id), err)
				}
			}
			before := rec.count()
			refused(t, fmt.Sprintf("%d: %s of 129 bytes", i, r.field), r.do(p, idOf(limits.IDBytes+1)), r.field, "128", rec, before)
			if !r.optional {
				refused(t, fmt.Sprintf("%d: empty %s", i, r.field), r.do(p, ""), r.field, "empty", rec, before)
			}
		}
	}
}

// TestBoundsMeta: metadata of 16 entries and 1,024 bytes round-trips; 17
// entries or 1,025 bytes are refused.
func TestBoundsMeta(t *testing.T) {
	if limits.MetaEntries != 16 || limits.MetaBytes != 1024 {
		t.Fatalf("limits.MetaEntries %d, limits.MetaBytes %d; docs/design.md §3 says 16 and 1 KiB", limits.MetaEntries, limits.MetaBytes)
	}
	ctx := context.Background()
	entries := func(n, bytes int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%02d", i)] = ""
		}
		// Pad the last value up to the total.
		last := fmt.Sprintf("k%02d", n-1)
		m[last] = strings.Repeat("v", bytes-3*n)
		return m
	}
	tests := []struct {
		name  string
		meta  map[string]string
		limit string // "" accepted, else the limit the error names
	}{
		{"16 entries", entries(16, 48), ""},
		{"17 entries", entries(17, 51), "16"},
		{"1024 bytes", entries(16, 1024), ""},
		{"1025 bytes", entries(16, 1025), "1024"},
		{"one entry of 1024 bytes", entries(1, 1024), ""},
		{"one entry of 1025 bytes", entries(1, 1025), "1024"},
	}
	ps, rec := backends(t, core.Config{})
	for _, tt := range tests {
		for i, p := range ps {
			before := rec.count()
			_, errL := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d", Meta: tt.meta})
			_, errH := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d", Meta: tt.meta})
			if tt.limit != "" {
				refused(t, fmt.Sprintf("%d: Login with %s", i, tt.name), errL, "Login.Meta", tt.limit, nil, 0)
				refused(t, fmt.Sprintf("%d: Heartbeat with %s", i, tt.name), errH, "Heartbeat.Meta", tt.limit, rec, before)
				continue
			}
			if errL != nil || errH != nil {
				t.Errorf("%d: %s: Login %v, Heartbeat %v", i, tt.name, errL, errH)
				continue
			}
			st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: "u"})
			if err != nil || len(st.Devices) != 1 || !sameMeta(st.Devices[0].Meta, tt.meta) {
				t.Errorf("%d: %s: Status = %+v, %v; want the metadata sent", i, tt.name, st, err)
			}
		}
	}
}

// TestBoundsDevices: MaxDevices logins succeed (16 by default), the next
// login or implicit login gets ErrTooManyDevices and truncates nothing.
func TestBoundsDevices(t *testing.T) {
	ctx := context.Background()
	for _, max := range []int{0, 3} { // 0: the default, 16
		want := max
		if max == 0 {
			want = 16
		}
		ps, _ := backends(t, core.Config{MaxDevices: max})
		for i, p := range ps {
			for d := range want {
				if _, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d" + strconv.Itoa(d), Kind: core.KindWeb}); err != nil {
					t.Fatalf("%d: login %d of %d: %v", i, d+1, want, err)
				}
			}
			if _, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "one-more"}); !errors.Is(err, core.ErrTooManyDevices) {
				t.Errorf("%d: login %d with MaxDevices %d: %v, want ErrTooManyDevices", i, want+1, max, err)
			}
			if _, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "one-more"}); !errors.Is(err, core.ErrTooManyDevices) {
				t.Errorf("%d: implicit login %d with MaxDevices %d: %v, want ErrTooManyDevices", i, want+1, max, err)
			}
			if _, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d0", Kind: core.KindWeb}); err != nil {
				t.Errorf("%d: a logged-in device logging in again at the cap: %v", i, err)
			}
			st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: "u"})
			if err != nil || len(st.Devices) != want {
				t.Errorf("%d: %d devices after the refusals, %v; want %d, nothing truncated", i, len(st.Devices), err, want)
			}
		}
	}
}

// TestBoundsBatches: batches of MaxBatch (1,000) users, heartbeats and
// touches succeed, of 0 or 1,001 are refused; pages hold at most MaxPage
// (1,000) members.
func TestBoundsBatches(t *testing.T) {
	if core.MaxBatch != 1000 || core.MaxPage != 1000 {
		t.Fatalf("MaxBatch %d, MaxPage %d; want 1000", core.MaxBatch, core.MaxPage)
	}
	ctx := context.Background()
	ps, rec := backends(t, core.Config{})
	users := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "u" + strconv.Itoa(i)
		}
		return out
	}
	beats := func(n int) []core.Heartbeat {
		out := make([]core.Heartbeat, n)
		for i, u := range users(n) {
			out[i] = core.Heartbeat{User: u, Device: "d"}
		}
		return out
	}
	sc := core.Scope{Class: "room", ID: "big"}
	touches := func(n int) []core.ScopeTouch {
		out := make([]core.ScopeTouch, n)
		for i, u := range users(n) {
			out[i] = core.ScopeTouch{Scope: sc, Member: u}
		}
		return out
	}
	for i, p := range ps {
		if acks, err := opdo.Do[[]core.Ack](ctx, p, core.HeartbeatBatch(beats(1000))); err != nil || len(acks) != 1000 {
			t.Errorf("%d: HeartbeatBatch of 1000: %d acks, %v", i, len(acks), err)
		}
		if sts, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: users(1000)}); err != nil || len(sts) != 1000 || sts[999].Status != core.StatusOnline {
			t.Errorf("%d: Statuses of 1000: %d, %v", i, len(sts), err)
		}
		if err := opdo.Err(ctx, p, core.TouchBatch(touches(1000))); err != nil {
			t.Errorf("%d: TouchBatch of 1000: %v", i, err)
		}
		before := rec.count()
		for _, n := range []int{0, 1001} {
			limit := "1000"
			_, err := opdo.Do[[]core.Ack](ctx, p, core.HeartbeatBatch(beats(n)))
			refused(t, fmt.Sprintf("%d: HeartbeatBatch of %d", i, n), err, "beats", limit, rec, before)
			_, err = opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: users(n)})
			refused(t, fmt.Sprintf("%d: Statuses of %d", i, n), err, "users", limit, rec, before)
			refused(t, fmt.Sprintf("%d: TouchBatch of %d", i, n), opdo.Err(ctx, p, core.TouchBatch(touches(n))), "touches", limit, rec, before)
		}

		// Pages: 1000 members at most; 1001 members take two pages.
		if err := opdo.Err(ctx, p, core.ScopeTouch{Scope: sc, Member: "one-more"}); err != nil {
			t.Fatal(err)
		}
		page, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: sc, Cursor: "", Limit: 1000})
		if err != nil || len(page.Members) != 1000 || page.Next == "" {
			t.Fatalf("%d: first page of 1001 members: %d, next %q, %v", i, len(page.Members), page.Next, err)
		}
		page, err = opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: sc, Cursor: page.Next, Limit: 1000})
		if err != nil || len(page.Members) != 1 || page.Next != "" {
			t.Errorf("%d: second page of 1001 members: %d, next %q, %v", i, len(page.Members), page.Next, err)
		}
		before = rec.count()
		for _, n := range []int{0, -1, 1001} {
			_, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: sc, Cursor: "", Limit: n})
			refused(t, fmt.Sprintf("%d: Members limit %d", i, n), err, "limit", "1000", rec, before)
		}
	}
}

// TestBoundsConfig: the integer ranges, class names and prefix rules of
// Config, at the limit and one over.
func TestBoundsConfig(t *testing.T) {
	class := func(name string, c core.ScopeClass) map[string]core.ScopeClass {
		return map[string]core.ScopeClass{name: c}
	}
	tests := []struct {
		name  string
		cfg   core.Config
		field string // "" accepted
		limit string
	}{
		{"MaxDevices 1024", core.Config{MaxDevices: 1024}, "", ""},
		{"MaxDevices 1025", core.Config{MaxDevices: 1025}, "Config.MaxDevices", "1024"},
		{"MaxDevices -1", core.Config{MaxDevices: -1}, "Config.MaxDevices", "1024"},
		{"UserBuckets 16384", core.Config{UserBuckets: 16384}, "", ""},
		{"UserBuckets 16385", core.Config{UserBuckets: 16385}, "Config.UserBuckets", "16384"},
		{"ScopeBuckets 16385", core.Config{ScopeBuckets: 16385}, "Config.ScopeBuckets", "16384"},
		{"65536 shards", core.Config{Classes: class("v", core.ScopeClass{Layout: core.LayoutCompact, Shards: 65536})}, "", ""},
		{"65537 shards", core.Config{Classes: class("v", core.ScopeClass{Layout: core.LayoutCompact, Shards: 65537})}, "Config.Classes[v].Shards", "65536"},
		{"shard size 200", core.Config{Classes: class("v", core.ScopeClass{Layout: core.LayoutCompact, ShardSize: 200})}, "", ""},
		{"shard size 201", core.Config{Classes: class("v", core.ScopeClass{Layout: core.LayoutCompact, ShardSize: 201})}, "Config.Classes[v].ShardSize", "200"},
		{"class name of 32 bytes", core.Config{Classes: class(strings.Repeat("a", 32), core.ScopeClass{})}, "", ""},
		{"class name of 33 bytes", core.Config{Classes: class(strings.Repeat("a", 33), core.ScopeClass{})}, "Config.Classes", "32"},
		{"class name with ':'", core.Config{Classes: class("a:b", core.ScopeClass{})}, "Config.Classes", ""},
		{"prefix with '{'", core.Config{Prefix: "p{"}, "Config.Prefix", ""},
		{"prefix with '}'", core.Config{Prefix: "}"}, "Config.Prefix", ""},
		{"prefix with a control character", core.Config{Prefix: "p\n"}, "Config.Prefix", ""},
	}
	for _, tt := range tests {
		_, errE := core.New(scriptedStore{}, tt.cfg)
		tt.cfg.Clock = (&manualClock{t: t0}).Now
		_, errM := core.NewModel(tt.cfg)
		for i, err := range []error{errE, errM} {
			if tt.field == "" {
				if err != nil {
					t.Errorf("%d: %s: %v", i, tt.name, err)
				}
				continue
			}
			refused(t, fmt.Sprintf("%d: %s", i, tt.name), err, tt.field, tt.limit, nil, 0)
		}
	}
}
