package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/presencekit/presence/cmd/internal/server"
)

// hs256 signs payload, a JSON object written byte for byte (json.Marshal
// would replace invalid UTF-8), with the tests' secret.
func hs256(payload string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, testSecret)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestIDRuleAtEveryEntryPoint checks docs/design.md §3 over HTTP: an ID
// that breaks the rule is a 400 wherever it arrives (a JSON body, a URL
// path, a query parameter, a token's subject), naming the field, and the
// bytes encoding/json would turn into U+FFFD are refused before decoding.
func TestIDRuleAtEveryEntryPoint(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), withClasses(testConfig()))
	admin := token(t, "ops", "presence_admin")
	exp := time.Now().Add(time.Hour).Unix()
	tests := []struct {
		name, method, path, body string
		tok                      string // default admin
		code, field              string
	}{
		// a body: bytes first, then the rule through the engine
		{"body byte 0xFF", "POST", "/v1/heartbeat", "{\"user\":\"bad\xff\",\"device\":\"d\"}", "", server.CodeInvalidJSON, ""},
		{"body byte 0xFE", "POST", "/v1/heartbeat", "{\"user\":\"bad\xfe\",\"device\":\"d\"}", "", server.CodeInvalidJSON, ""},
		{"body lone high surrogate", "POST", "/v1/heartbeat", `{"user":"bad\ud800","device":"d"}`, "", server.CodeInvalidJSON, ""},
		{"body lone low surrogate", "POST", "/v1/heartbeat", `{"user":"ok","device":"bad\uDC00"}`, "", server.CodeInvalidJSON, ""},
		{"body reversed pair", "POST", "/v1/heartbeat", `{"user":"ok","device":"\udc00\ud800"}`, "", server.CodeInvalidJSON, ""},
		{"body high surrogate then letter", "POST", "/v1/heartbeat", `{"user":"ok","device":"\ud800\u0041"}`, "", server.CodeInvalidJSON, ""},
		{"body invalid UTF-8 in metadata", "POST", "/v1/heartbeat", "{\"device\":\"d\",\"meta\":{\"k\":\"\xc0\xaf\"}}", "", server.CodeInvalidJSON, ""},
		{"body leading space", "POST", "/v1/heartbeat", `{"user":" alice","device":"d"}`, "", server.CodeInvalidField, "user"},
		{"body BOM", "POST", "/v1/heartbeat", `{"device":"\ufeffd"}`, "", server.CodeInvalidField, "device"},
		{"body line separator", "POST", "/v1/login", `{"device":"d","gateway":"gw\u2028"}`, "", server.CodeInvalidField, "gateway"},
		{"body trailing no-break space", "POST", "/v1/logout", `{"device":"d\u00a0"}`, "", server.CodeInvalidField, "device"},
		{"body batch item", "POST", "/v1/heartbeats", `{"beats":[{"device":"d"},{"device":"d","gateway":"\u202egw"}]}`, "", "", ""},
		{"body statuses", "POST", "/v1/statuses", `{"users":["alice","bob "]}`, "", server.CodeInvalidField, "users[1]"},
		{"body member", "POST", "/v1/scopes/room/1/touch", `{"member":"\u200bbob"}`, "", server.CodeInvalidField, "member"},
		// a path
		{"path byte 0xFF", "GET", "/v1/users/bad%FF/status", "", "", server.CodeInvalidField, "user"},
		{"path leading space", "GET", "/v1/users/%20alice/status", "", "", server.CodeInvalidField, "user"},
		{"path manual BOM", "PUT", "/v1/users/%EF%BB%BFalice/manual", `{"status":"DND"}`, "", server.CodeInvalidField, "user"},
		{"path scope ID", "GET", "/v1/scopes/room/1%E2%80%A8/count", "", "", server.CodeInvalidField, "id"},
		{"path scope ID trailing tab", "POST", "/v1/scopes/room/1%09/touch", "", "", server.CodeInvalidField, "id"},
		// a query
		{"query user", "GET", "/v1/events?user=%20alice", "", "", server.CodeInvalidField, "user[0]"},
		{"query gateway", "GET", "/v1/events?gateway=gw%FE", "", "", server.CodeInvalidField, "gateway[0]"},
		// a token's subject
		{"subject byte 0xFF", "POST", "/v1/heartbeat", `{"device":"d"}`, hs256(fmt.Sprintf("{\"sub\":\"bad\xff\",\"exp\":%d}", exp)), server.CodeInvalidField, "sub"},
		{"subject lone surrogate", "POST", "/v1/heartbeat", `{"device":"d"}`, hs256(fmt.Sprintf(`{"sub":"bad\ud800","exp":%d}`, exp)), server.CodeInvalidField, "sub"},
		{"subject leading space", "POST", "/v1/heartbeat", `{"device":"d"}`, token(t, " alice"), server.CodeInvalidField, "sub"},
		{"subject BOM", "POST", "/v1/heartbeat", `{"device":"d"}`, token(t, "\ufeffalice"), server.CodeInvalidField, "sub"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.tok
			if tok == "" {
				tok = admin
			}
			if tc.code == "" { // a batch: the beat's own ack carries the error
				var out server.HeartbeatsResponse
				client{t: t, base: in.url, token: tok}.must(tc.method, tc.path, tc.body, &out)
				if e := out.Acks[1].Error; out.Acks[0].Error != nil || e == nil || e.Code != server.CodeInvalidField || e.Field != "beats[1].gateway" {
					t.Fatalf("acks %+v, %+v; want the second refused for beats[1].gateway", out.Acks[0], e)
				}
				return
			}
			code, e := client{t: t, base: in.url, token: tok}.do(tc.method, tc.path, tc.body, nil)
			if code != http.StatusBadRequest || e == nil || e.Code != tc.code || e.Field != tc.field {
				t.Fatalf("got %d %+v; want 400 %s field %q", code, e, tc.code, tc.field)
			}
		})
	}

	// The three bodies the JSON decoder would have merged into "bad\ufffd"
	// left nothing behind; the character U+FFFD itself is an ID like any
	// other, and so is a valid surrogate pair.
	c := in.as(t, admin)
	var st server.UserStatus
	c.must("GET", "/v1/users/bad%EF%BF%BD/status", nil, &st)
	if st.Status != "OFFLINE" || len(st.Devices) != 0 {
		t.Fatalf("bad\\ufffd after the refused beats: %+v, want OFFLINE without devices", st)
	}
	c.must("POST", "/v1/heartbeat", `{"user":"bad\ufffd","device":"\ud83d\ude00"}`, nil)
	c.must("GET", "/v1/users/bad%EF%BF%BD/status", nil, &st)
	if len(st.Devices) != 1 || st.Devices[0].ID != "😀" {
		t.Fatalf("after a beat with an escaped pair: %+v, want device 😀", st)
	}
}

// TestNoGoTypesInErrors: a body of the wrong JSON type is named in JSON's
// words, never Go's.
func TestNoGoTypesInErrors(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	c := in.as(t, token(t, "alice"))
	tests := []struct {
		path, body, want string
	}{
		{"/v1/heartbeat", `[]`, "the body: expected an object, got JSON array"},
		{"/v1/heartbeat", `"d"`, "the body: expected an object, got JSON string"},
		{"/v1/heartbeats", `{"beats":{}}`, "beats: expected an array, got JSON object"},
		{"/v1/heartbeat", `{"device":"d","at":"now"}`, "at: expected an integer, got JSON string"},
		{"/v1/heartbeat", `{"device":"d","active":1}`, "active: expected true or false, got JSON number"},
		{"/v1/heartbeat", `{"device":"d","meta":[]}`, "meta: expected an object, got JSON array"},
	}
	for _, tc := range tests {
		code, e := c.do("POST", tc.path, tc.body, nil)
		if code != http.StatusBadRequest || e == nil || e.Code != server.CodeInvalidJSON || e.Message != tc.want {
			t.Errorf("POST %s %s: %d %+v; want 400 %q", tc.path, tc.body, code, e, tc.want)
		}
		if e != nil && (strings.Contains(e.Message, "server.") || strings.Contains(e.Message, "int64") || strings.Contains(e.Message, "map[")) {
			t.Errorf("POST %s %s: a Go type in %q", tc.path, tc.body, e.Message)
		}
	}
}

// TestTokenLeeway: a token is accepted until AuthConfig.Leeway after its
// expiry (30 s by default), and not at all past it with a negative leeway.
func TestTokenLeeway(t *testing.T) {
	store := newStore(t, miniredis.RunT(t).Addr())
	expiredAgo := func(d time.Duration) string {
		tok, err := server.NewToken(testSecret, server.TokenOptions{User: "alice", TTL: time.Hour, Now: time.Now().Add(-time.Hour - d)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	none := testConfig()
	none.Auth.Leeway = -1
	minute := testConfig()
	minute.Auth.Leeway = time.Minute
	tests := []struct {
		name string
		cfg  server.Config
		ago  time.Duration
		want int
	}{
		{"default, 5 s ago", testConfig(), 5 * time.Second, http.StatusOK},
		{"default, 2 min ago", testConfig(), 2 * time.Minute, http.StatusUnauthorized},
		{"none, 5 s ago", none, 5 * time.Second, http.StatusUnauthorized},
		{"1 min, 45 s ago", minute, 45 * time.Second, http.StatusOK},
		{"1 min, 2 min ago", minute, 2 * time.Minute, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := startServer(t, store, tc.cfg)
			if code, e := in.as(t, expiredAgo(tc.ago)).do("POST", "/v1/heartbeat", `{"device":"d"}`, nil); code != tc.want {
				t.Fatalf("got %d %+v, want %d", code, e, tc.want)
			}
		})
	}
}
