// Package wasm builds the presence core for WebAssembly from source.
//
// The core compiles to two targets:
//
//   - WASI: wasm/module, a WASI reactor (GOOS=wasip1, -buildmode=c-shared)
//     with a small, versioned ABI (wasm/abi, described in ABI.md), run by
//     any WebAssembly runtime; wasm/host is a host on wazero.
//   - JS: wasm/jsmodule (GOOS=js), which defines a global object for
//     JavaScript hosts; wasm/node and wasm/deno run it in Node.js and Deno.
//
// wasm/workerd hosts the WASI build in Cloudflare's workerd, and every
// JavaScript host is tested against native Go (README.md).
//
// No binary is committed: Build runs the go command, so it works wherever
// this module's source and a Go toolchain are, as in tests and
// "go run ./cmd/presence sim":
//
//	err := wasm.Build(ctx, wasm.WASI, "/tmp/presence.wasm")
package wasm
