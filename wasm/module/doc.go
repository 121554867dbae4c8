//go:build wasip1

// Command module is the presence core built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o presence.wasm ./wasm/module
//
// The host instantiates it, calls _initialize once, and then hands it ABI
// requests (package abi) through its exports. The module imports nothing
// but the WASI functions the Go runtime needs: a request starts a plan,
// whose response is its result or the script calls it waits for, and the
// host runs those on Redis and resumes the plan with their results. The
// exports, with their memory protocol, are described in wasm/ABI.md;
// wasm/host is a host on wazero.
package main
