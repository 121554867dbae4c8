package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// testSecret signs the tests' tokens.
var testSecret = []byte("0123456789abcdef0123456789abcdef-server-tests")

// backend is a Redis the tests run against.
type backend struct {
	name string
	// addr opens a Redis and returns its address.
	addr func(t *testing.T) string
}

// backends are miniredis and, where redis-server is installed, a real
// server started for the test.
func backends() []backend {
	return []backend{
		{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
		{"redis-server", func(t *testing.T) string { return redistest.Server(t).Addr }},
	}
}

// forEachBackend runs test on every backend.
func forEachBackend(t *testing.T, test func(t *testing.T, addr string)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.addr(t))
		})
	}
}

// newStore returns a go-redis store on addr, closed when the test ends.
func newStore(t testing.TB, addr string) core.Store {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return goredis.New(c)
}

var prefixes atomic.Int64

// testLogger discards the server's logs, unless PRESENCE_TEST_LOG names a
// level ("debug", "warn", …) to print them at on stderr.
func testLogger() *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(os.Getenv("PRESENCE_TEST_LOG"))); err != nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
}

// testConfig has timings short enough for tests: changes are published at
// once, streams and sweeps run often.
func testConfig() server.Config {
	return server.Config{
		Engine: core.Config{
			Prefix:         "srvtest" + strconv.FormatInt(prefixes.Add(1), 10),
			CoalesceWindow: -1,
			LeaveDelay:     -1,
		},
		Auth:           server.AuthConfig{Secret: testSecret},
		PollInterval:   50 * time.Millisecond,
		SweepUsers:     100 * time.Millisecond,
		SweepScopes:    200 * time.Millisecond,
		ReconcileEvery: 200 * time.Millisecond,
		ScopeRefresh:   100 * time.Millisecond,
		Logger:         testLogger(),
	}
}

// everyInterval is a heartbeat interval of d for every device kind.
func everyInterval(d time.Duration) map[core.Kind]time.Duration {
	out := map[core.Kind]time.Duration{}
	for k := core.KindOther; k <= core.KindAndroid; k++ {
		out[k] = d
	}
	return out
}

// instance is one running server behind an httptest server.
type instance struct {
	srv *server.Server
	url string
}

// startServer runs a server over store with cfg until the test ends.
func startServer(t testing.TB, store core.Store, cfg server.Config) *instance {
	t.Helper()
	srv, err := server.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = srv.Run(ctx) }()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		if err := srv.Drain(dctx); err != nil {
			t.Errorf("drain: %v", err)
		}
		ts.Close()
		cancel()
		<-ran
	})
	inst := &instance{srv: srv, url: ts.URL}
	waitFor(t, 5*time.Second, "the server to be ready", func() bool {
		res, err := http.Get(ts.URL + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return inst
}

// token returns a token for user granting claims.
func token(t testing.TB, user string, claims ...string) string {
	t.Helper()
	tok, err := server.NewToken(testSecret, server.TokenOptions{User: user, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// client calls the API with a token.
type client struct {
	t     testing.TB
	base  string
	token string
}

func (in *instance) as(t testing.TB, tok string) client {
	return client{t: t, base: in.url, token: tok}
}

// do sends a request with body as JSON (raw if a string) and decodes a
// 2xx answer into out. It returns the status and, for an error answer,
// the error.
func (c client) do(method, path string, body, out any) (int, *server.Error) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil || (method != http.MethodGet && method != http.MethodHead) {
		// Every state-changing request declares JSON, with a body or not.
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			c.t.Fatalf("%s %s: %d with Content-Type %q: %s", method, path, res.StatusCode, ct, raw)
		}
		var er server.ErrorResponse
		if err := json.Unmarshal(raw, &er); err != nil || er.Error == nil || er.Error.Code == "" {
			c.t.Fatalf("%s %s: %d, not an error body: %s", method, path, res.StatusCode, raw)
		}
		return res.StatusCode, er.Error
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return res.StatusCode, nil
}

// must is do that fails the test on an error answer.
func (c client) must(method, path string, body, out any) {
	c.t.Helper()
	if code, e := c.do(method, path, body, out); e != nil {
		c.t.Fatalf("%s %s: %d %s: %s (field %q)", method, path, code, e.Code, e.Message, e.Field)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	ID, Kind, Data string
}

// sseStream reads an event stream.
type sseStream struct {
	res    *http.Response
	events chan sseEvent
}

// openSSE opens GET path (with query) as an event stream; header may set
// Last-Event-ID. It fails the test unless the answer is a stream.
func openSSE(t testing.TB, base, path, tok string, header http.Header) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, raw)
	}
	s := &sseStream{res: res, events: make(chan sseEvent, 1024)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Kind != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[6:]
			}
		}
	}()
	t.Cleanup(func() { cancel(); res.Body.Close() })
	return s
}

// next returns the next event of kind (skipping others), failing the test
// after within.
func (s *sseStream) next(t testing.TB, kind string, within time.Duration) sseEvent {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("stream closed while waiting for a %q event", kind)
			}
			if ev.Kind == kind {
				return ev
			}
		case <-deadline.C:
			t.Fatalf("no %q event within %v", kind, within)
		}
	}
}

// decode unmarshals an event's data.
func decode[T any](t testing.TB, ev sseEvent) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
		t.Fatalf("event %s %q: %v", ev.Kind, ev.Data, err)
	}
	return v
}
