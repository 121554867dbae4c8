//go:build !wasm

package core

import (
	"errors"
	"net"
)

// netError reports whether err is or wraps net.ErrClosed or a net.Error.
// The WebAssembly builds have their own (errors_wasm.go), without package
// net.
func netError(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}
