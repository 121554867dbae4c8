package core_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
)

// TestMessageBytes pins the JSON the engine publishes and logs: other
// processes read it.
func TestMessageBytes(t *testing.T) {
	at := time.UnixMilli(1772366400123)
	for _, c := range []struct{ got, want string }{
		{string(core.MarshalChange(core.Change{User: "a<b", From: core.StatusOffline, To: core.StatusOnline, At: at})),
			`{"user":"a\u003cb","from":"OFFLINE","to":"ONLINE","at":1772366400123}`},
		{string(core.MarshalKick(core.Kick{User: "a", Device: "d", Kind: core.KindIOS, Gateway: "gw", At: at})),
			`{"user":"a","device":"d","kind":"ios","gateway":"gw","at":1772366400123}`},
		{string(core.MarshalKick(core.Kick{User: "a", Device: "d", Kind: core.KindWeb, At: at})),
			`{"user":"a","device":"d","kind":"web","at":1772366400123}`},
	} {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
	k, err := core.UnmarshalKick([]byte(`{"user":"a","device":"d","kind":"web","gateway":"","at":1}`))
	if err != nil || k.Gateway != "" || k.Kind != core.KindWeb {
		t.Errorf("a logged kick with an empty gateway: %+v, %v", k, err)
	}
}

// TestMessagesCarryEveryField fails when Change or Kick gains a field that
// its published message does not carry: add it to changeMessage or
// kickMessage, marshalChange or marshalKick, and the decoder (and to
// cmd/internal/server's Change or Kick, which TestWireIsThePublishedJSON
// holds to them).
func TestMessagesCarryEveryField(t *testing.T) {
	at := time.UnixMilli(1772366400123)
	c := core.Change{User: "u", From: core.StatusAway, To: core.StatusDND, At: at}
	k := core.Kick{User: "u", Device: "d", Kind: core.KindAndroid, Gateway: "g", At: at}
	for _, v := range []any{c, k} {
		rv := reflect.ValueOf(v)
		for i := 0; i < rv.NumField(); i++ {
			if rv.Field(i).IsZero() {
				t.Fatalf("%T.%s: give it a value in this test", v, rv.Type().Field(i).Name)
			}
		}
	}
	if got, err := core.UnmarshalChange(core.MarshalChange(c)); err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("change: got %+v, %v; want %+v", got, err, c)
	}
	if got, err := core.UnmarshalKick(core.MarshalKick(k)); err != nil || !reflect.DeepEqual(got, k) {
		t.Errorf("kick: got %+v, %v; want %+v", got, err, k)
	}
}
