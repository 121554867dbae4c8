package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/presencekit/presence/cmd/internal/server"
)

// followToken returns a token for user whose follow claim lists follows.
func followToken(t testing.TB, user string, follows ...string) string {
	t.Helper()
	tok, err := server.NewToken(testSecret, server.TokenOptions{User: user, Follow: follows})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawToken signs claims as they are, for claims NewToken cannot write.
func rawToken(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	claims["exp"] = time.Now().Add(time.Hour).Unix()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestFollowClaimReads checks what a token with the follow claim may read:
// its followed users' statuses and streams, and nothing the read claim
// alone opens (another user, all=1, a scope's members).
func TestFollowClaimReads(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	fan := followToken(t, "fan", "f-bob", "f-carol")
	none := followToken(t, "loner")
	for _, tc := range []struct {
		name, method, path string
		body               any
		tok                string
		want               int
	}{
		{"a followed user's status", "GET", "/v1/users/f-bob/status", nil, fan, 200},
		{"its own status", "GET", "/v1/users/fan/status", nil, fan, 200},
		{"another user's status", "GET", "/v1/users/f-dave/status", nil, fan, 403},
		{"followed users' statuses", "POST", "/v1/statuses", server.StatusesRequest{Users: []string{"f-bob", "f-carol", "fan"}}, fan, 200},
		{"one unfollowed user among the statuses", "POST", "/v1/statuses", server.StatusesRequest{Users: []string{"f-bob", "f-dave"}}, fan, 403},
		{"an empty follow claim", "GET", "/v1/users/f-bob/status", nil, none, 403},
		{"a scope's members", "GET", "/v1/scopes/room/lobby/members", nil, fan, 403},
		{"a stream of followed users", "GET", "/v1/events?user=f-bob&user=f-carol&snapshot=0", nil, fan, 200},
		{"a stream of another user", "GET", "/v1/events?user=f-bob&user=f-dave", nil, fan, 403},
		{"a stream of every user", "GET", "/v1/events?all=1", nil, fan, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.path, "/v1/events") {
				code := streamStatus(t, in.url+tc.path, tc.tok)
				if code != tc.want {
					t.Fatalf("GET %s: %d; want %d", tc.path, code, tc.want)
				}
				return
			}
			code, e := in.as(t, tc.tok).do(tc.method, tc.path, tc.body, nil)
			if code != tc.want {
				t.Fatalf("%s %s: %d %+v; want %d", tc.method, tc.path, code, e, tc.want)
			}
			if code == 403 && !strings.Contains(e.Message, `"presence_follow"`) && !strings.Contains(tc.path, "members") {
				t.Errorf("the refusal does not name the follow claim: %q", e.Message)
			}
		})
	}
}

// streamStatus opens an event stream and returns the answer's status.
func streamStatus(t *testing.T, url, tok string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestFollowClaimRefused checks that a malformed follow claim makes the
// token invalid (401) rather than granting or silently ignoring anything.
func TestFollowClaimRefused(t *testing.T) {
	cfg := testConfig()
	cfg.Auth.MaxFollow = 3
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	for _, tc := range []struct {
		name   string
		follow any
		want   string
	}{
		{"a string, not a list", "f-bob", "must be a list"},
		{"more users than MaxFollow", []string{"a", "b", "c", "d"}, "at most 3"},
		{"an item that is not a string", []any{"a", 7}, "item 1"},
		{"an empty ID", []string{"a", ""}, "presence_follow[1]"},
		{"an ID with a slash", []string{"a/b"}, "presence_follow[0]"},
		{"an ID too long", []string{strings.Repeat("x", 129)}, "presence_follow[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := rawToken(t, jwt.MapClaims{"sub": "fan", "presence_follow": tc.follow})
			code, e := in.as(t, tok).do("GET", "/v1/users/a/status", nil, nil)
			if code != http.StatusUnauthorized || e.Code != server.CodeUnauthenticated {
				t.Fatalf("%d %+v; want 401 unauthenticated", code, e)
			}
			if !strings.Contains(e.Message+" "+e.Field, tc.want) {
				t.Errorf("message %q (field %q) does not say %q", e.Message, e.Field, tc.want)
			}
		})
	}
	// At the bound the token is good.
	tok := rawToken(t, jwt.MapClaims{"sub": "fan", "presence_follow": []string{"a", "b", "c"}})
	in.as(t, tok).must("GET", "/v1/users/c/status", nil, nil)
}

// TestFollowClaimStream checks that a follower's stream carries the
// changes of the users it follows and of no one else.
func TestFollowClaimStream(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	s := openSSE(t, in.url, "/v1/events?user=f-bob&user=f-carol", followToken(t, "fan", "f-bob", "f-carol"), nil)
	for range 2 {
		if st := decode[server.UserStatus](t, s.next(t, server.EventStatus, within)); st.Status != "OFFLINE" {
			t.Fatalf("snapshot %+v; want OFFLINE", st)
		}
	}
	s.next(t, server.EventReady, within)
	for _, u := range []string{"f-dave", "f-bob", "f-eve", "f-carol"} {
		in.as(t, token(t, u)).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	}
	var got []string
	for range 2 {
		c := decode[server.Change](t, s.next(t, server.EventChange, within))
		got = append(got, c.User+":"+c.To)
	}
	// A change of an unfollowed user would have come before f-carol's.
	if want := "f-bob:ONLINE f-carol:ONLINE"; strings.Join(got, " ") != want {
		t.Fatalf("changes %v; want %s", got, want)
	}
}
