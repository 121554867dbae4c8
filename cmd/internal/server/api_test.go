package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
)

// withClasses adds an approx class to the default scope classes.
func withClasses(cfg server.Config) server.Config {
	classes := core.DefaultClasses()
	classes["hll"] = core.ScopeClass{Layout: core.LayoutApprox}
	cfg.Engine.Classes = classes
	return cfg
}

// TestAPI walks through the API on miniredis and on a real server: a
// heartbeat, a login that kicks, a refused stale token, logout, manual
// status, batch statuses and heartbeats, and scopes.
func TestAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		cfg := withClasses(testConfig())
		cfg.DeviceClasses = []string{"room"} // members may be alice's devices
		in := startServer(t, newStore(t, addr), cfg)
		alice := in.as(t, token(t, "alice"))
		admin := in.as(t, token(t, "ops", "presence_admin"))

		var hb server.HeartbeatResponse
		alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "web1", Kind: "web", Active: true}, &hb)
		if hb.Token == "" || len(hb.Changes) != 1 || hb.Changes[0].From != "OFFLINE" || hb.Changes[0].To != "ONLINE" {
			t.Fatalf("first heartbeat: %+v", hb)
		}
		var st server.UserStatus
		alice.must("GET", "/v1/users/alice/status", nil, &st)
		if st.Status != "ONLINE" || len(st.Devices) != 1 || st.Devices[0].ID != "web1" || st.Devices[0].Kind != "web" {
			t.Fatalf("own status: %+v", st)
		}

		var login server.LoginResponse
		alice.must("POST", "/v1/login", server.LoginRequest{Device: "phone", Kind: "ios", Gateway: "gw-2", Policy: "exclusive"}, &login)
		if login.Token == "" || len(login.Kicked) != 1 || login.Kicked[0].Device != "web1" {
			t.Fatalf("exclusive login: %+v", login)
		}
		if code, e := alice.do("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "web1", Kind: "web", Token: hb.Token}, nil); code != http.StatusConflict || e.Code != server.CodeSessionReplaced {
			t.Fatalf("kicked session's heartbeat: %d %+v", code, e)
		}

		var out server.LogoutResponse
		alice.must("POST", "/v1/logout", server.LogoutRequest{Device: "phone", Token: login.Token}, &out)
		if !out.Removed || len(out.Changes) != 1 || out.Changes[0].To != "OFFLINE" {
			t.Fatalf("logout: %+v", out)
		}

		alice.must("PUT", "/v1/users/alice/manual", server.ManualRequest{Status: "DND"}, nil)
		alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "web2", Kind: "web"}, nil)
		var sts server.StatusesResponse
		admin.must("POST", "/v1/statuses", server.StatusesRequest{Users: []string{"alice", "nobody"}}, &sts)
		if len(sts.Statuses) != 2 || sts.Statuses[0].Status != "DND" || sts.Statuses[0].Manual != "DND" || sts.Statuses[1].Status != "OFFLINE" {
			t.Fatalf("statuses: %+v", sts)
		}

		var acks server.HeartbeatsResponse
		admin.must("POST", "/v1/heartbeats", server.HeartbeatsRequest{Beats: []server.HeartbeatRequest{
			{User: "bob", Device: "d1", Kind: "desktop", Active: true},
			{User: "carol", Device: "d1", Kind: "toaster"},
			{User: "dave", Device: "d1", Kind: "android", Background: true},
		}}, &acks)
		if len(acks.Acks) != 3 || acks.Acks[0].Token == "" || acks.Acks[2].Token == "" ||
			acks.Acks[1].Error == nil || acks.Acks[1].Error.Field != "beats[1].kind" {
			t.Fatalf("batch: %+v", acks)
		}
		if code, e := alice.do("POST", "/v1/heartbeats", server.HeartbeatsRequest{Beats: []server.HeartbeatRequest{{User: "bob", Device: "x"}}}, nil); code != http.StatusForbidden || e.Code != server.CodeForbidden {
			t.Fatalf("batch for another user: %d %+v", code, e)
		}

		var touched server.TouchResponse
		alice.must("POST", "/v1/scopes/room/lobby/touch", nil, &touched)
		if touched.Member != "alice" || touched.Scope != "room:lobby" {
			t.Fatalf("touch: %+v", touched)
		}
		alice.must("POST", "/v1/scopes/room/lobby/touch", server.MemberRequest{Member: "alice/web2"}, nil) // her live device
		if code, e := alice.do("POST", "/v1/scopes/room/lobby/touch", server.MemberRequest{Member: "bob"}, nil); code != http.StatusForbidden {
			t.Fatalf("touch as bob: %d %+v", code, e)
		}
		alice.must("POST", "/v1/scopes/room/a%2Fb/touch", nil, &touched)
		if touched.Scope != "room:a/b" {
			t.Fatalf("escaped scope ID: %+v", touched)
		}
		var c server.CountResponse
		alice.must("GET", "/v1/scopes/room/lobby/count", nil, &c)
		if c.Count != 2 {
			t.Fatalf("count: %+v", c)
		}
		if code, _ := alice.do("GET", "/v1/scopes/room/lobby/members", nil, nil); code != http.StatusForbidden {
			t.Fatalf("members without the read claim: %d", code)
		}
		reader := in.as(t, token(t, "svc", "presence_read"))
		var page server.MembersResponse
		reader.must("GET", "/v1/scopes/room/lobby/members?limit=1", nil, &page)
		if len(page.Members) != 1 || page.Next == "" {
			t.Fatalf("first page: %+v", page)
		}
		reader.must("GET", "/v1/scopes/room/lobby/members?limit=1&cursor="+page.Next, nil, &page)
		if len(page.Members) != 1 {
			t.Fatalf("second page: %+v", page)
		}
		var left server.LeaveResponse
		alice.must("POST", "/v1/scopes/room/lobby/leave", nil, &left)
		alice.must("GET", "/v1/scopes/room/lobby/count", nil, &c)
		if !left.Removed || c.Count != 1 {
			t.Fatalf("leave: %+v, then count %+v", left, c)
		}
		if code, e := reader.do("GET", "/v1/scopes/hll/x/members", nil, nil); code != http.StatusBadRequest || e.Code != server.CodeUnsupported {
			t.Fatalf("approx members: %d %+v", code, e)
		}

		var other server.UserStatus
		reader.must("GET", "/v1/users/alice/status", nil, &other)
		if other.Status != "DND" || other.Devices != nil || other.Manual != "" {
			t.Fatalf("a reader sees %+v; want the status alone", other)
		}

		waitFor(t, 5*time.Second, "a sweeper report", func() bool {
			var sw server.SweeperResponse
			admin.must("GET", "/v1/admin/sweeper", nil, &sw)
			return sw.Users != nil && sw.Users.Buckets > 0
		})
		waitFor(t, 5*time.Second, "the overview to count the online users", func() bool {
			var ov server.OverviewResponse
			admin.must("GET", "/v1/admin/overview", nil, &ov)
			return ov.Users.ByStatus["DND"] == 1 && ov.Users.ByStatus["ONLINE"] == 1 && ov.Users.ByStatus["PUSH_ONLINE"] == 1
		})
	})
}

// TestInvisibleIsOfflineToOthers checks that a reader cannot tell an
// INVISIBLE user from an offline one.
func TestInvisibleIsOfflineToOthers(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	alice := in.as(t, token(t, "alice"))
	alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	alice.must("PUT", "/v1/users/alice/manual", server.ManualRequest{Status: "INVISIBLE", TTLMillis: 60000}, nil)
	var seen server.UserStatus
	in.as(t, token(t, "bob", "presence_read")).must("GET", "/v1/users/alice/status", nil, &seen)
	if seen.Status != "OFFLINE" || seen.Manual != "" || len(seen.Devices) != 0 {
		t.Fatalf("others see %+v", seen)
	}
	var own server.UserStatus
	alice.must("GET", "/v1/users/alice/status", nil, &own)
	if own.Manual != "INVISIBLE" || own.ManualUntil == 0 || len(own.Devices) != 1 {
		t.Fatalf("alice sees %+v", own)
	}
}

// TestBadInput checks that bad input is a 400 (or 404, 405, 413) whose
// body names the field.
func TestBadInput(t *testing.T) {
	cfg := withClasses(testConfig())
	cfg.MaxBody = 4 << 10
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	meta := map[string]string{}
	for i := range 17 {
		meta[fmt.Sprint("k", i)] = "v"
	}
	tests := []struct {
		name, method, path string
		body               any
		header             string
		status             int
		code, field        string
	}{
		{"empty body", "POST", "/v1/heartbeat", "", "", 400, server.CodeInvalidJSON, ""},
		{"broken JSON", "POST", "/v1/heartbeat", "{", "", 400, server.CodeInvalidJSON, ""},
		{"two values", "POST", "/v1/heartbeat", `{"device":"d"}{}`, "", 400, server.CodeInvalidJSON, ""},
		{"unknown field", "POST", "/v1/heartbeat", `{"device":"d","colour":1}`, "", 400, server.CodeInvalidJSON, "colour"},
		{"wrong type", "POST", "/v1/heartbeat", `{"device":5}`, "", 400, server.CodeInvalidJSON, "device"},
		{"empty device", "POST", "/v1/heartbeat", `{"device":""}`, "", 400, server.CodeInvalidField, "device"},
		{"control character", "POST", "/v1/heartbeat", `{"device":"a\u0001b"}`, "", 400, server.CodeInvalidField, "device"},
		{"long device", "POST", "/v1/heartbeat", map[string]string{"device": strings.Repeat("x", 129)}, "", 400, server.CodeInvalidField, "device"},
		{"unknown kind", "POST", "/v1/heartbeat", `{"device":"d","kind":"toaster"}`, "", 400, server.CodeInvalidField, "kind"},
		{"too much meta", "POST", "/v1/heartbeat", map[string]any{"device": "d", "meta": meta}, "", 400, server.CodeInvalidField, "meta"},
		{"clock skew", "POST", "/v1/heartbeat", `{"device":"d","at":1000}`, "", 400, server.CodeClockSkew, "at"},
		{"negative at", "POST", "/v1/heartbeat", `{"device":"d","at":-5}`, "", 400, server.CodeInvalidField, "at"},
		{"form body", "POST", "/v1/heartbeat", `{"device":"d"}`, "application/x-www-form-urlencoded", 415, server.CodeUnsupportedMediaType, "Content-Type"},
		{"too large", "POST", "/v1/heartbeat", map[string]string{"device": "d", "token": strings.Repeat("x", 5000)}, "", 413, server.CodeBodyTooLarge, ""},
		{"empty batch", "POST", "/v1/heartbeats", `{"beats":[]}`, "", 400, server.CodeInvalidField, "beats"},
		{"unknown policy", "POST", "/v1/login", `{"device":"d","policy":"solo"}`, "", 400, server.CodeInvalidField, "policy"},
		{"login device", "POST", "/v1/login", `{"device":""}`, "", 400, server.CodeInvalidField, "device"},
		{"logout device", "POST", "/v1/logout", `{}`, "", 400, server.CodeInvalidField, "device"},
		{"manual status", "PUT", "/v1/users/alice/manual", `{"status":"BUSY"}`, "", 400, server.CodeInvalidField, "status"},
		{"manual ttl", "PUT", "/v1/users/alice/manual", `{"status":"DND","ttl_ms":-1}`, "", 400, server.CodeInvalidField, "ttl_ms"},
		{"no users", "POST", "/v1/statuses", `{"users":[]}`, "", 400, server.CodeInvalidField, "users"},
		{"empty user", "POST", "/v1/statuses", `{"users":["alice",""]}`, "", 400, server.CodeInvalidField, "users[1]"},
		{"unknown class", "GET", "/v1/scopes/nosuch/x/count", nil, "", 400, server.CodeInvalidField, "class"},
		{"touch unknown class", "POST", "/v1/scopes/nosuch/x/touch", nil, "", 400, server.CodeInvalidField, "class"},
		{"page limit", "GET", "/v1/scopes/room/x/members?limit=0", nil, "", 400, server.CodeInvalidField, "limit"},
		{"cursor", "GET", "/v1/scopes/room/x/members?cursor=zz", nil, "", 400, server.CodeInvalidField, "cursor"},
		{"approx leave", "POST", "/v1/scopes/hll/x/leave", nil, "", 400, server.CodeUnsupported, ""},
		{"stream flag", "GET", "/v1/events?all=maybe", nil, "", 400, server.CodeInvalidField, "all"},
		{"stream resume ID", "GET", "/v1/events?last_event_id=nope", nil, "", 400, server.CodeInvalidField, "last_event_id"},
		{"future resume ID", "GET", "/v1/events?last_event_id=99999999999999-0", nil, "", 400, server.CodeInvalidField, "last_event_id"},
		{"wrong method", "GET", "/v1/heartbeat", nil, "", 405, server.CodeMethodNotAllowed, ""},
		{"no such endpoint", "GET", "/v1/nope", nil, "", 404, server.CodeNotFound, ""},
	}
	c := in.as(t, token(t, "alice", "presence_admin"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := c
			c.t = t
			var code int
			var e *server.Error
			if tc.header != "" {
				code, e = rawDo(t, in.url, tc.method, tc.path, tc.body.(string), tc.header, c.token)
			} else {
				code, e = c.do(tc.method, tc.path, tc.body, nil)
			}
			if code != tc.status || e == nil || e.Code != tc.code || e.Field != tc.field {
				t.Fatalf("got %d %+v; want %d %s field %q", code, e, tc.status, tc.code, tc.field)
			}
			if e.Message == "" {
				t.Fatal("error without a message")
			}
		})
	}
}

// rawDo sends body with a chosen Content-Type.
func rawDo(t *testing.T, base, method, path, body, contentType, tok string) (int, *server.Error) {
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	c := client{t: t}
	raw, _ := io.ReadAll(res.Body)
	var er server.ErrorResponse
	if err := json.Unmarshal(raw, &er); err != nil {
		c.t.Fatalf("%s", raw)
	}
	return res.StatusCode, er.Error
}

// TestAuth checks who may do what.
func TestAuth(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	signed := func(claims jwt.MapClaims, method jwt.SigningMethod, key any) string {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	exp := time.Now().Add(time.Hour).Unix()
	expired, err := server.NewToken(testSecret, server.TokenOptions{User: "alice", Now: time.Now().Add(-2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	alice := token(t, "alice")
	tests := []struct {
		name, method, path string
		body               any
		tok                string
		status             int
		code               string
	}{
		{"no token", "POST", "/v1/heartbeat", `{"device":"d"}`, "", 401, server.CodeUnauthenticated},
		{"wrong secret", "POST", "/v1/heartbeat", `{"device":"d"}`, signed(jwt.MapClaims{"sub": "alice", "exp": exp}, jwt.SigningMethodHS256, []byte("another secret of at least 32 bytes!!")), 401, server.CodeUnauthenticated},
		{"expired", "POST", "/v1/heartbeat", `{"device":"d"}`, expired, 401, server.CodeUnauthenticated},
		{"no expiry", "POST", "/v1/heartbeat", `{"device":"d"}`, signed(jwt.MapClaims{"sub": "alice"}, jwt.SigningMethodHS256, testSecret), 401, server.CodeUnauthenticated},
		{"no subject", "POST", "/v1/heartbeat", `{"device":"d"}`, signed(jwt.MapClaims{"exp": exp}, jwt.SigningMethodHS256, testSecret), 401, server.CodeUnauthenticated},
		{"alg none", "POST", "/v1/heartbeat", `{"device":"d"}`, signed(jwt.MapClaims{"sub": "alice", "exp": exp}, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType), 401, server.CodeUnauthenticated},
		{"HS512", "POST", "/v1/heartbeat", `{"device":"d"}`, signed(jwt.MapClaims{"sub": "alice", "exp": exp}, jwt.SigningMethodHS512, testSecret), 401, server.CodeUnauthenticated},
		{"own heartbeat", "POST", "/v1/heartbeat", `{"device":"d"}`, alice, 200, ""},
		{"heartbeat as bob", "POST", "/v1/heartbeat", `{"user":"bob","device":"d"}`, alice, 403, server.CodeForbidden},
		{"login as bob", "POST", "/v1/login", `{"user":"bob","device":"d"}`, alice, 403, server.CodeForbidden},
		{"logout as bob", "POST", "/v1/logout", `{"user":"bob","device":"d"}`, alice, 403, server.CodeForbidden},
		{"manual for bob", "PUT", "/v1/users/bob/manual", `{"status":"DND"}`, alice, 403, server.CodeForbidden},
		{"read bob", "GET", "/v1/users/bob/status", nil, alice, 403, server.CodeForbidden},
		{"read bob in a batch", "POST", "/v1/statuses", `{"users":["alice","bob"]}`, alice, 403, server.CodeForbidden},
		{"read bob with the claim", "GET", "/v1/users/bob/status", nil, token(t, "alice", "presence_read"), 200, ""},
		{"read bob by scope claim", "GET", "/v1/users/bob/status", nil, signed(jwt.MapClaims{"sub": "alice", "exp": exp, "scope": "profile presence_read"}, jwt.SigningMethodHS256, testSecret), 200, ""},
		{"follow bob", "GET", "/v1/events?user=bob", nil, alice, 403, server.CodeForbidden},
		{"follow everyone", "GET", "/v1/events?all=1", nil, alice, 403, server.CodeForbidden},
		{"gateway kicks", "GET", "/v1/events?gateway=gw-1", nil, token(t, "alice", "presence_read"), 403, server.CodeForbidden},
		{"sweeper", "GET", "/v1/admin/sweeper", nil, alice, 403, server.CodeForbidden},
		{"overview", "GET", "/v1/admin/overview", nil, token(t, "alice", "presence_read"), 403, server.CodeForbidden},
		{"admin overview", "GET", "/v1/admin/overview", nil, token(t, "ops", "presence_admin"), 200, ""},
		{"admin acts for bob", "POST", "/v1/heartbeat", `{"user":"bob","device":"d"}`, token(t, "ops", "presence_admin"), 200, ""},
		{"info needs no token", "GET", "/v1/info", nil, "", 200, ""},
		{"health needs no token", "GET", "/healthz", nil, "", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, e := client{t: t, base: in.url, token: tc.tok}.do(tc.method, tc.path, tc.body, nil)
			if code != tc.status || (tc.code != "" && (e == nil || e.Code != tc.code)) {
				t.Fatalf("got %d %+v; want %d %s", code, e, tc.status, tc.code)
			}
		})
	}
}

// TestNew checks the configurations New refuses.
func TestNew(t *testing.T) {
	store := newStore(t, miniredis.RunT(t).Addr())
	tests := []struct {
		name string
		cfg  server.Config
		is   error
	}{
		{"no secret", server.Config{}, server.ErrNoSecret},
		{"short secret", server.Config{Auth: server.AuthConfig{Secret: []byte("short")}}, nil},
		{"no change log", server.Config{Auth: server.AuthConfig{InsecureDev: true}, Engine: core.Config{ChangeLog: -1}}, nil},
		{"bad engine config", server.Config{Auth: server.AuthConfig{InsecureDev: true}, Engine: core.Config{Prefix: "{x}"}}, core.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.New(store, tc.cfg)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("New: %v; want an error matching %v", err, tc.is)
			}
		})
	}
}

// TestInsecureDev checks that insecure-dev accepts requests without a
// token, says so in every response, and still needs a user.
func TestInsecureDev(t *testing.T) {
	cfg := testConfig()
	cfg.Auth = server.AuthConfig{InsecureDev: true}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	anon := in.as(t, "")
	anon.must("POST", "/v1/heartbeat", server.HeartbeatRequest{User: "alice", Device: "d"}, nil)
	if code, e := anon.do("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil); code != 400 || e.Field != "user" {
		t.Fatalf("heartbeat without a user: %d %+v", code, e)
	}
	res, err := http.Get(in.url + "/v1/info")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Header.Get("X-Presence-Insecure") != "1" {
		t.Fatal("no X-Presence-Insecure header")
	}
	var info server.InfoResponse
	anon.must("GET", "/v1/info", nil, &info)
	if info.Auth != "insecure-dev" || info.IntervalsMS["web"] != 30000 || info.LeaveDelayMS != 0 || info.FollowClaim != "presence_follow" {
		t.Fatalf("info: %+v", info)
	}
}

// TestRateLimit checks the per-user heartbeat budget: single heartbeats
// get a 429 with Retry-After, a batch's extra beats an error each, and
// other users are not affected.
func TestRateLimit(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatRate, cfg.HeartbeatBurst = 0.001, 2
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	alice := in.as(t, token(t, "alice"))
	for range 2 {
		alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	}
	code, e := alice.do("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	if code != http.StatusTooManyRequests || e.Code != server.CodeRateLimited || e.RetryAfter < 1 {
		t.Fatalf("third heartbeat: %d %+v", code, e)
	}
	var acks server.HeartbeatsResponse
	in.as(t, token(t, "gw", "presence_admin")).must("POST", "/v1/heartbeats", server.HeartbeatsRequest{Beats: []server.HeartbeatRequest{
		{User: "alice", Device: "d"}, {User: "bob", Device: "d"}}}, &acks)
	if acks.Acks[0].Error == nil || acks.Acks[0].Error.Code != server.CodeRateLimited || acks.Acks[1].Error != nil {
		t.Fatalf("batch: %+v", acks)
	}
}
