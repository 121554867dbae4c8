package guest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

// nativeHost is a Host in plain Go: it runs script requests on a store,
// as wasm/host does for a module.
type nativeHost struct {
	store     core.Store
	published []string
	panics    bool
}

func (h *nativeHost) Eval(ctx context.Context, req []byte) []byte {
	if h.panics {
		panic("host exploded")
	}
	calls, err := abi.DecodeScriptRequest(req)
	if err != nil {
		return abi.EncodeScriptFailure(err)
	}
	return abi.EncodeScriptResponse(h.store.Eval(ctx, calls))
}

func (h *nativeHost) Publish(ctx context.Context, channel string, msg []byte) error {
	h.published = append(h.published, channel+" "+string(msg))
	return nil
}

func newGuest(t *testing.T) (*guest.Guest, *nativeHost) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	h := &nativeHost{store: goredis.New(c)}
	return guest.New(h), h
}

func call(t *testing.T, g *guest.Guest, op string, now int64, args any) abi.Response {
	t.Helper()
	req, err := abi.EncodeRequest(abi.Request{Op: op, Now: now, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := abi.DecodeResponse(op, g.Handle(context.Background(), req))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestGuestLifecycle(t *testing.T) {
	g, h := newGuest(t)
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).UnixMilli()
	hb := abi.FromHeartbeat(core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Active: true})
	if resp := call(t, g, abi.OpHeartbeat, now, &hb); resp.Error == nil || resp.Error.Code != abi.CodeUnconfigured {
		t.Fatalf("before configure: %+v", resp)
	}
	seed := "s"
	cfg := abi.Config{Seed: &seed, Publish: true, CoalesceWindow: abi.Duration(-1)}
	if resp := call(t, g, abi.OpConfigure, 0, &cfg); resp.Error != nil {
		t.Fatal(resp.Error.Err())
	}
	resp := call(t, g, abi.OpHeartbeat, now, &hb)
	if resp.Error != nil {
		t.Fatal(resp.Error.Err())
	}
	ack := resp.Result.(*abi.Ack).Core()
	if ack.Token == "" || len(ack.Changes) != 1 || ack.Changes[0].To != core.StatusOnline {
		t.Fatalf("ack %+v", ack)
	}
	if len(h.published) != 1 || !strings.Contains(h.published[0], `"to":"ONLINE"`) {
		t.Fatalf("published %q", h.published)
	}
	// A refused heartbeat is a result carrying the error.
	stale := abi.FromHeartbeat(core.Heartbeat{User: "alice", Device: "web", Kind: core.KindWeb, Token: "feedfacefeedface"})
	resp = call(t, g, abi.OpHeartbeat, now+1000, &stale)
	if resp.Error != nil || !errors.Is(resp.Result.(*abi.Ack).Core().Err, core.ErrSessionReplaced) {
		t.Fatalf("stale token: %+v", resp)
	}
	// Invalid input is the core's *InputError, field and all.
	resp = call(t, g, abi.OpStatus, now, &abi.StatusArgs{User: ""})
	var ie *core.InputError
	if resp.Error == nil || !errors.As(resp.Error.Err(), &ie) || ie.Field != "users[0]" {
		t.Fatalf("empty user: %+v", resp.Error)
	}
	// Without now, on the host clock: malformed.
	if resp := call(t, g, abi.OpStatus, 0, &abi.StatusArgs{User: "alice"}); resp.Error == nil || resp.Error.Code != abi.CodeMalformed {
		t.Fatalf("no now: %+v", resp)
	}
	// A failing host fails the call, not the guest.
	h.panics = true
	if resp := call(t, g, abi.OpStatus, now, &abi.StatusArgs{User: "alice"}); resp.Error == nil || resp.Error.Code != abi.CodeInternal {
		t.Fatalf("host panic: %+v", resp)
	}
	h.panics = false
	resp = call(t, g, abi.OpStatus, now+2000, &abi.StatusArgs{User: "alice"})
	if resp.Error != nil || resp.Result.(*abi.UserStatus).Status != abi.Status(core.StatusOnline) {
		t.Fatalf("after recovery: %+v", resp)
	}
}

func TestGuestRefusesGarbage(t *testing.T) {
	g, _ := newGuest(t)
	for _, in := range []string{"", "{", `{"v":1,"op":"nope"}`, `{"v":9}`, "\x00\x01"} {
		resp, err := abi.DecodeResponse(abi.OpStatus, g.Handle(context.Background(), []byte(in)))
		if err != nil || resp.Error == nil {
			t.Errorf("%q: %+v %v", in, resp, err)
		}
	}
}
