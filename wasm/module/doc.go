//go:build wasip1

// Command module is the presence core built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o presence.wasm ./wasm/module
//
// The host instantiates it, calls _initialize once, and then hands it ABI
// requests (package abi) through its exports; the module runs Lua scripts
// on Redis through the functions it imports from the host module
// "presence". The exports and imports, with their memory protocol, are
// described in wasm/ABI.md; wasm/host is a host on wazero.
package main
