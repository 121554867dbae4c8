package server

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/adapters/goredis"
	"github.com/presencekit/presence/core"
)

// TestWireIsThePublishedJSON holds the API's Change and Kick to the JSON
// the engine publishes for them (docs/design.md §7), which core writes by
// hand: each published message decodes into the wire type with no field
// left over and encodes back to the same bytes, and wireChange and
// wireKick give the same value from the engine's outcome.
func TestWireIsThePublishedJSON(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	store := goredis.New(c)
	eng, err := core.New(store, core.Config{Prefix: "wire", CoalesceWindow: -1, Policy: core.PolicyExclusive})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, stop, err := store.Subscribe(ctx, eng.ChangeChannel(), eng.KickChannel("gw<1>"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	const user = `a<b>&"q"\é` // characters encoding/json escapes, or writes as is
	first, err := eng.Login(ctx, core.Login{User: user, Device: "web", Kind: core.KindWeb, Gateway: "gw<1>"})
	if err != nil || len(first.Changes) != 1 {
		t.Fatalf("first login: %+v, %v; want one change", first, err)
	}
	second, err := eng.Login(ctx, core.Login{User: user, Device: "phone", Kind: core.KindIOS})
	if err != nil || len(second.Kicked) != 1 {
		t.Fatalf("second login: %+v, %v; want the web device kicked", second, err)
	}

	for _, want := range []string{"change", "kick"} {
		var m core.Message
		select {
		case m = <-msgs:
		case <-ctx.Done():
			t.Fatalf("no %s message: %v", want, ctx.Err())
		}
		dec := json.NewDecoder(bytes.NewReader(m.Payload))
		dec.DisallowUnknownFields()
		var got, from any
		var id string
		switch want {
		case "change":
			var w Change
			err = dec.Decode(&w)
			got, from, id = w, wireChange(first.Changes[0], w.ID), w.ID
		case "kick":
			var w Kick
			err = dec.Decode(&w)
			got, from, id = w, wireKick(second.Kicked[0], w.ID), w.ID
		}
		if err != nil {
			t.Fatalf("%s message %s: %v", want, m.Payload, err)
		}
		back, err := json.Marshal(got)
		if err != nil || !bytes.Equal(back, m.Payload) {
			t.Errorf("%s: published %s, the wire type writes %s (%v)", want, m.Payload, back, err)
		}
		if got != from {
			t.Errorf("%s: published %+v, from the outcome %+v", want, got, from)
		}
		if id == "" {
			t.Errorf("%s: published %s without an outbox ID", want, m.Payload)
		}
	}
}
