package abi_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

func msAt(ms int64) *int64 { return &ms }

// compactRequests are requests of every compact kind, with the corners
// of their fields: bytes that are not UTF-8, empty and absent metadata,
// an instant of 0, nested values, errors with causes; hb is one more beat.
func compactRequests(hb abi.Heartbeat) []abi.Request {
	return []abi.Request{
		{Op: abi.OpHeartbeat, Now: 1767225600000, Args: &hb},
		{Op: abi.OpHeartbeat, Now: 0, Args: &abi.Heartbeat{User: "u\xff", Device: "\x00d", Kind: 200}},
		{Op: abi.OpHeartbeatBatch, Now: 1, Args: &abi.HeartbeatBatch{Beats: []abi.Heartbeat{
			{User: "a", Device: "d", Kind: 1, Meta: map[string]string{}, At: msAt(0)},
			{User: "b", Device: "d", Kind: 2, Meta: map[string]string{"z": "1", "\xfe": "", "a": "\xff"}, At: msAt(-5), Active: true},
			{User: "c", Device: "d", Background: true, Token: "t", Gateway: "g"},
		}}},
		{Op: abi.OpHeartbeatBatch, Now: 1 << 62, Args: &abi.HeartbeatBatch{Beats: []abi.Heartbeat{}}},
		{Op: abi.OpResume, Now: 2, Args: &abi.Resume{Plan: 7, Results: abi.Results{
			{Value: core.Value{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueInt, Int: -1 << 63}, {Kind: core.ValueString, Str: "\xff\x00"}, {},
				{Kind: core.ValueArray}, {Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueInt, Int: 1<<63 - 1}}}}}},
			{Value: core.Value{Kind: core.ValueString, Str: ""}},
			{Err: core.ErrNoScript},
			{Err: &core.StoreError{Op: "x", Unavailable: true, Err: core.ErrUnavailable}},
			{Err: &core.InputError{Field: "f", Reason: "r\xff"}},
		}}},
		{Op: abi.OpResume, Now: 3, Args: &abi.Resume{Plan: 1, Results: abi.Results{}}},
	}
}

// compactResponses are responses of every compact kind, with their op.
func compactResponses(t *testing.T) map[string][]abi.Response {
	change := filled[abi.Change](t)
	cause := &abi.Error{Code: abi.CodeStore, Message: "m", Op: "o", Unavailable: true,
		Cause: &abi.Error{Code: abi.CodeUnavailable, Message: "\xff"}}
	ack := abi.Ack{Token: "t\xff", Error: &abi.Error{Code: abi.CodeInvalid, Message: "m", Field: "f", Reason: "r"},
		Changes: []abi.Change{change, {User: "u", From: 200, To: 0, At: -1}}}
	msgs := []abi.Message{filled[abi.Message](t), {Kind: "change", Channel: "presence:changes", Payload: `{"user":"u"}`}, {Kind: "kick", Channel: "\xff"}}
	calls := []core.Call{{SHA: "5b1f", Keys: []string{"k\xff"}, Args: []string{"", "\x00", "a"}}, {Source: "return 1", Keys: []string{}, Args: []string{}}}
	return map[string][]abi.Response{
		abi.OpHeartbeat: {
			{Result: &ack, Messages: msgs},
			{Result: &abi.Ack{Token: "t", Error: cause}},
			{Result: &abi.Ack{Changes: []abi.Change{}}},
			{Plan: 3, Calls: calls},
		},
		abi.OpHeartbeatBatch: {
			{Result: &abi.Acks{Acks: []abi.Ack{ack, {Token: "x"}}}, Messages: msgs},
			{Result: &abi.Acks{Acks: []abi.Ack{}}},
			{Plan: 1 << 40, Calls: calls[:1]},
		},
		abi.OpLogin: {{Plan: 9, Calls: calls[1:]}},
	}
}

// TestCompactRoundTrip: every message of the compact form decodes to what
// its JSON decodes to, by DecodeRequest and by a Decoder reused for each.
func TestCompactRoundTrip(t *testing.T) {
	var dec abi.Decoder
	for i, req := range compactRequests(filled[abi.Heartbeat](t)) {
		compact, err := abi.EncodeRequestCompact(req)
		if err != nil || compact[0] != abi.Compact {
			t.Fatalf("request %d: %q %v", i, compact, err)
		}
		js, err := abi.EncodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := abi.DecodeRequest(compact)
		if err != nil {
			t.Fatalf("request %d: %q: %v", i, compact, err)
		}
		want, err := abi.DecodeRequest(js)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("request %d:\ncompact %+v\nJSON    %+v", i, got, want)
		}
		reused, err := dec.Decode(compact)
		if err != nil || !reflect.DeepEqual(reused, want) {
			t.Errorf("request %d, a Decoder's:\ncompact %+v %v\nJSON    %+v", i, reused, err, want)
		}
	}
	for op, resps := range compactResponses(t) {
		for i, resp := range resps {
			compact := abi.AppendResponseCompact(nil, resp)
			if compact[0] != abi.Compact {
				t.Fatalf("%s %d: %q", op, i, compact)
			}
			got, err := abi.DecodeResponse(op, compact)
			if err != nil {
				t.Fatalf("%s %d: %q: %v", op, i, compact, err)
			}
			want, err := abi.DecodeResponse(op, abi.EncodeResponse(resp))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %d:\ncompact %+v\nJSON    %+v", op, i, got, want)
			}
		}
	}
}

// TestCompactFallsBackToJSON: what has no compact form travels as JSON.
func TestCompactFallsBackToJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func() ([]byte, error)
	}{
		{"login request", func() ([]byte, error) {
			return abi.EncodeRequestCompact(abi.Request{Op: abi.OpLogin, Now: 1, Args: &abi.Login{User: "u", Device: "d"}})
		}},
		{"error response", func() ([]byte, error) {
			return abi.AppendResponseCompact(nil, abi.Response{Error: abi.EncodeError(core.ErrNoSession)}), nil
		}},
		{"status result", func() ([]byte, error) {
			return abi.AppendResponseCompact(nil, abi.Response{Result: &abi.UserStatus{User: "u"}}), nil
		}},
	} {
		b, err := tc.b()
		if err != nil || len(b) == 0 || b[0] != '{' {
			t.Errorf("%s: %q %v", tc.name, b, err)
		}
	}
	if _, err := abi.EncodeRequestCompact(abi.Request{Op: abi.OpHeartbeat, Args: &abi.Login{}}); !errors.Is(err, abi.ErrMalformed) {
		t.Errorf("heartbeat with a login's argument: %v", err)
	}
}

// TestCompactRejects: the compact decoders are as strict as the JSON ones,
// and say where.
func TestCompactRejects(t *testing.T) {
	hb := func(mod func(b []byte) []byte) []byte {
		b, _ := abi.EncodeRequestCompact(abi.Request{Op: abi.OpHeartbeat, Now: 5, Args: &abi.Heartbeat{User: "u", Device: "d", Kind: 1}})
		return mod(b)
	}
	// header: B2 02 'h', now 0a, "u" 01 75, "d" 01 64, kind 01, "" 00, "" 00, flags 00
	for _, tc := range []struct {
		name, field string
		b           []byte
		err         error
	}{
		{"trailing byte", "", hb(func(b []byte) []byte { return append(b, 0) }), abi.ErrMalformed},
		{"another version", "", hb(func(b []byte) []byte { b[1] = 3; return b }), abi.ErrVersion},
		{"unknown kind", "", hb(func(b []byte) []byte { b[2] = 'z'; return b }), abi.ErrMalformed},
		{"unknown flag", "args", hb(func(b []byte) []byte { b[len(b)-1] = 0x10; return b }), abi.ErrMalformed},
		{"overlong varint", "now", hb(func(b []byte) []byte { return append(b[:3], append([]byte{0x8a, 0x00}, b[4:]...)...) }), abi.ErrMalformed},
		{"negative now", "now", hb(func(b []byte) []byte { b[3] = 1; return b }), abi.ErrMalformed},
		{"string past the end", "args", hb(func(b []byte) []byte { b[4] = 100; return b }), abi.ErrMalformed},
		{"meta out of order", "args.meta", hb(func(b []byte) []byte {
			b[len(b)-1] = 4
			return append(b, 2, 1, 'b', 0, 1, 'a', 0)
		}), abi.ErrMalformed},
		{"meta key repeated", "args.meta", hb(func(b []byte) []byte {
			b[len(b)-1] = 4
			return append(b, 2, 1, 'a', 0, 1, 'a', 0)
		}), abi.ErrMalformed},
		{"beat of a batch", "args.beats[1]", func() []byte {
			b, _ := abi.EncodeRequestCompact(abi.Request{Op: abi.OpHeartbeatBatch, Now: 5, Args: &abi.HeartbeatBatch{Beats: []abi.Heartbeat{{}, {}}}})
			b[len(b)-1] = 0x80
			return b
		}(), abi.ErrMalformed},
		{"value tag", "args.results[0]", []byte{abi.Compact, 2, 'r', 2, 2, 1, 0, 9}, abi.ErrMalformed},
		{"result tag", "args.results[0]", []byte{abi.Compact, 2, 'r', 2, 2, 1, 5}, abi.ErrMalformed},
		{"more results than bytes", "args.results", []byte{abi.Compact, 2, 'r', 2, 2, 100, 0}, abi.ErrMalformed},
		{"error without a code", "args.results[0]", []byte{abi.Compact, 2, 'r', 2, 2, 1, 1, 0, 0, 0, 0, 0, 0}, abi.ErrMalformed},
		{"empty", "", []byte{abi.Compact}, abi.ErrMalformed},
	} {
		_, err := abi.DecodeRequest(tc.b)
		var de *abi.DecodeError
		if !errors.Is(err, tc.err) || errors.As(err, &de) && de.Field != tc.field {
			t.Errorf("%s: %x: %v, want %v at %q", tc.name, tc.b, err, tc.err, tc.field)
		}
	}
	calls := abi.AppendResponseCompact(nil, abi.Response{Plan: 1, Calls: []core.Call{{SHA: "s"}}})
	ack := abi.AppendResponseCompact(nil, abi.Response{Result: &abi.Ack{}})
	for _, tc := range []struct {
		name, op string
		b        []byte
	}{
		{"an ack to a batch", abi.OpHeartbeatBatch, ack},
		{"an ack to a login", abi.OpLogin, ack},
		{"plan 0", abi.OpCount, []byte{abi.Compact, 2, 'c', 0, 1, 0, 1, 's', 0, 0}},
		{"no calls", abi.OpCount, []byte{abi.Compact, 2, 'c', 2, 0}},
		{"empty sha", abi.OpCount, []byte{abi.Compact, 2, 'c', 2, 1, 0, 0, 0, 0}},
		{"call tag", abi.OpCount, []byte{abi.Compact, 2, 'c', 2, 1, 2, 1, 's', 0, 0}},
		{"trailing byte", abi.OpCount, append(calls, 0)},
		{"ack flags", abi.OpHeartbeat, []byte{abi.Compact, 2, 'a', 0, 8, 0}},
	} {
		if _, err := abi.DecodeResponse(tc.op, tc.b); !errors.Is(err, abi.ErrMalformed) {
			t.Errorf("%s: %x: %v", tc.name, tc.b, err)
		}
	}
	// Every strict prefix of a valid message is refused, and nothing panics.
	var whole [][]byte
	for _, req := range compactRequests(filled[abi.Heartbeat](t)) {
		b, _ := abi.EncodeRequestCompact(req)
		whole = append(whole, b)
	}
	for _, b := range whole {
		for n := 0; n < len(b); n++ {
			if _, err := abi.DecodeRequest(b[:n]); err == nil {
				t.Errorf("accepted %x, a prefix of %x", b[:n], b)
			}
		}
	}
	for op, resps := range compactResponses(t) {
		for _, resp := range resps {
			b := abi.AppendResponseCompact(nil, resp)
			for n := 1; n < len(b); n++ {
				if _, err := abi.DecodeResponse(op, b[:n]); err == nil {
					t.Errorf("%s: accepted %x, a prefix of %x", op, b[:n], b)
				}
			}
		}
	}
}

// FuzzDecodeCompact: the compact decoders never panic, and what they
// accept encodes back to a message that decodes.
func FuzzDecodeCompact(f *testing.F) {
	for _, req := range compactRequests(abi.Heartbeat{User: "u", Meta: map[string]string{"k": "v"}, At: msAt(1)}) {
		b, _ := abi.EncodeRequestCompact(req)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != abi.Compact {
			return
		}
		req, err := abi.DecodeRequest(b)
		if err != nil {
			return
		}
		again, err := abi.EncodeRequestCompact(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := abi.DecodeRequest(again); err != nil {
			t.Fatalf("%x re-encoded as %x: %v", b, again, err)
		}
	})
}

// TestCompactKnowsEveryField fails when a type of the compact form gains a
// field: teach compact.go to carry it (and ABI.md), then this test.
func TestCompactKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		v      any
		fields int
	}{
		{abi.Heartbeat{}, 9},
		{abi.Ack{}, 4},
		{abi.Change{}, 4},
		{abi.Error{}, 7},
		{abi.Message{}, 4},
		{abi.Resume{}, 2},
		{core.Call{}, 4},
		{core.Result{}, 2},
		{core.Value{}, 4},
	} {
		if n := reflect.TypeOf(tc.v).NumField(); n != tc.fields {
			t.Errorf("%T has %d fields, the compact form carries %d", tc.v, n, tc.fields)
		}
	}
}
