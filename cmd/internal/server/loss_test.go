package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/presencekit/presence/cmd/internal/server"
	"github.com/presencekit/presence/internal/redistest"
)

// TestRedisLossKeepsManualStatuses is the scripted run of a Redis that
// restarts empty under a running service (docs/design.md §11), as a chat
// product's clients meet it: 20 users beat, 5 of them set DND (2 for an
// hour); Redis is killed and restarted without its data; every client's
// next beat tells it to set its manual status again, which it does with
// what is left of its expiry. All 5 DND come back, the event stream gets
// one loss event and no change at all until the loss has healed, and a
// body with invalid UTF-8 is still refused with 400.
func TestRedisLossKeepsManualStatuses(t *testing.T) {
	srv := redistest.Server(t)
	cfg := testConfig()
	// short intervals, so that the healing (2 × the longest) ends within the test
	cfg.Engine.Intervals = everyInterval(time.Second)
	in := startServer(t, newStore(t, srv.Addr), cfg)
	const users, dnd = 20, 5
	type user struct {
		c     client
		token string
		until time.Time // DND's expiry, zero: until cleared
	}
	us := make([]user, users)
	beat := func(i int) server.HeartbeatResponse {
		var ack server.HeartbeatResponse
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, e := us[i].c.do("POST", "/v1/heartbeat", server.HeartbeatRequest{Device: "web", Kind: "web", Token: us[i].token}, &ack)
			if e == nil {
				return ack
			}
			if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("u%d's beat: %d %s", i, code, e.Message)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i := range us {
		us[i].c = in.as(t, token(t, fmt.Sprintf("u%d", i)))
		us[i].token = beat(i).Token
	}
	for i := range dnd {
		req := server.ManualRequest{Status: "DND"}
		if i < 2 {
			req.TTLMillis = time.Hour.Milliseconds()
			us[i].until = time.Now().Add(time.Hour)
		}
		us[i].c.must("PUT", fmt.Sprintf("/v1/users/u%d/manual", i), req, nil)
	}
	reader := in.as(t, token(t, "svc", "presence_read"))
	stream := openSSE(t, in.url, "/v1/events?all=1", reader.token, nil)
	stream.next(t, "ready", 5*time.Second)

	srv.Restart()
	restarted := time.Now().UnixMilli() // no script ran since it was killed
	reasserted := 0
	for i := range us {
		ack := beat(i)
		if !ack.Reassert || len(ack.Changes) > 0 {
			t.Fatalf("u%d's first beat after the restart: %+v; want reassert and no change", i, ack)
		}
		if i < dnd {
			req := server.ManualRequest{Status: "DND"}
			if !us[i].until.IsZero() {
				req.TTLMillis = time.Until(us[i].until).Milliseconds()
			}
			us[i].c.must("PUT", fmt.Sprintf("/v1/users/u%d/manual", i), req, nil)
			reasserted++
		}
	}
	kept := 0
	for i := range dnd {
		var st server.UserStatus
		reader.must("GET", fmt.Sprintf("/v1/users/u%d/status", i), nil, &st)
		if st.Status == "DND" {
			kept++
		}
	}
	if kept != dnd {
		t.Fatalf("%d of %d DND kept across the restart", kept, dnd)
	}
	code, e := us[0].c.do("POST", "/v1/heartbeat", "{\"device\":\"bad\xff\",\"kind\":\"web\"}", nil)
	if code != http.StatusBadRequest || e == nil {
		t.Fatalf("a body with invalid UTF-8: %d %v; want 400", code, e)
	}

	// Once healed, a real change is published, and it is the first change
	// the stream sends: nothing came of the restart but the one loss.
	for range 10 { // past the healing (2 s), the devices kept live
		time.Sleep(250 * time.Millisecond)
		for i := range us {
			beat(i)
		}
	}
	us[users-1].c.must("POST", "/v1/logout", server.LogoutRequest{Device: "web", Token: us[users-1].token}, nil)
	losses := 0
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-stream.events:
			if !ok {
				t.Fatal("the stream closed")
			}
			switch ev.Kind {
			case "loss":
				losses++
			case "change":
				c := decode[server.Change](t, ev)
				if c.At < restarted {
					continue // from before: the hub may read the log after the stream opened
				}
				if c.User != fmt.Sprintf("u%d", users-1) || c.To != "OFFLINE" || losses != 1 {
					t.Fatalf("change %+v after %d loss events; want only u%d's logout, after one loss", c, losses, users-1)
				}
				t.Logf("%d of %d DND kept, %d re-asserted, 1 loss event, 0 changes for unchanged users", kept, dnd, reasserted)
				return
			case "reset":
				t.Fatalf("a reset event (%s): the loss should be the only event", ev.Data)
			}
		case <-deadline.C:
			t.Fatalf("no change after the healing (%d loss events)", losses)
		}
	}
}
