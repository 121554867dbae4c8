//go:build js && wasm

package main

import (
	"syscall/js"

	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

func main() {
	js.Global().Set("presence", js.ValueOf(map[string]any{
		"abiVersion":  abi.Version,
		"newInstance": js.FuncOf(newInstance),
	}))
	select {} // keep the exported functions alive
}

var uint8Array = js.Global().Get("Uint8Array")

// request reads call's argument: a string or a Uint8Array.
func request(args []js.Value) ([]byte, bool) {
	if len(args) < 1 {
		return nil, false
	}
	switch a := args[0]; {
	case a.Type() == js.TypeString:
		return []byte(a.String()), true
	case a.InstanceOf(uint8Array):
		n := a.Get("length").Int()
		if n > abi.MaxMessage {
			return nil, false
		}
		b := make([]byte, n)
		js.CopyBytesToGo(b, a)
		return b, true
	}
	return nil, false
}

// newInstance() returns {call, release}.
func newInstance(this js.Value, args []js.Value) any {
	g := guest.New()
	var call js.Func
	call = js.FuncOf(func(this js.Value, args []js.Value) any {
		var resp []byte
		if req, ok := request(args); ok {
			resp = g.Handle(req)
		} else {
			resp = abi.EncodeErrorResponse(&abi.DecodeError{What: "request",
				Reason: "call takes the request as a string or a Uint8Array of at most 64 MiB"})
		}
		out := uint8Array.New(len(resp))
		js.CopyBytesToJS(out, resp)
		return out
	})
	var release js.Func
	release = js.FuncOf(func(this js.Value, args []js.Value) any {
		call.Release()
		release.Release()
		return nil
	})
	return js.ValueOf(map[string]any{"call": call, "release": release})
}
