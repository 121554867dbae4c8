//go:build js && wasm

package main

import (
	"context"
	"errors"
	"fmt"
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

// jsHost implements guest.Host with JavaScript functions.
type jsHost struct {
	eval, publish js.Value
}

// invoke calls f, turning a thrown exception into an error.
func invoke(f js.Value, args ...any) (v js.Value, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("presence: javascript threw: %v", p)
		}
	}()
	if f.Type() != js.TypeFunction {
		return js.Undefined(), errors.New("presence: not a function")
	}
	return f.Invoke(args...), nil
}

// Eval calls the JavaScript eval function with the request text.
func (h jsHost) Eval(ctx context.Context, request []byte) []byte {
	v, err := invoke(h.eval, string(request))
	if err != nil {
		return abi.EncodeScriptFailure(fmt.Errorf("eval: %w", err))
	}
	if v.Type() != js.TypeString {
		return abi.EncodeScriptFailure(errors.New("presence: eval must return a string"))
	}
	return []byte(v.String())
}

// Publish calls the JavaScript publish function, if there is one.
func (h jsHost) Publish(ctx context.Context, channel string, message []byte) error {
	if h.publish.Type() != js.TypeFunction {
		return nil
	}
	_, err := invoke(h.publish, channel, string(message))
	return err
}

// newInstance(eval, publish) returns {call, release}.
func newInstance(this js.Value, args []js.Value) any {
	h := jsHost{eval: js.Undefined(), publish: js.Undefined()}
	if len(args) > 0 {
		h.eval = args[0]
	}
	if len(args) > 1 {
		h.publish = args[1]
	}
	g := guest.New(h)
	var call js.Func
	call = js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) < 1 || args[0].Type() != js.TypeString {
			return string(abi.EncodeErrorResponse(&abi.DecodeError{What: "request", Reason: "call takes the request as a string"}))
		}
		return string(g.Handle(context.Background(), []byte(args[0].String())))
	})
	var release js.Func
	release = js.FuncOf(func(this js.Value, args []js.Value) any {
		call.Release()
		release.Release()
		return nil
	})
	return js.ValueOf(map[string]any{"call": call, "release": release})
}
