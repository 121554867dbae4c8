package abi_test

import (
	"encoding/json"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

// The fuzz targets check that the decoders never panic, and that what
// they accept encodes and decodes back to the same thing.

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"op":"configure","args":{"classes":{"v":{"layout":"compact","window_ms":600000}},"seed":"x"}}`,
		`{"v":1,"op":"heartbeat","now":1,"args":{"user":"u","device":"d","kind":"web","meta":{"a":"b"},"at":5}}`,
		`{"v":1,"op":"heartbeat_batch","now":1,"args":{"beats":[{"user":"u","device":"d","kind":3}]}}`,
		`{"v":1,"op":"login","now":1,"args":{"user":"u","device":"d","kind":"ios","policy":"exclusive"}}`,
		`{"v":1,"op":"set_manual","now":1,"args":{"user":"u","manual":"DND","ttl_ms":1.5}}`,
		`{"v":1,"op":"members","now":1,"args":{"scope":{"class":"room","id":"r"},"cursor":"0.1","limit":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := abi.DecodeRequest(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		again, err := abi.EncodeRequest(req)
		if err != nil {
			t.Fatalf("re-encoding %q: %v", b, err)
		}
		if _, err := abi.DecodeRequest(again); err != nil {
			t.Fatalf("%q re-encoded as %q: %v", b, again, err)
		}
		if c, ok := req.Args.(*abi.Config); ok {
			_, _ = c.Core()
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(abi.OpStatus, []byte(`{"v":1,"result":{"user":"u","status":"ONLINE","manual":"NONE","devices":[{"id":"d","kind":"web","state":"ONLINE","login_at":1,"last_seen":1,"last_active":1,"meta":null}],"at":1}}`))
	f.Add(abi.OpHeartbeatBatch, []byte(`{"v":1,"result":{"acks":[{"token":"t","error":{"code":"store","message":"m","op":"x","cause":{"code":"unavailable","message":"y"}},"changes":null}]}}`))
	f.Add(abi.OpCount, []byte(`{"v":1,"error":{"code":"invalid","message":"presence: invalid scope.Class: unknown","field":"scope.Class","reason":"unknown"}}`))
	f.Fuzz(func(t *testing.T, op string, b []byte) {
		resp, err := abi.DecodeResponse(op, b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		_ = resp.Error.Err()
		if _, err := abi.DecodeResponse(op, abi.EncodeResponse(resp)); err != nil {
			t.Fatalf("%q: re-encoded response does not decode: %v", b, err)
		}
	})
}

func FuzzDecodeScriptRequest(f *testing.F) {
	f.Add(abi.EncodeScriptRequest([]core.Call{{SHA: "a", Keys: []string{"k"}, Args: []string{"\xff", "x"}}, {Source: "return 1"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		calls, err := abi.DecodeScriptRequest(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if _, err := abi.DecodeScriptRequest(abi.EncodeScriptRequest(calls)); err != nil {
			t.Fatalf("%q: re-encoded request does not decode: %v", b, err)
		}
	})
}

func FuzzDecodeScriptResponse(f *testing.F) {
	f.Add(abi.EncodeScriptResponse([]core.Result{
		{Value: core.ArrayValue(core.IntValue(3), core.StringValue("\xff"), core.NilValue())},
		{Err: core.ErrNoScript},
	}), 2)
	f.Add([]byte(`{"v":1,"error":{"code":"unavailable","message":"down"}}`), 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		res, err := abi.DecodeScriptResponse(b, n)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if len(res) != n {
			t.Fatalf("%d results for %d calls", len(res), n)
		}
		if _, err := abi.DecodeScriptResponse(abi.EncodeScriptResponse(res), n); err != nil {
			t.Fatalf("%q: re-encoded response does not decode: %v", b, err)
		}
	})
}
