//go:build wasm

package core

import "errors"

// netErr has the methods of net.Error.
type netErr interface {
	error
	Timeout() bool
	Temporary() bool
}

// netError reports whether err is or wraps a net.Error, as errors_net.go
// does, but without importing package net, whose initialisation and
// resolver would otherwise be linked into the WebAssembly modules. The
// test is the same: net.ErrClosed is itself a net.Error, and an error
// matches an interface by its methods, except for an error whose own As
// method looks for a *net.Error target only.
func netError(err error) bool {
	var ne netErr
	return errors.As(err, &ne)
}
