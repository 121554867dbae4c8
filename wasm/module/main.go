//go:build wasip1

package main

import (
	"unsafe"

	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

func main() {}

// The module's state: one guest per instance, the buffers handed to the
// host, and the last response (kept until the next call).
var (
	theGuest = guest.New()
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
		last = theGuest.Handle(b[:size])
	}
	return uint64(addr(last))<<32 | uint64(len(last))
}
