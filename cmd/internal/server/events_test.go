package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"

	"github.com/presencekit/presence/cmd/internal/server"
)

const within = 5 * time.Second

// TestEventsResume checks the SSE stream: a snapshot, live changes of the
// asked user only, and after a reconnect with Last-Event-ID the changes
// missed meanwhile, in order, read from the change log.
func TestEventsResume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		in := startServer(t, newStore(t, addr), testConfig())
		tok := token(t, "alice")
		alice := in.as(t, tok)
		bob := in.as(t, token(t, "bob"))

		s := openSSE(t, in.url, "/v1/events", tok, nil)
		if st := decode[server.UserStatus](t, s.next(t, server.EventStatus, within)); st.User != "alice" || st.Status != "OFFLINE" {
			t.Fatalf("snapshot: %+v", st)
		}
		s.next(t, server.EventReady, within)
		bob.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
		alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
		ev := s.next(t, server.EventChange, within)
		if c := decode[server.Change](t, ev); c.User != "alice" || c.To != "ONLINE" || ev.ID == "" {
			t.Fatalf("first change: %+v %+v", ev, c)
		}

		// Missed while disconnected: alice goes offline and back, bob too.
		s.res.Body.Close()
		alice.must("POST", "/v1/logout", server.LogoutRequest{Device: "d"}, nil)
		bob.must("POST", "/v1/logout", server.LogoutRequest{Device: "d"}, nil)
		alice.must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)

		s2 := openSSE(t, in.url, "/v1/events", tok, http.Header{"Last-Event-ID": {ev.ID}})
		var got []string
		var last string
		for range 2 {
			e := s2.next(t, server.EventChange, within)
			c := decode[server.Change](t, e)
			got = append(got, c.User+":"+c.From+"→"+c.To)
			if !(last < e.ID || len(last) < len(e.ID)) {
				t.Fatalf("IDs out of order: %q then %q", last, e.ID)
			}
			last = e.ID
		}
		if want := "alice:ONLINE→OFFLINE alice:OFFLINE→ONLINE"; strings.Join(got, " ") != want {
			t.Fatalf("caught up %v; want %s", got, want)
		}
		ready := decode[map[string]string](t, s2.next(t, server.EventReady, within))
		if ready["last_event_id"] != last {
			t.Fatalf("ready after %q; want %q", ready["last_event_id"], last)
		}
		// Live again, without duplicates.
		alice.must("PUT", "/v1/users/alice/manual", server.ManualRequest{Status: "DND"}, nil)
		e := s2.next(t, server.EventChange, within)
		if c := decode[server.Change](t, e); c.To != "DND" || e.ID == last {
			t.Fatalf("live change after catch-up: %+v", c)
		}
	})
}

// TestEventsGap checks that a client whose last event was trimmed from the
// log is told so, and gets the statuses again.
func TestEventsGap(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	tok := token(t, "alice")
	in.as(t, tok).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	s := openSSE(t, in.url, "/v1/events?last_event_id=1-0", tok, nil)
	s.next(t, server.EventReset, within)
	if st := decode[server.UserStatus](t, s.next(t, server.EventStatus, within)); st.Status != "ONLINE" {
		t.Fatalf("status after the reset: %+v", st)
	}
	s.next(t, server.EventReady, within)
}

// TestWebSocket checks the same events over a WebSocket.
func TestWebSocket(t *testing.T) {
	in := startServer(t, newStore(t, miniredis.RunT(t).Addr()), testConfig())
	tok := token(t, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(in.url, "http") + "/v1/ws?user=alice&snapshot=0"
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	read := func(kind string) server.WSMessage {
		t.Helper()
		for {
			_, raw, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("waiting for %s: %v", kind, err)
			}
			var m server.WSMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if m.Type == kind {
				return m
			}
		}
	}
	read(server.EventReady)
	in.as(t, tok).must("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "d"}, nil)
	m := read(server.EventChange)
	var ch server.Change
	if err := json.Unmarshal(m.Data, &ch); err != nil || m.ID == "" || ch.To != "ONLINE" {
		t.Fatalf("change message %+v: %v", m, err)
	}
	// Without a token, the upgrade is refused with a JSON 401.
	_, res, err := websocket.Dial(ctx, wsURL, nil)
	if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial without a token: %v %v", res, err)
	}
	// Draining says goodbye and closes with "going away".
	drained := make(chan error, 1)
	go func() { drained <- in.srv.Drain(ctx) }()
	if bye := read(server.EventBye); !strings.Contains(string(bye.Data), "shutdown") {
		t.Fatalf("bye: %s", bye.Data)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("after bye: %v", err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}

// TestKickAcrossInstances is the end-to-end test of two service instances
// on one Redis: a kick issued through one reaches an event stream opened
// on the other, and so do the status changes.
func TestKickAcrossInstances(t *testing.T) {
	forEachBackend(t, func(t *testing.T, addr string) {
		cfg := testConfig()
		a := startServer(t, newStore(t, addr), cfg)
		cfg.SweepUsers, cfg.SweepScopes = -1, -1 // one sweeper is enough
		b := startServer(t, newStore(t, addr), cfg)
		admin := token(t, "gateway-1", "presence_admin")
		kicks := openSSE(t, b.url, "/v1/events?gateway=gw-1&user=alice&snapshot=0", admin, nil)
		kicks.next(t, server.EventReady, within)

		alice := a.as(t, token(t, "alice"))
		alice.must("POST", "/v1/login", server.LoginRequest{Device: "laptop", Kind: "web", Gateway: "gw-1"}, nil)
		if c := decode[server.Change](t, kicks.next(t, server.EventChange, within)); c.User != "alice" || c.To != "ONLINE" {
			t.Fatalf("change seen on the other instance: %+v", c)
		}
		var res server.LoginResponse
		alice.must("POST", "/v1/login", server.LoginRequest{Device: "phone", Kind: "ios", Gateway: "gw-2", Policy: "exclusive"}, &res)
		if len(res.Kicked) != 1 {
			t.Fatalf("login kicked %+v", res.Kicked)
		}
		k := decode[server.Kick](t, kicks.next(t, server.EventKick, within))
		if k.User != "alice" || k.Device != "laptop" || k.Gateway != "gw-1" || k.Kind != "web" {
			t.Fatalf("kick: %+v", k)
		}
	})
}

// TestGracefulShutdown checks that Serve drains open streams (each gets a
// "bye" event) and returns once they are gone.
func TestGracefulShutdown(t *testing.T) {
	srv, err := server.New(newStore(t, miniredis.RunT(t).Addr()), testConfig())
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
	base := "http://" + ln.Addr().String()
	tok := token(t, "alice")
	s := openSSE(t, base, "/v1/events", tok, nil)
	s.next(t, server.EventReady, within)
	cancel()
	if bye := decode[map[string]string](t, s.next(t, server.EventBye, within)); bye["reason"] != "shutdown" {
		t.Fatalf("bye: %+v", bye)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(within):
		t.Fatal("Serve did not return")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still answering after shutdown")
	}
}
