package core_test

import (
	"context"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// TestLoginPolicies covers docs/design.md §8: the three policies, kicks with
// their gateways, the device cap, and fencing by session token.
func TestLoginPolicies(t *testing.T) {
	tests := []struct {
		name  string
		cfg   core.Config
		steps []step
	}{
		{"multi: devices coexist", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, login("u", "phone", core.KindIOS, "gw2"), "ok"},
			{0, login("u", "mac", core.KindDesktop, "gw3"), "ok"},
			{1 * sec, status("u"), "ONLINE mac:ONLINE phone:ONLINE web:ONLINE"},
		}},
		{"multi: the device cap refuses, it does not truncate", core.Config{MaxDevices: 2}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, login("u", "phone", core.KindIOS, "gw2"), "ok"},
			{0, login("u", "mac", core.KindDesktop, "gw3"), "toomany"},
			{0, hb("u", "tab", core.KindWeb), "toomany"},
			{0, login("u", "phone", core.KindIOS, "gw4"), "ok kicked=phone@gw2"},
			{1 * sec, status("u"), "ONLINE phone:ONLINE web:ONLINE"},
		}},
		{"exclusive: a login kicks every other device", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, login("u", "mac", core.KindDesktop, "gw2"), "ok"},
			{5 * sec, login("u", "phone", core.KindAndroid, "gw3", core.PolicyExclusive), "ok kicked=mac@gw2 kicked=web@gw1 [u:OFFLINE→ONLINE]"},
			{5 * sec, status("u"), "ONLINE phone:ONLINE"},
			{10 * sec, hb("u", "web", core.KindWeb, withToken), "replaced"},
			{10 * sec, status("u"), "ONLINE phone:ONLINE"},
		}},
		{"exclusive per kind: one device per class", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, login("u", "iphone", core.KindIOS, "gw2"), "ok"},
			{1 * sec, login("u", "pixel", core.KindAndroid, "gw3", core.PolicyExclusivePerKind), "ok kicked=iphone@gw2 [u:OFFLINE→ONLINE]"},
			{1 * sec, login("u", "mac", core.KindDesktop, "gw4", core.PolicyExclusivePerKind), "ok"},
			{1 * sec, status("u"), "ONLINE mac:ONLINE pixel:ONLINE web:ONLINE"},
		}},
		{"a re-login of the same device fences the old tab", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, saveToken("u", "web", "first tab"), "saved"},
			{5 * sec, login("u", "web", core.KindWeb, "gw2"), "ok kicked=web@gw1 [u:OFFLINE→ONLINE]"},
			{10 * sec, hb("u", "web", core.KindWeb, staleToken("first tab")), "replaced"},
			{10 * sec, hb("u", "web", core.KindWeb, withToken), "ok"},
		}},
		{"a logged-out token stays refused; a new login is accepted", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{10 * sec, logout("u", "web"), "removed"},
			{10 * sec, status("u"), "OFFLINE"},
			{20 * sec, hb("u", "web", core.KindWeb, withToken), "replaced"},
			{20 * sec, status("u"), "OFFLINE"},
			{20 * sec, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{21 * sec, hb("u", "web", core.KindWeb, withToken), "ok [u:OFFLINE→ONLINE]"},
		}},
		{"exclusive policy: a device must log in first", core.Config{Policy: core.PolicyExclusive}, []step{
			{0, hb("u", "web", core.KindWeb), "nosession"},
			{0, status("u"), "OFFLINE"},
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{1 * sec, hb("u", "web", core.KindWeb), "nosession"},
			{1 * sec, hb("u", "web", core.KindWeb, withToken), "ok [u:OFFLINE→ONLINE]"},
			{2 * sec, login("u", "phone", core.KindIOS, "gw2"), "ok kicked=web@gw1"},
			{3 * sec, hb("u", "web", core.KindWeb, withToken), "replaced"},
			{2 * min, hb("u", "web", core.KindWeb, withToken), "replaced"},
			{61 * min, hb("u", "web", core.KindWeb, withToken), "nosession"},
		}},
		{"a stale client cannot log out a newer session", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, saveToken("u", "web", "old"), "saved"},
			{1 * sec, login("u", "web", core.KindWeb, "gw1"), "ok kicked=web@gw1 [u:OFFLINE→ONLINE]"},
			{2 * sec, func(e *env) string {
				r, err := opdo.Do[core.Ended](e.ctx, e.p, core.Logout{User: "u", Device: "web", Token: e.tokens["old"]})
				return ended(r, err)
			}, "replaced"},
			{2 * sec, status("u"), "ONLINE web:ONLINE"},
		}},
		{"multi: a login fences every earlier token of its device, kicked or not", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, saveToken("u", "web", "first"), "saved"},
			{1 * sec, disconnect("u", "web"), "removed"},
			{2 * sec, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{3 * sec, disconnect("u", "web"), "removed"},
			{4 * sec, hb("u", "web", core.KindWeb, staleToken("first")), "replaced"},
			{4 * sec, hb("u", "web", core.KindWeb, withToken), "ok"},
			{61 * min, hb("u", "web", core.KindWeb, staleToken("first")), "ok [u:OFFLINE→ONLINE]"},
		}},
		{"multi: an implicit login under a fence makes its token the one in force", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, saveToken("u", "web", "login"), "saved"},
			{1 * sec, disconnect("u", "web"), "removed"},
			{2 * sec, implicitLogin("u", "web"), "ok"},
			{3 * sec, disconnect("u", "web"), "removed"},
			{4 * sec, hb("u", "web", core.KindWeb, withToken), "ok"},
			{5 * sec, disconnect("u", "web"), "removed"},
			{6 * sec, hb("u", "web", core.KindWeb, staleToken("login")), "replaced"},
		}},
		{"multi: an implicit login with no fence in force sets none", core.Config{}, []step{
			{0, implicitLogin("u", "web"), "ok"},
			{1 * sec, disconnect("u", "web"), "removed"},
			{2 * sec, hb("u", "web", core.KindWeb, fixedToken("from-another-tab")), "ok"},
		}},
		{"multi: an implicit login under a fence fences its device with its own token", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{1 * sec, disconnect("u", "web"), "removed"},
			{2 * sec, implicitLogin("u", "web"), "ok"},
			{3 * sec, disconnect("u", "web"), "removed"},
			{4 * sec, hb("u", "web", core.KindWeb, fixedToken("from-another-tab")), "replaced"},
			{4 * sec, hb("u", "web", core.KindWeb, withToken), "ok"},
		}},
		{"multi: an implicit login under a fence extends it to KickFence after its start", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, saveToken("u", "web", "login"), "saved"},
			{1 * sec, disconnect("u", "web"), "removed"},
			{30 * min, implicitLogin("u", "web"), "ok"},
			{30*min + sec, disconnect("u", "web"), "removed"},
			{70 * min, hb("u", "web", core.KindWeb, staleToken("login")), "replaced"},
			{90 * min, hb("u", "web", core.KindWeb, staleToken("login")), "replaced"},
			{91 * min, hb("u", "web", core.KindWeb, staleToken("login")), "ok"},
		}},
		{"multi: a session whose window passed leaves its fence behind", core.Config{}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, saveToken("u", "web", "first"), "saved"},
			{5 * min, hb("u", "web", core.KindWeb, fixedToken("from-another-tab")), "replaced"},
			{6 * min, sweep, "swept"},
			{7 * min, hb("u", "web", core.KindWeb, fixedToken("from-another-tab")), "replaced"},
			{7 * min, hb("u", "web", core.KindWeb, staleToken("first")), "ok"},
		}},
		{"a kick outlasts the kicked device's own fence", core.Config{KickFence: 2 * min}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{1 * min, login("u", "phone", core.KindIOS, "gw2", core.PolicyExclusive), "ok kicked=web@gw1 [u:OFFLINE→ONLINE]"},
			{2*min + sec, hb("u", "web", core.KindWeb, withToken), "replaced"},
			{3 * min, hb("u", "web", core.KindWeb, withToken), "replaced"},
			{3*min + sec, hb("u", "web", core.KindWeb, withToken), "ok"},
		}},
		{"exclusive: a superseded token is refused, not asked to log in", core.Config{Policy: core.PolicyExclusive}, []step{
			{0, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{0, saveToken("u", "web", "first"), "saved"},
			{1 * sec, disconnect("u", "web"), "removed"},
			{2 * sec, login("u", "web", core.KindWeb, "gw1"), "ok"},
			{3 * sec, disconnect("u", "web"), "removed"},
			{4 * sec, hb("u", "web", core.KindWeb, staleToken("first")), "replaced"},
			{4 * sec, hb("u", "web", core.KindWeb, withToken), "nosession"},
		}},
		{"a heartbeat with an unknown token under multi is an implicit login", core.Config{}, []step{
			{0, func(e *env) string {
				ack, err := opdo.Do[core.Ack](e.ctx, e.p, core.Heartbeat{User: "u", Device: "web", Token: "from-before-a-restart"})
				if err != nil {
					return errName(err)
				}
				return ack.Token
			}, "from-before-a-restart"},
			{0, status("u"), "ONLINE web:ONLINE"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runTable(t, tt.cfg, tt.steps) })
	}
}

// TestKickMessagesReachTheGateway checks that a kick is published on the
// channel of the gateway that held the session.
func TestKickMessagesReachTheGateway(t *testing.T) {
	ctx := context.Background()
	e, _, mr := newMiniEngine(t, core.Config{})
	_ = mr
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "web", Gateway: "gw-7"}); err != nil {
		t.Fatal(err)
	}
	exclusive := core.PolicyExclusive
	res, err := e.Login(ctx, core.Login{User: "u", Device: "phone", Kind: core.KindIOS, Policy: &exclusive})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kicked) != 1 || res.Kicked[0].Gateway != "gw-7" || res.Kicked[0].Device != "web" {
		t.Fatalf("kicked %+v, want web on gw-7", res.Kicked)
	}
	if got := e.KickChannel("gw-7"); got != "presence:kick:gw-7" {
		t.Fatalf("KickChannel = %q", got)
	}
}

// TestLoginRetryChangesNothing replays the exact login call, as a driver
// that resends after a network error does: the second run kicks nobody.
func TestLoginRetryChangesNothing(t *testing.T) {
	ctx := context.Background()
	e, rec, _, _ := newRecordedEngine(t, core.Config{})
	if _, err := e.Login(ctx, core.Login{User: "u", Device: "web", Gateway: "gw1"}); err != nil {
		t.Fatal(err)
	}
	last := rec.calls[len(rec.calls)-1]
	res := rec.inner.Eval(ctx, []core.Call{last})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if kicked := res[0].Value.Array[2]; kicked.Kind != core.ValueArray || len(kicked.Array) != 0 {
		t.Fatalf("the replayed login kicked %v, want nobody", kicked)
	}
	st, err := e.Status(ctx, "u")
	if err != nil || len(st.Devices) != 1 {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// TestLoginWithTokenIsIdempotent checks that a caller retrying a login with
// the same Login.Token changes nothing the second time.
func TestLoginWithTokenIsIdempotent(t *testing.T) {
	runTable(t, core.Config{}, []step{
		{0, login("u", "phone", core.KindIOS, "gw1"), "ok"},
		{1 * sec, loginWithToken("u", "web", "retry-me"), "ok [u:OFFLINE→ONLINE]"},
		{1 * sec, loginWithToken("u", "web", "retry-me"), "ok"},
		{2 * sec, status("u"), "ONLINE phone:ONLINE web:ONLINE"},
	})
}

// implicitLogin heartbeats user/dev without a token and files the token it
// is handed as the device's.
func implicitLogin(user, dev string) func(*env) string {
	return func(e *env) string {
		ack, err := opdo.Do[core.Ack](e.ctx, e.p, core.Heartbeat{User: user, Device: dev, Kind: core.KindWeb})
		if err != nil {
			return errName(err)
		}
		e.tokens[user+"/"+dev] = ack.Token
		return "ok" + changes(ack.Changes)
	}
}

// fixedToken sends token, one the engine never handed out.
func fixedToken(token string) beatOpt {
	return func(hb *core.Heartbeat, _ *env) { hb.Token = token }
}

func loginWithToken(user, dev, token string) func(*env) string {
	return func(e *env) string {
		res, err := opdo.Do[core.LoginResult](e.ctx, e.p, core.Login{User: user, Device: dev, Kind: core.KindWeb, Gateway: "gw2", Token: token})
		if err != nil {
			return errName(err)
		}
		out := "ok"
		for _, k := range res.Kicked {
			out += " kicked=" + k.Device
		}
		return out + changes(res.Changes)
	}
}

// TestRetriedLoginFencesASessionAnImplicitLoginMade checks that a login
// retried with Login.Token supersedes the device's earlier tokens even when
// the live session holding that token was made by a heartbeat (an implicit
// login, which sets no fence): a first attempt of the login would have
// fenced the device, so the retry must leave it fenced too. The race suite
// found the sequence (seed 2444999146096993).
func TestRetriedLoginFencesASessionAnImplicitLoginMade(t *testing.T) {
	disconnectX := func(e *env) string {
		r, err := opdo.Do[core.Ended](e.ctx, e.p, core.Disconnect{User: "u", Device: "p", Token: "X"})
		return ended(r, err)
	}
	runTable(t, core.Config{}, []step{
		{0, implicitLogin("u", "p"), "ok"}, // files T0 as u/p's token
		{2 * sec, disconnect("u", "p"), "removed"},
		{3 * sec, hb("u", "p", core.KindWeb, fixedToken("X")), "ok"},
		{4 * sec, loginWithToken("u", "p", "X"), "ok [u:OFFLINE→ONLINE]"},
		{5 * sec, disconnectX, "removed"},
		{6 * sec, hb("u", "p", core.KindWeb, withToken), "replaced"}, // T0
	})
}
