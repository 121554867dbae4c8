package fuzz

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// idCase is one request of the identifier target: what it sends, and for
// each field that the independent rules of docs/design.md §3 reject, the
// field name (or name prefix, for metadata) the InputError must carry.
type idCase struct {
	name    string
	bad     []string // fields that must be blamed (one of them); empty: the request is valid
	maybe   []string // fields that may be blamed although the test cannot tell
	run     func(ctx context.Context, p core.Presence) error
	inspect func(t *testing.T, ctx context.Context, p core.Presence) // checks after an accepted request
}

// blame lists field when ok is false.
func blame(bad []string, ok bool, field string) []string {
	if ok {
		return bad
	}
	return append(bad, field)
}

// FuzzIdentifiers builds Heartbeat, Login, Logout, Disconnect, SetManual,
// Statuses, Touch, Leave, Count and Members requests from fuzzed strings and
// checks docs/design.md §3 against an engine on miniredis and the model:
// a request is accepted exactly when the test's own rules say so; an
// accepted one round-trips (Status shows the device with exactly the
// metadata sent, Members lists the member); a rejected one fails with an
// error matching core.ErrInvalid that is a *core.InputError naming one of the
// offending fields, and sends nothing to Redis.
func FuzzIdentifiers(f *testing.F) {
	f.Add("alice", "phone-1", "gw-1", "10086", "bob", "app", "1.2.3", "", uint8(0))
	f.Add("{u0}", "d:1", "", "}{", "*", "k", "", "0.0", uint8(7))
	f.Add("\ufeffu", "d ", " gw", "1\u2028", "a\u200db", "k", "v\u202e", "", uint8(1))
	f.Add("u\u200d", "\u00a0d", "g\u200bw", "1", "\u200cm", "k", "", "", uint8(2))
	f.Fuzz(func(t *testing.T, user, device, gateway, scopeID, member, metaKey, metaVal, token string, sel uint8) {
		ctx := context.Background()
		m := newMini(t, t0)
		eng := m.engine(t, core.Config{Classes: testClasses()})
		model, err := core.NewModel(core.Config{Classes: testClasses(), Clock: m.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		kind := [8]core.Kind{0, 1, 2, 3, 4, 0, 3, 5}[sel&7] // Kind(5) is not a kind
		meta := map[string]string{metaKey: metaVal}
		if sel&0x08 != 0 {
			meta = nil // keep: a nil map leaves the metadata alone
		}
		class := []string{"room", "video", "approx", metaKey}[sel>>6]
		sc := core.Scope{Class: class, ID: scopeID}
		classOK := class == "room" || class == "video" || class == "approx"

		// The fields each request may be blamed for, by the test's own rules.
		device3 := func(prefix string, withToken bool) []string {
			bad := blame(nil, validID(user), prefix+"User")
			bad = blame(bad, validID(device), prefix+"Device")
			bad = blame(bad, kind <= core.KindAndroid, prefix+"Kind")
			bad = blame(bad, gateway == "" || validID(gateway), prefix+"Gateway")
			bad = blame(bad, !withToken || token == "" || validID(token), prefix+"Token")
			return blame(bad, validMeta(meta), prefix+"Meta")
		}
		loginBad, hbBad, hbTokenBad := device3("Login.", false), device3("Heartbeat.", false), device3("Heartbeat.", true)
		logoutBad := blame(blame(nil, validID(user), "user"), validID(device), "device")
		disconnectBad := blame(logoutBad, token == "" || validID(token), "token")
		scopeBad := blame(blame(nil, classOK, "scope.Class"), !classOK || validID(scopeID), "scope.ID")
		touchBad := blame(scopeBad, validID(member), "member")

		cases := []idCase{
			{"Login", loginBad, nil, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[core.LoginResult](ctx, p, core.Login{User: user, Device: device, Kind: kind, Gateway: gateway, Meta: meta})
				return err
			}, func(t *testing.T, ctx context.Context, p core.Presence) {
				checkDevice(t, ctx, p, user, device, kind, gateway, meta, true)
			}},
			{"Heartbeat", hbBad, nil, func(ctx context.Context, p core.Presence) error {
				// Logged in above with another token: a valid token is
				// refused as superseded, no token is accepted under Multi.
				_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: user, Device: device, Kind: kind, Gateway: gateway,
					Meta: meta, Active: true})
				return err
			}, func(t *testing.T, ctx context.Context, p core.Presence) {
				checkDevice(t, ctx, p, user, device, kind, gateway, meta, true)
			}},
			{"Heartbeat with token", hbTokenBad, nil, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[core.Ack](ctx, p, core.Heartbeat{User: user, Device: device, Kind: kind, Gateway: gateway,
					Meta: meta, Token: token, Active: true})
				if token != "" && errors.Is(err, core.ErrSessionReplaced) {
					return nil // a client-chosen token cannot match the session's
				}
				return err
			}, nil},
			{"SetManual", blame(nil, validID(user), "user"), nil, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[[]core.Change](ctx, p, core.SetManual{User: user, Manual: core.ManualDND, TTL: 0})
				return err
			}, func(t *testing.T, ctx context.Context, p core.Presence) {
				st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: user})
				if err != nil || st.Manual != core.ManualDND {
					t.Errorf("after SetManual(%q, DND): Status = %+v, %v", user, st, err)
				}
			}},
			{"Statuses", blame(blame(nil, validID(user), "users[0]"), validID(device), "users[1]"), nil,
				func(ctx context.Context, p core.Presence) error {
					sts, err := opdo.Do[[]core.UserStatus](ctx, p, core.ReadStatuses{Users: []string{user, device}})
					if err == nil && (len(sts) != 2 || sts[0].User != user || sts[1].User != device) {
						t.Errorf("Statuses(%q, %q) = %+v", user, device, sts)
					}
					return err
				}, nil},
			{"Touch", touchBad, nil, func(ctx context.Context, p core.Presence) error {
				return opdo.Err(ctx, p, core.ScopeTouch{Scope: sc, Member: member})
			}, func(t *testing.T, ctx context.Context, p core.Presence) {
				checkMember(t, ctx, p, sc, member)
			}},
			{"Count", scopeBad, nil, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[core.Count](ctx, p, core.ReadCount{Scope: sc})
				return err
			}, nil},
			{"Members", blame(scopeBad, cursorOK(metaVal), "cursor"), []string{"cursor"}, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: sc, Cursor: metaVal, Limit: 1 + int(sel)})
				if errors.Is(err, core.ErrUnsupported) && class == "approx" {
					return nil
				}
				return err
			}, nil},
			{"Leave", blame(scopeBad, validID(member), "member"), nil, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[bool](ctx, p, core.Leave{Scope: sc, Member: member})
				if errors.Is(err, core.ErrUnsupported) && class == "approx" {
					return nil
				}
				return err
			}, nil},
			{"Logout", logoutBad, nil, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[core.Ended](ctx, p, core.Logout{User: user, Device: device, Token: ""})
				return err
			}, func(t *testing.T, ctx context.Context, p core.Presence) {
				st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: user})
				if err != nil || slices.ContainsFunc(st.Devices, func(d core.Device) bool { return d.ID == device }) {
					t.Errorf("after Logout(%q, %q): Status = %+v, %v", user, device, st, err)
				}
			}},
			{"Disconnect", disconnectBad, nil, func(ctx context.Context, p core.Presence) error {
				_, err := opdo.Do[core.Ended](ctx, p, core.Disconnect{User: user, Device: device, Token: token})
				return err
			}, nil},
		}
		for _, c := range cases {
			var errs [2]string
			for i, p := range []struct {
				name string
				p    core.Presence
			}{{"engine", eng}, {"model", model}} {
				before := m.rec.count()
				err := c.run(ctx, p.p)
				sent := m.rec.count() - before
				errs[i] = errName(err)
				var ie *core.InputError
				if len(c.bad) == 0 && errors.As(err, &ie) && slices.Contains(c.maybe, ie.Field) {
					c.bad = c.maybe // refused on a ground the test leaves to the engine
				}
				if len(c.bad) > 0 {
					checkRejected(t, p.name+" "+c.name, err, c.bad)
					if sent != 0 {
						t.Errorf("%s %s: rejected request sent %d store calls", p.name, c.name, sent)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s %s: valid request refused: %v", p.name, c.name, err)
					continue
				}
				if c.inspect != nil {
					c.inspect(t, ctx, p.p)
				}
			}
			if errs[0] != errs[1] {
				t.Errorf("%s: engine %s, model %s", c.name, errs[0], errs[1])
			}
		}
	})
}

// testClasses are the scope classes of the targets: one per layout, with
// few compact shards so that members share shards.
func testClasses() map[string]core.ScopeClass {
	return map[string]core.ScopeClass{
		"room":   {Layout: core.LayoutExact},
		"video":  {Layout: core.LayoutCompact, Shards: 4},
		"approx": {Layout: core.LayoutApprox},
	}
}

// cursorOK reports whether c is a cursor the engine could have returned:
// empty, or "shard.offset" in decimal. It is deliberately loose (leading
// zeros and signs are left to the engine): a cursor outside this shape must
// be rejected, one inside it may still be.
func cursorOK(c string) bool {
	if c == "" {
		return true
	}
	a, b, ok := strings.Cut(c, ".")
	digits := func(s string) bool {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "+"), "-")
		return s != "" && len(s) < 12 && strings.Trim(s, "0123456789") == ""
	}
	return ok && digits(a) && digits(b)
}

// checkRejected asserts that err is an *InputError matching ErrInvalid that
// blames one of the bad fields (metadata errors name the key, so a prefix).
func checkRejected(t *testing.T, what string, err error, bad []string) {
	t.Helper()
	var ie *core.InputError
	if !errors.Is(err, core.ErrInvalid) || !errors.As(err, &ie) {
		t.Errorf("%s: got %v, want an *InputError for one of %q", what, err, bad)
		return
	}
	if ie.Reason == "" || !strings.HasPrefix(err.Error(), "presence: ") {
		t.Errorf("%s: unclear error %q", what, err)
	}
	for _, b := range bad {
		if ie.Field == b || strings.HasSuffix(b, ".Meta") && strings.HasPrefix(ie.Field, b) {
			return
		}
	}
	t.Errorf("%s: error blames %q, want one of %q (%v)", what, ie.Field, bad, err)
}

// checkDevice asserts that Status lists the device with exactly what was sent.
func checkDevice(t *testing.T, ctx context.Context, p core.Presence, user, device string, kind core.Kind, gateway string, meta map[string]string, metaSent bool) {
	t.Helper()
	st, err := opdo.Do[core.UserStatus](ctx, p, core.ReadStatus{User: user})
	if err != nil {
		t.Errorf("Status(%q): %v", user, err)
		return
	}
	if st.User != user || st.Status != core.StatusOnline {
		t.Errorf("Status(%q) = %s for %q, want ONLINE", user, st.Status, st.User)
	}
	i := slices.IndexFunc(st.Devices, func(d core.Device) bool { return d.ID == device })
	if i < 0 {
		t.Errorf("Status(%q) lacks device %q: %+v", user, device, st.Devices)
		return
	}
	d := st.Devices[i]
	if d.Kind != kind || d.Gateway != gateway || d.State != core.StatusOnline {
		t.Errorf("device %q = %+v, want kind %v gateway %q ONLINE", device, d, kind, gateway)
	}
	if metaSent && meta != nil && !sameMeta(d.Meta, meta) {
		t.Errorf("device %q meta = %q, want %q", device, d.Meta, meta)
	}
}

func sameMeta(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkMember asserts that a touched member is counted and listed.
func checkMember(t *testing.T, ctx context.Context, p core.Presence, sc core.Scope, member string) {
	t.Helper()
	c, err := opdo.Do[core.Count](ctx, p, core.ReadCount{Scope: sc})
	if err != nil || c.N != 1 {
		t.Errorf("Count(%v) after one touch = %+v, %v; want 1", sc, c, err)
	}
	page, err := opdo.Do[core.MemberPage](ctx, p, core.ReadMembers{Scope: sc, Cursor: "", Limit: core.MaxPage})
	if sc.Class == "approx" {
		if !errors.Is(err, core.ErrUnsupported) {
			t.Errorf("Members(%v) of an approx scope: %v, want ErrUnsupported", sc, err)
		}
		return
	}
	if err != nil || len(page.Members) != 1 || page.Members[0].ID != member || !page.Members[0].LastSeen.Equal(t0) || page.Next != "" {
		t.Errorf("Members(%v) = %+v, %v; want just %q seen at t0", sc, page, err, member)
	}
}
