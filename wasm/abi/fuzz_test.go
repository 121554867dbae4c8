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
		`{"v":2,"op":"configure","args":{"classes":{"v":{"layout":"compact","window_ms":600000}},"seed":"x"}}`,
		`{"v":2,"op":"heartbeat","now":1,"args":{"user":"u","device":"d","kind":"web","meta":{"a":"b"},"at":5}}`,
		`{"v":2,"op":"heartbeat_batch","now":1,"args":{"beats":[{"user":"u","device":"d","kind":3}]}}`,
		`{"v":2,"op":"login","now":1,"args":{"user":"u","device":"d","kind":"ios","policy":"exclusive"}}`,
		`{"v":2,"op":"set_manual","now":1,"args":{"user":"u","manual":"DND","ttl_ms":1.5}}`,
		`{"v":2,"op":"members","now":1,"args":{"scope":{"class":"room","id":"r"},"cursor":"0.1","limit":2}}`,
		`{"v":2,"op":"resume","now":1,"args":{"plan":3,"results":[{"value":[1,"x",null,{"b":"/w=="}]},{"error":{"code":"noscript","message":"NOSCRIPT"}}]}}`,
		`{"v":2,"op":"cancel","args":{"plan":3}}`,
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
	f.Add(abi.OpStatus, []byte(`{"v":2,"result":{"user":"u","status":"ONLINE","manual":"NONE","devices":[{"id":"d","kind":"web","state":"ONLINE","login_at":1,"last_seen":1,"last_active":1,"meta":null}],"at":1}}`))
	f.Add(abi.OpHeartbeatBatch, []byte(`{"v":2,"result":{"acks":[{"token":"t","error":{"code":"store","message":"m","op":"x","cause":{"code":"unavailable","message":"y"}},"changes":null}]}}`))
	f.Add(abi.OpCount, []byte(`{"v":2,"plan":9,"calls":[{"sha":"a","keys":["k"],"args":["\u0000",{"b":"/w=="}]},{"src":"return 1","keys":[],"args":[]}]}`))
	f.Add(abi.OpTouch, []byte(`{"v":2,"result":{},"messages":[{"kind":"change","channel":"p:changes","payload":"{}"}]}`))
	f.Add(abi.OpCount, []byte(`{"v":2,"error":{"code":"invalid","message":"presence: invalid scope.Class: unknown","field":"scope.Class","reason":"unknown"}}`))
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

// FuzzPlanMessages: a response carrying a plan's calls, and a resume
// request carrying its results, decode back as they were encoded.
func FuzzPlanMessages(f *testing.F) {
	f.Add("a", "k", "\xff", "x", int64(3), "\xff", true)
	f.Fuzz(func(t *testing.T, sha, key, arg, src string, n int64, s string, noscript bool) {
		calls := []core.Call{{SHA: sha, Keys: []string{key}, Args: []string{arg, s}}, {Source: src}}
		b := abi.EncodeResponse(abi.Response{Plan: 1 + n&0xffff, Calls: calls})
		resp, err := abi.DecodeResponse(abi.OpCount, b)
		if sha == "" || src == "" {
			if err == nil {
				t.Fatalf("%q: accepted a call without sha or src", b)
			}
			return
		}
		if err != nil || len(resp.Calls) != 2 || resp.Calls[0].SHA != sha || resp.Calls[0].Args[0] != arg || resp.Calls[1].Source != src {
			t.Fatalf("%q: %+v %v", b, resp, err)
		}
		results := []core.Result{{Value: core.Value{Kind: core.ValueArray, Array: []core.Value{{Kind: core.ValueInt, Int: n}, {Kind: core.ValueString, Str: s}, {}}}}, {Err: core.ErrUnavailable}}
		if noscript {
			results[1].Err = core.ErrNoScript
		}
		req, err := abi.EncodeRequest(abi.Request{Op: abi.OpResume, Now: 1, Args: &abi.Resume{Plan: resp.Plan, Results: results}})
		if err != nil {
			t.Fatal(err)
		}
		back, err := abi.DecodeRequest(req)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		r := back.Args.(*abi.Resume)
		if r.Plan != resp.Plan || len(r.Results) != 2 || r.Results[0].Value.Array[1].Str != s || r.Results[1].Err != results[1].Err {
			t.Fatalf("%q: %+v", req, r)
		}
	})
}
