package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
)

// get fetches path and returns the status, a header and the body.
func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// TestOperations checks /healthz, /readyz (which follows Redis), /metrics
// (fed by the core's hooks) and the dashboard's files.
func TestOperations(t *testing.T) {
	mr := miniredis.RunT(t)
	in := startServer(t, newStore(t, mr.Addr()), testConfig())
	in.as(t, token(t, "alice")).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)

	res, body := send(t, "GET", in.url+"/metrics", "", map[string]string{"Authorization": "Bearer " + token(t, "ops", "presence_admin")})
	code := res.StatusCode
	for _, want := range []string{`presence_heartbeats_total{reason="",result="accepted"} 1`,
		`presence_http_requests_total{code="200",listener="api",method="POST",route="/v1/heartbeat"} 1`,
		`presence_published_total{kind="change"}`, "go_goroutines", "presence_redis_call_duration_seconds_count",
		`presence_sweep_interval_seconds{kind="users"}`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics: %d, missing %q", code, want)
		}
	}
	waitFor(t, 10*time.Second, "presence_online_users", func() bool {
		_, body := send(t, "GET", in.url+"/metrics", "", map[string]string{"Authorization": "Bearer " + token(t, "ops", "presence_admin")})
		return strings.Contains(body, `presence_online_users{status="ONLINE"} 1`) &&
			strings.Contains(body, `presence_sweep_last_completed_timestamp_seconds{kind="users"}`)
	})
	if code, h, _ := get(t, in.url+"/"); code != http.StatusFound || h.Get("Location") != "/dashboard/" {
		t.Fatalf("/: %d %v", code, h)
	}
	if code, _, body := get(t, in.url+"/dashboard/"); code != 200 || !strings.Contains(body, "Open a simulated device") {
		t.Fatalf("/dashboard/: %d", code)
	}
	if code, h, _ := get(t, in.url+"/dashboard/app.js"); code != 200 || !strings.Contains(h.Get("Content-Type"), "javascript") {
		t.Fatalf("/dashboard/app.js: %d %v", code, h)
	}
	if code, _, _ := get(t, in.url+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d", code)
	}
	mr.Close()
	code, _, body = get(t, in.url+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, server.CodeUnavailable) {
		t.Fatalf("/readyz without Redis: %d %s", code, body)
	}
	if code, _, _ := get(t, in.url+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	c, e := in.as(t, token(t, "alice")).do("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	if c != http.StatusServiceUnavailable || e.Code != server.CodeUnavailable {
		t.Fatalf("heartbeat without Redis: %d %+v", c, e)
	}
}

// blockingStore holds every call while block is set, until the call's
// context ends.
type blockingStore struct {
	core.Store
	block atomic.Bool
}

func (s *blockingStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	if s.block.Load() {
		<-ctx.Done()
		res := make([]core.Result, len(calls))
		for i := range res {
			res[i].Err = ctx.Err()
		}
		return res
	}
	return s.Store.Eval(ctx, calls)
}

// TestRequestTimeout checks that a request that runs out of time gets a
// 504 with the timeout code.
func TestRequestTimeout(t *testing.T) {
	store := &blockingStore{Store: newStore(t, miniredis.RunT(t).Addr())}
	cfg := testConfig()
	cfg.RequestTimeout = 100 * time.Millisecond
	in := startServer(t, store, cfg)
	store.block.Store(true)
	defer store.block.Store(false)
	code, e := in.as(t, token(t, "alice")).do("GET", "/v1/users/alice/status", nil, nil)
	if code != http.StatusGatewayTimeout || e.Code != server.CodeTimeout {
		t.Fatalf("got %d %+v", code, e)
	}
}
