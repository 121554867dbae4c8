package abi

import (
	"reflect"
	"testing"
)

// TestDispatchCoversOps holds decodeArgs and appendResult to NewArgs and
// NewResult: every op's argument type decodes through decodeArgs, and its
// result type, as a pointer and as a value, encodes through appendResult.
func TestDispatchCoversOps(t *testing.T) {
	for _, op := range Ops() {
		if err := decodeArgs(NewArgs(op), newReader("request", []byte("{}"))); err == errNotArgs {
			t.Errorf("%s: decodeArgs does not know %T", op, NewArgs(op))
		}
		if op == OpResume {
			continue // a resume answers as the op that started its plan
		}
		res := NewResult(op)
		if _, ok := appendResult(nil, res); !ok {
			t.Errorf("%s: appendResult does not know %T", op, res)
		}
		if _, ok := appendResult(nil, derefed(res)); !ok {
			t.Errorf("%s: appendResult does not know %T", op, derefed(res))
		}
	}
	if _, ok := appendResult(nil, &Heartbeat{}); ok {
		t.Error("appendResult encoded an argument type as a result")
	}
}

// derefed returns the value p points to.
func derefed(p any) any { return reflect.ValueOf(p).Elem().Interface() }
