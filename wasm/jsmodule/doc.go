//go:build js && wasm

// Command jsmodule is the presence core built for JavaScript hosts:
//
//	GOOS=js GOARCH=wasm go build -o presence-js.wasm ./wasm/jsmodule
//
// Run with Go's wasm_exec.js ($(go env GOROOT)/lib/wasm), it defines one
// global object:
//
//	presence.abiVersion       // 2
//	presence.newInstance()    // → {call(request), release()}
//
// call takes an ABI request (a string or a Uint8Array of JSON) and returns
// the response synchronously, as a Uint8Array of JSON: a result, an error,
// or the script calls a plan waits for, which the host runs on Redis
// however it likes (asynchronously, on the event loop) before calling
// again with a resume request. The module calls nothing in JavaScript.
// call never throws: bad input and failures come back as error
// responses. wasm/node holds an example for Node.js.
package main
