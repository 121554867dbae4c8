//go:build wasip1

package main

func main() {}

var last []byte

// call allocates n bytes, so that the allocator and the collector stay.
//
//go:wasmexport sizefloor_call
func call(n uint32) uint32 {
	last = make([]byte, n)
	return uint32(len(last))
}
