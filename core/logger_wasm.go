//go:build wasm

package core

import "context"

// logger is the type of Config.Logger in the WebAssembly builds: the
// method of *slog.Logger that the engine calls, so that a *slog.Logger
// still fits, but log/slog, whose initialisation brings in fmt, reflect
// and encoding/json (a large part of a module's size: go run ./wasm/sizes),
// is linked only into programs that use it.
type logger = interface {
	WarnContext(ctx context.Context, msg string, args ...any)
}
