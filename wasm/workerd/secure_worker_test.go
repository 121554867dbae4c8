package workerd_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/wasm"
	"github.com/presencekit/presence/wasm/internal/lanes"
)

// secureEnv is the environment of a Worker that reaches r over TLS as
// its ACL user, with connection mode ("request" or "durable-object").
func secureEnv(r *secureRedis, mode string) map[string]string {
	return map[string]string{
		"PRESENCE_REDIS_HOST":       "127.0.0.1",
		"PRESENCE_REDIS_PORT":       strconv.Itoa(r.TLSPort),
		"PRESENCE_REDIS_TLS":        "on",
		"PRESENCE_REDIS_USER":       r.User,
		"PRESENCE_REDIS_PASSWORD":   r.UserPassword,
		"PRESENCE_PREFIX":           "presence-workerd-" + mode,
		"PRESENCE_REDIS_CONNECTION": mode,
	}
}

// connectionsReceived is how many connections Redis has accepted so
// far, asked on admin's one connection.
func connectionsReceived(t testing.TB, admin *redis.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := admin.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("INFO stats has no total_connections_received:\n%s", info)
	return 0
}

// TestWorkerdSecure runs the Worker against a Redis that asks for an ACL
// user's password, over TLS with a CA of the test's, in both connection
// modes: the lanes' sequence gives native Go's answers, and Redis counts
// one connection per request, or one for all of them through the
// Durable Object. Refused credentials answer 502 naming the cause.
func TestWorkerdSecure(t *testing.T) {
	lanes.NPMBin(t, "workerd")
	seq, want := lanes.Want(t)
	r := startSecureRedis(t)
	module := lanes.Module(t, wasm.WASI)
	body, err := os.ReadFile(lanes.Path())
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(r.Port), Password: r.Password, PoolSize: 1})
	defer admin.Close()
	const requests = 10
	for _, c := range []struct {
		mode        string
		connections int // Redis accepts for requests warm requests
	}{{"request", requests}, {"durable-object", 0}} {
		t.Run(c.mode, func(t *testing.T) {
			// Each mode runs the sequence on an empty Redis, as native Go did.
			if err := admin.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			s := start(t, module, secureEnv(r, c.mode), r.CA)
			lanes.Compare(t, "workerd "+c.mode, seq, string(s.do(t, http.MethodPost, "/sequence", body)), want)

			s.do(t, http.MethodPost, "/heartbeat", []byte(`{"user":"u0","device":"d","kind":"web"}`))
			before := connectionsReceived(t, admin)
			for i := range requests {
				out := s.do(t, http.MethodPost, "/heartbeat", []byte(fmt.Sprintf(`{"user":"u%d","device":"d","kind":"web","active":true}`, i)))
				if !strings.HasPrefix(string(out), `{"v":2,"result":{"token":`) {
					t.Fatalf("POST /heartbeat: %s", out)
				}
			}
			if got := connectionsReceived(t, admin) - before; got != c.connections {
				t.Errorf("Redis accepted %d connections for %d requests, want %d", got, requests, c.connections)
			}
		})
	}

	for _, c := range []struct {
		name, user, password, want string
	}{
		{"wrong password", r.User, "wrong", `refused AUTH as user "presence": WRONGPASS`},
		{"unknown user", "nobody", r.UserPassword, `refused AUTH as user "nobody": WRONGPASS`},
		{"no password", "", "", "asks for a password ("},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := secureEnv(r, "request")
			env["PRESENCE_REDIS_USER"], env["PRESENCE_REDIS_PASSWORD"] = c.user, c.password
			s := start(t, module, env, r.CA)
			status, out := s.request(t, http.MethodGet, "/", nil)
			if status != http.StatusBadGateway || !strings.Contains(string(out), c.want) {
				t.Errorf("GET /: %d %s, want 502 with %q", status, out, c.want)
			}
		})
	}
}
