//go:build wasip1

package main

import (
	"context"
	"errors"
	"unsafe"

	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

func main() {}

// Imports from the host module "presence" (see ABI.md).

// hostEval hands the host a script request and returns the length of its
// response, which hostEvalResult then copies into the module's memory.
//
//go:wasmimport presence eval
func hostEval(ptr unsafe.Pointer, size uint32) uint32

// hostEvalResult copies the pending script response into [ptr, ptr+size);
// size must be what hostEval returned. It returns 0 on success.
//
//go:wasmimport presence eval_result
func hostEvalResult(ptr unsafe.Pointer, size uint32) uint32

// hostPublish publishes a message on a channel; it returns 0 on success.
//
//go:wasmimport presence publish
func hostPublish(channel unsafe.Pointer, channelSize uint32, message unsafe.Pointer, messageSize uint32) uint32

// host implements guest.Host with the imports.
type host struct{}

// Eval hands the request to the host and copies its response in.
func (host) Eval(ctx context.Context, request []byte) []byte {
	n := hostEval(unsafe.Pointer(unsafe.SliceData(request)), uint32(len(request)))
	if n > abi.MaxMessage {
		return abi.EncodeScriptFailure(errors.New("presence: script response larger than the ABI allows"))
	}
	out := make([]byte, n+1) // never empty, so that its pointer is a real one
	if hostEvalResult(unsafe.Pointer(unsafe.SliceData(out)), n) != 0 {
		return abi.EncodeScriptFailure(errors.New("presence: host refused eval_result"))
	}
	return out[:n]
}

// Publish hands a message to the host.
func (host) Publish(ctx context.Context, channel string, message []byte) error {
	ch := []byte(channel)
	if len(ch) == 0 || len(message) == 0 {
		return errors.New("presence: publish: empty channel or message")
	}
	if hostPublish(unsafe.Pointer(unsafe.SliceData(ch)), uint32(len(ch)), unsafe.Pointer(unsafe.SliceData(message)), uint32(len(message))) != 0 {
		return errors.New("presence: host publish failed")
	}
	return nil
}

// The module's state: one guest per instance, the buffers handed to the
// host, and the last response (kept until the next call).
var (
	theGuest = guest.New(host{})
	buffers  = map[uint32][]byte{}
	last     []byte
)

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// abiVersion returns abi.Version.
//
//go:wasmexport presence_abi_version
func abiVersion() uint32 { return abi.Version }

// alloc returns a buffer of size bytes for the host to write a request
// into, kept alive until free; 0 if size exceeds abi.MaxMessage.
//
//go:wasmexport presence_alloc
func alloc(size uint32) uint32 {
	if size > abi.MaxMessage {
		return 0
	}
	b := make([]byte, max(size, 1))
	p := addr(b)
	buffers[p] = b
	return p
}

// free releases a buffer from alloc; other pointers are ignored.
//
//go:wasmexport presence_free
func free(ptr uint32) { delete(buffers, ptr) }

// call handles the request in the first size bytes of the buffer at ptr
// (from alloc) and returns the response as ptr<<32 | length. The response
// stays valid until the next call.
//
//go:wasmexport presence_call
func call(ptr, size uint32) uint64 {
	b, ok := buffers[ptr]
	if !ok || int(size) > len(b) {
		last = abi.EncodeErrorResponse(&abi.DecodeError{What: "request",
			Reason: "not within a buffer from presence_alloc"})
	} else {
		last = theGuest.Handle(context.Background(), b[:size])
	}
	return uint64(addr(last))<<32 | uint64(len(last))
}
