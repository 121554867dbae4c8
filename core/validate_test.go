package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/limits"
	"github.com/presencekit/presence/internal/opdo"
)

// TestBadInputIsRefusedBeforeRedis checks docs/design.md §3: every bad input
// gets an *InputError naming the field, and no command is sent.
func TestBadInputIsRefusedBeforeRedis(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("x", limits.IDBytes+1)
	bigMeta := map[string]string{}
	for i := 0; i < limits.MetaEntries+1; i++ {
		bigMeta[string(rune('a'+i))] = "v"
	}
	bad := core.Policy(9)
	tests := []struct {
		name  string
		field string
		call  func(p core.Presence) error
	}{
		{"empty user", "Heartbeat.User", func(p core.Presence) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{Device: "d"})
			return err
		}},
		{"long device", "Heartbeat.Device", func(p core.Presence) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: long})
			return err
		}},
		{"control character", "Heartbeat.User", func(p core.Presence) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "a\nb", Device: "d"})
			return err
		}},
		{"invalid UTF-8", "Heartbeat.Device", func(p core.Presence) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "\xff\xfe"})
			return err
		}},
		{"unknown kind", "Heartbeat.Kind", func(p core.Presence) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d", Kind: 42})
			return err
		}},
		{"too much metadata", "Heartbeat.Meta", func(p core.Presence) error {
			_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: "u", Device: "d", Meta: bigMeta})
			return err
		}},
		{"metadata over 1 KiB", "Login.Meta", func(p core.Presence) error {
			_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d", Meta: map[string]string{"k": strings.Repeat("v", 1024)}})
			return err
		}},
		{"unknown policy", "Login.Policy", func(p core.Presence) error {
			_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d", Policy: &bad})
			return err
		}},
		{"gateway with control character", "Login.Gateway", func(p core.Presence) error {
			_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d", Gateway: "gw\x00"})
			return err
		}},
		{"logout without device", "device", func(p core.Presence) error {
			_, err := opdo.Do[core.Ended](ctx, p, core.Logout{User: "u", Device: "", Token: ""})
			return err
		}},
		{"unknown manual status", "manual", func(p core.Presence) error {
			_, err := opdo.Do[[]core.Change](ctx, p, core.SetManual{User: "u", Manual: 7, TTL: 0})
			return err
		}},
		{"negative manual lifetime", "ttl", func(p core.Presence) error {
			_, err := opdo.Do[[]core.Change](ctx, p, core.SetManual{User: "u", Manual: core.ManualDND, TTL: -time.Second})
			return err
		}},
		{"empty batch", "users", func(p core.Presence) error {
			_, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: nil})
			return err
		}},
		{"batch over the cap", "users", func(p core.Presence) error {
			_, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: make([]string, core.MaxBatch+1)})
			return err
		}},
		{"one bad user in a batch", "users[1]", func(p core.Presence) error {
			_, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: []string{"a", "", "c"}})
			return err
		}},
		{"page over the cap", "limit", func(p core.Presence) error {
			_, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: room, Cursor: "", Limit: core.MaxPage + 1})
			return err
		}},
		{"forged cursor", "cursor", func(p core.Presence) error {
			_, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: room, Cursor: "x.y", Limit: 10})
			return err
		}},
		{"status of a bad user names the argument", "user", func(p core.Presence) error {
			_, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: " u"})
			return err
		}},
		{"touch of an unknown class names the argument", "scope.Class", func(p core.Presence) error {
			return opdo.Err(ctx, p, core.ScopeTouch{Scope: core.Scope{Class: "nope", ID: "1"}, Member: "a"})
		}},
		{"touch of a bad scope ID names the argument", "scope.ID", func(p core.Presence) error {
			return opdo.Err(ctx, p, core.ScopeTouch{Scope: core.Scope{Class: room.Class, ID: "1\u2028"}, Member: "a"})
		}},
		{"touch of a bad member names the argument", "member", func(p core.Presence) error {
			return opdo.Err(ctx, p, core.ScopeTouch{Scope: room, Member: "\ufeffa"})
		}},
		{"login of a device with trailing space", "Login.Device", func(p core.Presence) error {
			_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: "u", Device: "d "})
			return err
		}},
		{"one bad touch in a batch sends nothing", "touches[1].Member", func(p core.Presence) error {
			return opdo.Err(ctx, p, core.TouchBatch([]core.ScopeTouch{{Scope: room, Member: "a"}, {Scope: room, Member: long}}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, rec, _, _ := newRecordedEngine(t, scopeConfig(4))
			m, err := core.NewModel(core.Config{Clock: (&manualClock{t: t0}).Now, Classes: scopeConfig(4).Classes})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []core.Presence{e, m} {
				err := tt.call(p)
				var ie *core.InputError
				if !errors.As(err, &ie) || !errors.Is(err, core.ErrInvalid) {
					t.Fatalf("%T: err = %v, want an *InputError", p, err)
				}
				if ie.Field != tt.field {
					t.Errorf("%T: field %q, want %q (%v)", p, ie.Field, tt.field, err)
				}
			}
			if n := rec.count(); n != 0 {
				t.Fatalf("%d commands were sent for a rejected call", n)
			}
		})
	}
}

// TestCapsAreInclusive checks that each cap itself is accepted.
func TestCapsAreInclusive(t *testing.T) {
	ctx := context.Background()
	e, _, _, _ := newRecordedEngine(t, core.Config{})
	meta := map[string]string{}
	for i := 0; i < limits.MetaEntries; i++ {
		meta[string(rune('a'+i))] = strings.Repeat("v", limits.MetaBytes/limits.MetaEntries-1)
	}
	id := strings.Repeat("é", limits.IDBytes/2)
	if _, err := e.Heartbeat(ctx, core.Heartbeat{User: id, Device: id, Meta: meta}); err != nil {
		t.Fatalf("at the caps: %v", err)
	}
	st, err := e.Status(ctx, id)
	if err != nil || len(st.Devices) != 1 || len(st.Devices[0].Meta) != limits.MetaEntries {
		t.Fatalf("status %+v, %v: want the device with all its metadata", st, err)
	}
	users := make([]string, core.MaxBatch)
	for i := range users {
		users[i] = strings.Repeat("u", i%limits.IDBytes+1)
	}
	if out, err := e.Statuses(ctx, users); err != nil || len(out) != core.MaxBatch {
		t.Fatalf("a full batch: %d statuses, %v", len(out), err)
	}
}

// TestConfigValidation checks that New refuses bad configurations with the
// field named.
func TestConfigValidation(t *testing.T) {
	tests := []struct {
		cfg   core.Config
		field string
	}{
		{core.Config{Prefix: "a{b"}, "Config.Prefix"},
		{core.Config{IdleAfter: -time.Second}, "Config.IdleAfter"},
		{core.Config{Intervals: map[core.Kind]time.Duration{core.KindIOS: 0}}, "Config.Intervals[ios]"},
		{core.Config{MaxDevices: -1}, "Config.MaxDevices"},
		{core.Config{UserBuckets: 20000}, "Config.UserBuckets"},
		{core.Config{Policy: 5}, "Config.Policy"},
		{core.Config{Classes: map[string]core.ScopeClass{"Bad:Name": {}}}, "Config.Classes"},
		{core.Config{Classes: map[string]core.ScopeClass{"v": {Layout: 9}}}, "Config.Classes[v].Layout"},
		{core.Config{Classes: map[string]core.ScopeClass{"v": {Layout: core.LayoutCompact, Window: 8 * 24 * time.Hour}}}, "Config.Classes[v].Window"},
	}
	for _, tt := range tests {
		_, err := core.New(&recorder{}, tt.cfg)
		var ie *core.InputError
		if !errors.As(err, &ie) || ie.Field != tt.field {
			t.Errorf("New(%+v) = %v, want an *InputError for %s", tt.cfg, err, tt.field)
		}
	}
	if _, err := core.New(nil, core.Config{}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("New(nil store) = %v, want ErrInvalid", err)
	}
	if _, err := core.NewModel(core.Config{}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("NewModel without a clock = %v, want ErrInvalid", err)
	}
}

// TestIDRule checks the ID rule of docs/design.md §3 rune class by rune
// class: what CheckID refuses, every entry point of the engine refuses
// (TestBadInputIsRefusedBeforeRedis).
func TestIDRule(t *testing.T) {
	tests := []struct {
		name, id string
		reason   string // "" when accepted
	}{
		{"ASCII", "alice", ""},
		{"inner space", "Alice Smith", ""},
		{"e-mail", "alice.smith+presence@example.com", ""},
		{"UUID", "3f2b8c1e-9a4d-4e6b-8f0a-2c5d7e9b1a3f", ""},
		{"two-byte runes at the cap", strings.Repeat("é", limits.IDBytes/2), ""},
		{"U+FFFD sent as itself", "bad\ufffd", ""},
		{"joiner inside an emoji sequence", "👩\u200d💻", ""},
		{"non-joiner inside a word", "می\u200cخواهم", ""},
		{"empty", "", "must not be empty"},
		{"over the cap", strings.Repeat("x", limits.IDBytes+1), "at most 128"},
		{"byte 0xFF", "bad\xff", "not valid UTF-8 (byte 3)"},
		{"byte 0xFE", "bad\xfe", "not valid UTF-8 (byte 3)"},
		{"a surrogate encoded in UTF-8", "bad\xed\xa0\x80", "not valid UTF-8 (byte 3)"},
		{"a truncated rune", "bad\xe2\x82", "not valid UTF-8 (byte 3)"},
		{"an overlong encoding", "bad\xc0\xaf", "not valid UTF-8 (byte 3)"},
		{"NUL", "a\x00b", "control character U+0000"},
		{"newline", "a\nb", "control character U+000A"},
		{"DEL", "a\x7fb", "control character U+007F"},
		{"C1 next line", "a\u0085b", "control character U+0085"},
		{"byte order mark", "\ufeffalice", "format character U+FEFF at byte 0"},
		{"zero-width space", "ali\u200bce", "format character U+200B"},
		{"right-to-left override", "\u202eecila", "format character U+202E"},
		{"soft hyphen", "ali\u00adce", "format character U+00AD"},
		{"joiner at the start", "\u200dalice", "format character U+200D at byte 0"},
		{"non-joiner at the end", "alice\u200c", "format character U+200C at byte 5"},
		{"line separator", "ali\u2028ce", "separator U+2028"},
		{"paragraph separator", "alice\u2029", "separator U+2029"},
		{"leading space", " alice", "starts with white space U+0020"},
		{"trailing space", "alice ", "ends with white space U+0020"},
		{"leading no-break space", "\u00a0alice", "starts with white space U+00A0"},
		{"trailing ideographic space", "alice\u3000", "ends with white space U+3000"},
		{"only a space", " ", "starts with white space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := core.CheckID("user", tt.id)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckID(%q) = %v, want nil", tt.id, err)
				}
				return
			}
			var ie *core.InputError
			if !errors.As(err, &ie) || !errors.Is(err, core.ErrInvalid) || ie.Field != "user" {
				t.Fatalf("CheckID(%q) = %v, want an *InputError for field user", tt.id, err)
			}
			if !strings.Contains(ie.Reason, tt.reason) {
				t.Errorf("CheckID(%q): reason %q, want it to say %q", tt.id, ie.Reason, tt.reason)
			}
		})
	}
}
