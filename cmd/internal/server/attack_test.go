package server_test

// The attack suite of issue 20: what a hostile or careless client tries,
// on loopback, bounded (at most 500 connections and 60 s a case). Each
// case asserts an outcome ("closed", "429", "403"), never a tight timing.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"

	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/core"
)

// startServe runs a server with Serve (the real http.Server and its
// deadlines, unlike startServer's httptest) on a loopback port.
func startServe(t testing.TB, store core.Store, cfg server.Config) *instance {
	t.Helper()
	srv, err := server.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	in := &instance{srv: srv, url: "http://" + ln.Addr().String()}
	waitFor(t, 5*time.Second, "the server to be ready", func() bool {
		res, err := http.Get(in.url + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return in
}

// send makes one request with the given headers and returns the answer
// and its body.
func send(t testing.TB, method, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

// openStatus opens an event stream and returns the answer's status,
// headers and (unless it is the stream) body, closing it at once.
func openStatus(t testing.TB, url, tok string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		return res.StatusCode, res.Header, ""
	}
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(raw)
}

// errCode returns the error code of an error body, "" for another body.
func errCode(body string) string {
	var er server.ErrorResponse
	if json.Unmarshal([]byte(body), &er) != nil || er.Error == nil {
		return ""
	}
	return er.Error.Code
}

// silentBody opens a connection, sends the headers of a POST declaring a
// 1,000-byte body, then nothing; it returns how long the server took to
// close the connection (reading whatever it answered), or an error if it
// was still open after limit.
func silentBody(addr, tok string, limit time.Duration) (time.Duration, string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	start := time.Now()
	h := "POST /v1/heartbeat HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	if tok != "" {
		h += "Authorization: Bearer " + tok + "\r\n"
	}
	if _, err := io.WriteString(c, h+"\r\n{"); err != nil {
		return 0, "", err
	}
	_ = c.SetReadDeadline(start.Add(limit))
	got, err := io.ReadAll(c) // until the server closes
	status, _, _ := strings.Cut(string(got), "\r\n")
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return 0, status, fmt.Errorf("still open after %v (answer so far %q)", limit, status)
	}
	return time.Since(start), status, nil
}

// TestSilentBodyIsClosed: a request whose declared body never arrives is
// cut off, with or without a token, on 100 connections at once; with the
// defaults, within ReadTimeout (10 s).
func TestSilentBodyIsClosed(t *testing.T) {
	t.Run("100 connections", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.ReadTimeout = time.Second
		cfg.IPRate = -1 // TestRateLimits has the per-address budget
		in := startServe(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
		addr := strings.TrimPrefix(in.url, "http://")
		tok := token(t, "alice")
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		var mu sync.Mutex
		statuses := map[string]int{}
		for i := range 100 {
			wg.Go(func() {
				use := ""
				if i%2 == 0 {
					use = tok
				}
				_, st, err := silentBody(addr, use, 40*time.Second)
				if err != nil {
					errs <- fmt.Errorf("connection %d (token %v): %w", i, use != "", err)
				}
				mu.Lock()
				statuses[st]++
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		t.Logf("answers: %v", statuses)
		if statuses["HTTP/1.1 401 Unauthorized"] != 50 || statuses["HTTP/1.1 408 Request Timeout"] != 50 {
			t.Errorf("answers %v; want 50 × 401 (no token) and 50 × 408 (the body timed out)", statuses)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		in := startServe(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
		addr := strings.TrimPrefix(in.url, "http://")
		for _, tok := range []string{token(t, "alice"), ""} {
			d, st, err := silentBody(addr, tok, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("token %v: %q, closed after %v", tok != "", st, d.Round(100*time.Millisecond))
			if tok != "" && d > 12*time.Second {
				t.Errorf("closed after %v; the default ReadTimeout is 10 s", d)
			}
			if tok == "" && d > 8*time.Second {
				t.Errorf("a refused request held for %v: a refusal closes at once, without waiting for the body", d)
			}
		}
	})
}

// TestDeadlinesSpareStreams: the read, write and idle deadlines end
// requests and idle connections, not the event streams.
func TestDeadlinesSpareStreams(t *testing.T) {
	cfg := testConfig()
	cfg.ReadTimeout, cfg.RequestTimeout, cfg.WriteTimeout, cfg.IdleTimeout = 500*time.Millisecond, 300*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	cfg.StreamPing = 100 * time.Millisecond
	in := startServe(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	tok := token(t, "alice")
	s := openSSE(t, in.url, "/v1/events?snapshot=0", tok, nil)
	s.next(t, server.EventReady, within)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(in.url, "http") + "/v1/ws?snapshot=0"
	ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()

	// An idle kept-alive connection is closed after IdleTimeout.
	c, err := net.Dial("tcp", strings.TrimPrefix(in.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v; want it closed (EOF)", err)
	}

	time.Sleep(2 * time.Second) // four times every deadline
	in.as(t, tok).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	if c := decode[server.Change](t, s.next(t, server.EventChange, within)); c.To != "ONLINE" {
		t.Fatalf("SSE after the deadlines: %+v", c)
	}
	for {
		_, raw, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("WebSocket after the deadlines: %v", err)
		}
		var m server.WSMessage
		if json.Unmarshal(raw, &m) == nil && m.Type == server.EventChange {
			break
		}
	}
}

// TestCrossSiteWrites: a state-changing request must be JSON in every mode,
// a foreign Origin is refused, and --cors-origins answers preflights.
func TestCrossSiteWrites(t *testing.T) {
	for _, mode := range []string{"insecure-dev", "jwt"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.CORSOrigins = []string{"https://app.example.com"}
			hdr := map[string]string{}
			body := `{"device":"d"}`
			if mode == "insecure-dev" {
				cfg.Auth = server.AuthConfig{InsecureDev: true}
				body = `{"user":"alice","device":"d"}`
			} else {
				hdr["Authorization"] = "Bearer " + token(t, "alice")
			}
			in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
			with := func(kv ...string) map[string]string {
				h := map[string]string{}
				for k, v := range hdr {
					h[k] = v
				}
				for i := 0; i < len(kv); i += 2 {
					h[kv[i]] = kv[i+1]
				}
				return h
			}
			for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
				res, b := send(t, "POST", in.url+"/v1/heartbeat", body, with("Content-Type", ct))
				if res.StatusCode != http.StatusUnsupportedMediaType || errCode(b) != server.CodeUnsupportedMediaType {
					t.Errorf("Content-Type %q: %d %s; want 415", ct, res.StatusCode, b)
				}
			}
			if res, b := send(t, "PUT", in.url+"/v1/users/alice/manual", `{"status":"DND"}`, with()); res.StatusCode != 415 {
				t.Errorf("manual without a Content-Type: %d %s", res.StatusCode, b)
			}
			if res, b := send(t, "POST", in.url+"/v1/scopes/room/x/touch", "", with()); res.StatusCode != 415 {
				t.Errorf("bodiless touch without a Content-Type: %d %s", res.StatusCode, b)
			}
			res, b := send(t, "POST", in.url+"/v1/heartbeat", body, with("Content-Type", "application/json", "Origin", "https://evil.example"))
			if res.StatusCode != http.StatusForbidden || res.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("foreign origin: %d %s", res.StatusCode, b)
			}
			if res, b := send(t, "GET", in.url+"/v1/users/alice/status", "", with("Origin", "https://evil.example")); res.StatusCode != http.StatusForbidden {
				t.Errorf("foreign origin reading: %d %s", res.StatusCode, b)
			}
			if res, b := send(t, "POST", in.url+"/v1/heartbeat", body, with("Content-Type", "application/json; charset=utf-8", "Origin", in.url)); res.StatusCode != 200 {
				t.Errorf("same origin: %d %s", res.StatusCode, b)
			}
			res, b = send(t, "POST", in.url+"/v1/heartbeat", body, with("Content-Type", "application/json", "Origin", "https://app.example.com"))
			if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
				t.Errorf("allowed origin: %d %v %s", res.StatusCode, res.Header, b)
			}
			// Preflights.
			res, _ = send(t, "OPTIONS", in.url+"/v1/heartbeat", "", map[string]string{"Origin": "https://app.example.com",
				"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
			h := res.Header
			if res.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
				!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
				!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
				!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Content-Type") {
				t.Errorf("preflight of an allowed origin: %d %v", res.StatusCode, h)
			}
			res, _ = send(t, "OPTIONS", in.url+"/v1/heartbeat", "", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
			if res.StatusCode != http.StatusForbidden || res.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight of a foreign origin: %d %v", res.StatusCode, res.Header)
			}
			res, _ = send(t, "OPTIONS", in.url+"/v1/heartbeat", "", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "DELETE"})
			if res.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("preflight of a method the route does not take: %d", res.StatusCode)
			}
		})
	}
	if _, err := server.New(newStore(t, miniredis.RunT(t).Addr()), server.Config{Auth: server.AuthConfig{InsecureDev: true},
		CORSOrigins: []string{"app.example.com/path"}}); err == nil {
		t.Error("New accepted a CORS origin that is not scheme://host")
	}
}

// TestScopeAbuse: a user touches, leaves and counts as itself only; its
// own live devices in a class that counts devices; a service or admin
// token acts for anyone.
func TestScopeAbuse(t *testing.T) {
	cfg := testConfig()
	classes := core.DefaultClasses()
	classes["call"] = core.ScopeClass{} // exact, counts devices below
	cfg.Engine.Classes = classes
	cfg.DeviceClasses = []string{"call"}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	alice := in.as(t, token(t, "alice"))
	svc := in.as(t, token(t, "gateway", "presence_service"))

	refused := 0
	for i := range 30 {
		code, _ := alice.do("POST", "/v1/scopes/room/hot2/touch", server.MemberRequest{Member: "alice/" + strconv.Itoa(i)}, nil)
		if code == http.StatusOK {
			t.Fatalf("alice touched alice/%d", i)
		}
		refused++
	}
	var c server.CountResponse
	svc.must("GET", "/v1/scopes/room/hot2/count", nil, &c)
	if c.Count != 0 {
		t.Fatalf("room:hot2 counts %d after %d refused touches", c.Count, refused)
	}

	// "alice/x" cannot be a user (TestUserIDsWithoutSlash): naming it as a
	// member of a class that counts users is a 400, whoever asks.
	svc.must("POST", "/v1/scopes/room/lobby/touch", server.MemberRequest{Member: "carol"}, nil)
	for _, path := range []string{"/v1/scopes/room/lobby/leave", "/v1/scopes/room/lobby/touch"} {
		for _, who := range []client{alice, svc} {
			if code, e := who.do("POST", path, server.MemberRequest{Member: "carol/x"}, nil); code != http.StatusBadRequest || e.Field != "member" {
				t.Fatalf("%s as carol/x: %d %+v", path, code, e)
			}
		}
		if code, e := alice.do("POST", path, server.MemberRequest{Member: "carol"}, nil); code != http.StatusForbidden {
			t.Fatalf("alice %s as carol: %d %+v", path, code, e)
		}
	}
	svc.must("GET", "/v1/scopes/room/lobby/count", nil, &c)
	if c.Count != 1 {
		t.Fatalf("room:lobby counts %d; want carol still in it", c.Count)
	}

	// A class that counts devices: alice's live devices only.
	alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "laptop"}, nil)
	alice.must("POST", "/v1/scopes/call/c1/touch", server.MemberRequest{Member: "alice/laptop"}, nil)
	alice.must("POST", "/v1/scopes/call/c1/touch", server.MemberRequest{Member: "alice"}, nil)
	if code, e := alice.do("POST", "/v1/scopes/call/c1/touch", server.MemberRequest{Member: "alice/ghost"}, nil); code != http.StatusForbidden {
		t.Fatalf("a device alice does not have: %d %+v", code, e)
	}
	if code, e := alice.do("POST", "/v1/scopes/room/lobby/touch", server.MemberRequest{Member: "alice/laptop"}, nil); code != http.StatusBadRequest {
		t.Fatalf("a device in a class that counts users: %d %+v", code, e)
	}

	// Service and admin tokens act for others.
	svc.must("POST", "/v1/scopes/room/lobby/touch", server.MemberRequest{Member: "bob"}, nil)
	svc.must("POST", "/v1/heartbeat", server.HeartbeatRequest{User: "bob", Device: "d"}, nil)
	in.as(t, token(t, "ops", "presence_admin")).must("POST", "/v1/scopes/room/lobby/leave", server.MemberRequest{Member: "bob"}, nil)
	if code, _ := svc.do("GET", "/v1/admin/overview", nil, nil); code != http.StatusForbidden {
		t.Fatalf("a service token on an admin endpoint: %d", code)
	}
}

// TestUserIDsWithoutSlash: a user ID never contains "/" (in a class that
// counts devices, "alice/x" is alice's device x), wherever the service
// reads one: a 400 invalid_field naming where it was.
func TestUserIDsWithoutSlash(t *testing.T) {
	cfg := testConfig()
	classes := core.DefaultClasses()
	classes["call"] = core.ScopeClass{}
	cfg.Engine.Classes = classes
	cfg.DeviceClasses = []string{"call"}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	svc := in.as(t, token(t, "gateway", "presence_service", "presence_read"))
	for _, rq := range []struct {
		who          client
		method, path string
		body         any
		field        string
	}{
		{in.as(t, token(t, "alice/x")), "POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, "sub"},
		{in.as(t, token(t, "alice/x")), "GET", "/v1/users/bob/status", nil, "sub"},
		{svc, "POST", "/v1/heartbeat", server.HeartbeatRequest{User: "bob/x", Device: "d"}, "user"},
		{svc, "POST", "/v1/login", server.LoginRequest{User: "bob/x", Device: "d"}, "user"},
		{svc, "POST", "/v1/logout", server.LogoutRequest{User: "bob/x", Device: "d"}, "user"},
		{svc, "PUT", "/v1/users/bob%2Fx/manual", server.ManualRequest{Status: "DND"}, "user"},
		{svc, "GET", "/v1/users/bob%2Fx/status", nil, "user"},
		{svc, "POST", "/v1/statuses", server.StatusesRequest{Users: []string{"bob", "bob/x"}}, "users[1]"},
		{svc, "GET", "/v1/events?user=bob%2Fx", nil, "user[0]"},
		{svc, "POST", "/v1/scopes/room/r/touch", server.MemberRequest{Member: "bob/x"}, "member"},
		{svc, "POST", "/v1/scopes/call/c/touch", server.MemberRequest{Member: "bob/"}, "member"},
	} {
		code, e := rq.who.do(rq.method, rq.path, rq.body, nil)
		if code != http.StatusBadRequest || e == nil || e.Code != server.CodeInvalidField || e.Field != rq.field || !strings.Contains(e.Message, `"/"`) {
			t.Errorf("%s %s %+v: %d %+v; want 400 invalid_field %s", rq.method, rq.path, rq.body, code, e, rq.field)
		}
	}
	if code, e := svc.do("POST", "/v1/scopes/call/c/touch", server.MemberRequest{Member: "/x"}, nil); code != http.StatusBadRequest || e.Field != "member" {
		t.Errorf("member /x: %d %+v", code, e)
	}
	var acks server.HeartbeatsResponse
	svc.must("POST", "/v1/heartbeats", server.HeartbeatsRequest{Beats: []server.HeartbeatRequest{{User: "bob", Device: "d"}, {User: "bob/x", Device: "d"}}}, &acks)
	if len(acks.Acks) != 2 || acks.Acks[0].Error != nil || acks.Acks[1].Error == nil || acks.Acks[1].Error.Field != "beats[1].user" {
		t.Errorf("a batch with a user bob/x: %+v", acks)
	}
	// In a class that counts devices the first "/" ends the user: a device
	// ID may hold more.
	svc.must("POST", "/v1/scopes/call/c/touch", server.MemberRequest{Member: "bob/desk/2"}, nil)
	alice := in.as(t, token(t, "alice"))
	alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "a/b"}, nil)
	alice.must("POST", "/v1/scopes/call/c/touch", server.MemberRequest{Member: "alice/a/b"}, nil)
	var c server.CountResponse
	svc.must("GET", "/v1/scopes/call/c/count", nil, &c)
	if c.Count != 2 {
		t.Fatalf("call:c counts %d; want bob/desk/2 and alice/a/b", c.Count)
	}
}

// TestStreamCaps: one user holds at most MaxStreamsPerUser streams (SSE
// and WebSocket together), the instance MaxStreams; beyond, 429
// too_many_streams with Retry-After.
func TestStreamCaps(t *testing.T) {
	cfg := testConfig()
	cfg.StreamRate, cfg.StreamBurst = 1000, 1000
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	tok := token(t, "alice")
	var streams []*sseStream
	for range 8 { // the default cap
		s := openSSE(t, in.url, "/v1/events?snapshot=0", tok, nil)
		s.next(t, server.EventReady, within)
		streams = append(streams, s)
	}
	code, h, b := openStatus(t, in.url+"/v1/events", tok)
	if code != http.StatusTooManyRequests || errCode(b) != server.CodeTooManyStreams || h.Get("Retry-After") == "" {
		t.Fatalf("ninth SSE stream: %d %v %s", code, h, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(in.url, "http") + "/v1/ws"
	_, wres, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err == nil || wres == nil || wres.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("ninth stream as a WebSocket: %v %v", wres, err)
	}
	openSSE(t, in.url, "/v1/events?snapshot=0", token(t, "bob"), nil).next(t, server.EventReady, within)
	streams[0].res.Body.Close()
	waitFor(t, 10*time.Second, "alice's slot to come back", func() bool {
		code, _, _ := openStatus(t, in.url+"/v1/events?snapshot=0", tok)
		return code == http.StatusOK
	})

	cfg = testConfig()
	cfg.MaxStreams = 3
	in2 := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	for _, u := range []string{"u1", "u2", "ops"} {
		claims := []string{}
		if u == "ops" {
			claims = append(claims, "presence_admin")
		}
		openSSE(t, in2.url, "/v1/events?snapshot=0&user=x", token(t, u, append(claims, "presence_read")...), nil).next(t, server.EventReady, within)
	}
	code, _, b = openStatus(t, in2.url+"/v1/events?user=x", token(t, "u4", "presence_admin"))
	if code != http.StatusTooManyRequests || errCode(b) != server.CodeTooManyStreams {
		t.Fatalf("a stream beyond the instance's cap: %d %s", code, b)
	}
}

// TestRateLimits: per-user budgets on touches and leaves, reads and stream
// opens, and a per-address budget for requests without a valid token.
func TestRateLimits(t *testing.T) {
	cfg := testConfig()
	cfg.ScopeRate, cfg.ScopeBurst = 0.001, 3
	cfg.ReadRate, cfg.ReadBurst = 0.001, 3
	cfg.StreamRate, cfg.StreamBurst = 0.001, 2
	cfg.IPRate, cfg.IPBurst = 0.001, 5
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	tok := token(t, "alice")
	alice := in.as(t, tok)
	want429 := func(what string, code int, e *server.Error) {
		t.Helper()
		if code != http.StatusTooManyRequests || e == nil || e.Code != server.CodeRateLimited || e.RetryAfter < 1 {
			t.Fatalf("%s: %d %+v; want 429 rate_limited", what, code, e)
		}
	}
	for i := range 3 {
		path := "/v1/scopes/room/r/touch"
		if i == 2 {
			path = "/v1/scopes/room/r/leave"
		}
		alice.must("POST", path, nil, nil)
	}
	code, e := alice.do("POST", "/v1/scopes/room/r/touch", nil, nil)
	want429("fourth touch", code, e)
	for range 3 {
		alice.must("GET", "/v1/scopes/room/r/count", nil, nil)
	}
	code, e = alice.do("GET", "/v1/users/alice/status", nil, nil)
	want429("fourth read", code, e)
	code, e = alice.do("POST", "/v1/statuses", server.StatusesRequest{Users: []string{"alice"}}, nil)
	want429("fifth read", code, e)
	// Other users and admins are not affected.
	in.as(t, token(t, "bob")).must("GET", "/v1/users/bob/status", nil, nil)
	admin := in.as(t, token(t, "ops", "presence_admin"))
	for range 10 {
		admin.must("GET", "/v1/scopes/room/r/count", nil, nil)
	}
	for range 2 {
		s := openSSE(t, in.url, "/v1/events?snapshot=0", tok, nil)
		s.next(t, server.EventReady, within)
		s.res.Body.Close()
	}
	if code, h, b := openStatus(t, in.url+"/v1/events", tok); code != http.StatusTooManyRequests || errCode(b) != server.CodeRateLimited || h.Get("Retry-After") == "" {
		t.Fatalf("third stream open: %d %s", code, b)
	}

	// Without a valid token: a budget per client address (the probes,
	// which startServer polls, are exempt).
	if code, _, _ := get(t, in.url+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d", code)
	}
	first := 0
	for i := 1; i <= 10 && first == 0; i++ {
		if res, _ := send(t, "GET", in.url+"/v1/info", "", nil); res.StatusCode == http.StatusTooManyRequests {
			first = i
		}
	}
	if first != 6 {
		t.Fatalf("the first tokenless request refused was number %d; the budget is 5", first)
	}
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer not-a-token"}} {
		res, b := send(t, "GET", in.url+"/v1/users/alice/status", "", hdr)
		if res.StatusCode != http.StatusTooManyRequests || errCode(b) != server.CodeRateLimited || res.Header.Get("Retry-After") == "" {
			t.Fatalf("a request without a valid token once the budget is spent (%v): %d %s", hdr, res.StatusCode, b)
		}
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, _, _ := get(t, in.url+probe); code != 200 {
			t.Fatalf("%s is not limited: %d", probe, code)
		}
	}
	in.as(t, token(t, "carol")).must("GET", "/v1/users/carol/status", nil, nil) // a valid token is not
}

// TestManualTTLOverflow: the largest int64 is refused, naming ttl_ms.
func TestManualTTLOverflow(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	code, e := in.as(t, token(t, "alice")).do("PUT", "/v1/users/alice/manual", `{"status":"DND","ttl_ms":9223372036854775807}`, nil)
	if code != http.StatusBadRequest || e.Field != "ttl_ms" || strings.Contains(e.Message, "-1ms") {
		t.Fatalf("got %d %+v; want a 400 naming ttl_ms", code, e)
	}
}

// lockedBuffer collects log lines from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRedisOutage: while Redis is down, answers are 503 with Retry-After,
// and the failures are logged once an interval with their count.
func TestRedisOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs lockedBuffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.FailureLogEvery = 500 * time.Millisecond
	in := startServer(t, newStore(t, mr.Addr()), cfg)
	mr.Close()
	const n = 60
	start := time.Now()
	for i := range n {
		tok := token(t, "user"+strconv.Itoa(i))
		res, b := send(t, "POST", in.url+"/v1/heartbeat", `{"device":"d"}`, map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || errCode(b) != server.CodeUnavailable {
			t.Fatalf("heartbeat without Redis: %d %v %s", res.StatusCode, res.Header, b)
		}
	}
	elapsed := time.Since(start)
	re := regexp.MustCompile(`msg="presence: requests? failed".*`)
	countRe := regexp.MustCompile(`count=(\d+)`)
	total, lines := 0, 0
	waitFor(t, 10*time.Second, "every failure to be counted in the log", func() bool {
		total, lines = 0, 0
		for _, l := range re.FindAllString(logs.String(), -1) {
			if !strings.Contains(l, "route=\"POST /v1/heartbeat\"") {
				continue
			}
			lines++
			if m := countRe.FindStringSubmatch(l); m != nil {
				k, _ := strconv.Atoi(m[1])
				total += k
			} else {
				total++
			}
		}
		return total >= n
	})
	if total != n || lines > int(elapsed/cfg.FailureLogEvery)+3 {
		t.Fatalf("%d failures over %v logged as %d lines counting %d; want one line an interval", n, elapsed, lines, total)
	}
	if strings.Contains(logs.String(), "level=WARN msg=http") {
		t.Fatal("the access log warns once per failed request")
	}
	// The sweeper fails every pass (users every 100 ms here): its lines
	// are throttled to one an interval too.
	sweeps := strings.Count(logs.String(), `msg="presence: sweep failed"`)
	if sweeps > int(time.Since(start)/cfg.FailureLogEvery)+3 {
		t.Fatalf("%d sweep failure lines over %v", sweeps, time.Since(start))
	}
	t.Logf("sweep failures: %d lines", sweeps)
	t.Logf("%d failures over %v: %d log lines", n, elapsed.Round(time.Millisecond), lines)
}

// TestDashboardSince: the dashboard's users table shows when each user
// entered its status, not when the table was last re-read.
func TestDashboardSince(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	at := map[string]int64{}
	for _, u := range []string{"alice", "bob"} {
		var hb server.HeartbeatResponse
		in.as(t, token(t, u)).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, &hb)
		if len(hb.Changes) != 1 {
			t.Fatalf("%s: %+v", u, hb)
		}
		at[u] = hb.Changes[0].At
		time.Sleep(50 * time.Millisecond)
	}
	admin := in.as(t, token(t, "ops", "presence_admin"))
	var ov server.OverviewResponse
	waitFor(t, 10*time.Second, "two reconciles after the changes", func() bool {
		admin.must("GET", "/v1/admin/overview", nil, &ov)
		return ov.Users.ReconciledAt > at["bob"]+500
	})
	got := map[string]int64{}
	for _, r := range ov.Users.Recent {
		got[r.User] = r.At
	}
	if got["alice"] != at["alice"] || got["bob"] != at["bob"] {
		t.Fatalf("since: %v; want each user's change instant %v (reconciled at %d)", got, at, ov.Users.ReconciledAt)
	}
}

// TestAdminSurface: /metrics and the admin endpoints need an admin token,
// or the admin listener; /v1/info shows the Redis to admins only.
func TestAdminSurface(t *testing.T) {
	cfg := testConfig()
	cfg.Backend = "redis at 10.0.0.7:6379"
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	for tok, want := range map[string]int{"": 401, token(t, "alice"): 403, token(t, "alice", "presence_read"): 403, token(t, "ops", "presence_admin"): 200} {
		hdr := map[string]string{}
		if tok != "" {
			hdr["Authorization"] = "Bearer " + tok
		}
		if res, b := send(t, "GET", in.url+"/metrics", "", hdr); res.StatusCode != want {
			t.Errorf("/metrics with %v: %d %.100s; want %d", hdr, res.StatusCode, b, want)
		}
	}
	var info server.InfoResponse
	in.as(t, "").must("GET", "/v1/info", nil, &info)
	if info.Backend != "" || info.Auth != "jwt" {
		t.Errorf("info without a token: %+v", info)
	}
	in.as(t, token(t, "alice")).must("GET", "/v1/info", nil, &info)
	if info.Backend != "" {
		t.Errorf("info for a user shows %q", info.Backend)
	}
	in.as(t, token(t, "ops", "presence_admin")).must("GET", "/v1/info", nil, &info)
	if info.Backend != cfg.Backend {
		t.Errorf("info for an admin: backend %q", info.Backend)
	}

	adm := httptest.NewServer(in.srv.AdminHandler())
	defer adm.Close()
	for _, path := range []string{"/metrics", "/v1/admin/overview", "/v1/admin/sweeper", "/healthz", "/readyz"} {
		if code, _, _ := get(t, adm.URL+path); code != 200 {
			t.Errorf("admin listener %s: %d", path, code)
		}
	}
	if code, _, _ := get(t, adm.URL+"/v1/heartbeat"); code != 404 {
		t.Errorf("the admin listener serves the API: %d", code)
	}
}

// TestTrustedProxies: X-Forwarded-For names the client only when the peer
// is a trusted proxy; each client then has its own per-address budget.
func TestTrustedProxies(t *testing.T) {
	budgetOf := func(t *testing.T, in *instance, xff string) int {
		n := 0
		for range 20 {
			res, _ := send(t, "GET", in.url+"/v1/info", "", map[string]string{"X-Forwarded-For": xff})
			if res.StatusCode == http.StatusTooManyRequests {
				break
			}
			n++
		}
		return n
	}
	cfg := testConfig()
	cfg.IPRate, cfg.IPBurst = 0.001, 10
	cfg.TrustedProxies = []string{"127.0.0.0/8"}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	if a, b := budgetOf(t, in, "198.51.100.1"), budgetOf(t, in, "203.0.113.9, 198.51.100.2"); a != 10 || b != 10 {
		t.Fatalf("behind a trusted proxy, two clients had %d and %d requests; want 10 each", a, b)
	}
	if n := budgetOf(t, in, "198.51.100.2, 127.0.0.1"); n != 0 {
		t.Fatalf("the rightmost untrusted hop is the client, whose budget is spent; got %d more", n)
	}

	cfg = testConfig()
	cfg.IPRate, cfg.IPBurst = 0.001, 10
	in = startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	if a, b := budgetOf(t, in, "198.51.100.1"), budgetOf(t, in, "198.51.100.2"); a+b > 10 {
		t.Fatalf("X-Forwarded-For believed from an untrusted peer: %d + %d requests", a, b)
	}
	if _, err := server.New(newStore(t, miniredis.RunT(t).Addr()), server.Config{Auth: server.AuthConfig{InsecureDev: true},
		TrustedProxies: []string{"10.0.0.0/33"}}); err == nil {
		t.Error("New accepted a malformed trusted proxy")
	}
}

// TestRefusalKeepsOrClosesConnection: an error answered after the body
// was read keeps the connection for the next request; a refusal before
// the body was read closes it (rather than wait for a body held back).
func TestRefusalKeepsOrClosesConnection(t *testing.T) {
	in := startServe(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer c.CloseIdleConnections()
	reused := func(tok, body string) (int, bool) {
		t.Helper()
		var got bool
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { got = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", in.url+"/v1/heartbeat", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, got
	}
	tok := token(t, "alice")
	reused(tok, `{"device":"d"}`)
	if code, r := reused(tok, `{"device":""}`); code != 400 || !r {
		t.Fatalf("a 400 after reading the body: %d, reused %v", code, r)
	}
	if code, r := reused(tok, `{"device":"d"}`); code != 200 || !r {
		t.Fatalf("the request after a 400: %d, reused %v; want the connection kept", code, r)
	}
	if code, _ := reused("", `{"device":"d"}`); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, r := reused(tok, `{"device":"d"}`); code != 200 || r {
		t.Fatalf("the request after a refusal with an unread body: %d, reused %v; want a new connection", code, r)
	}
}

// TestClassClaims: a class restricted by a claim is touched, left,
// counted and listed only with that claim (or as an admin).
func TestClassClaims(t *testing.T) {
	cfg := testConfig()
	cfg.ClassClaims = map[string]string{"video": "presence_video"}
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
	plain := in.as(t, token(t, "alice", "presence_read"))
	member := in.as(t, token(t, "bob", "presence_video", "presence_read"))
	for _, rq := range []struct{ method, path string }{
		{"POST", "/v1/scopes/video/v1/touch"}, {"POST", "/v1/scopes/video/v1/leave"},
		{"GET", "/v1/scopes/video/v1/count"}, {"GET", "/v1/scopes/video/v1/members"},
	} {
		if code, e := plain.do(rq.method, rq.path, nil, nil); code != http.StatusForbidden {
			t.Errorf("%s %s without the claim: %d %+v", rq.method, rq.path, code, e)
		}
		member.must(rq.method, rq.path, nil, nil)
	}
	plain.must("POST", "/v1/scopes/room/r/touch", nil, nil) // other classes stay open
	in.as(t, token(t, "ops", "presence_admin")).must("GET", "/v1/scopes/video/v1/count", nil, nil)
	for _, bad := range []server.Config{{ClassClaims: map[string]string{"nosuch": "x"}}, {DeviceClasses: []string{"nosuch"}}} {
		bad.Auth = server.AuthConfig{InsecureDev: true}
		if _, err := server.New(newStore(t, miniredis.RunT(t).Addr()), bad); err == nil {
			t.Errorf("New accepted an unknown class: %+v", bad)
		}
	}
}
