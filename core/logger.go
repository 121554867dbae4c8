//go:build !wasm

package core

import "log/slog"

// logger is the type of Config.Logger. The WebAssembly builds have their
// own (logger_wasm.go).
type logger = *slog.Logger
