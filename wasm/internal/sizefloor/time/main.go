//go:build wasip1

package main

import "time"

func main() {}

var last []byte

// call allocates n bytes and reads an instant n milliseconds after the
// epoch.
//
//go:wasmexport sizefloor_call
func call(n uint32) uint32 {
	last = make([]byte, n)
	return uint32(time.UnixMilli(int64(n)).Nanosecond())
}
