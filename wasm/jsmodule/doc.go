//go:build js && wasm

// Command jsmodule is the presence core built for JavaScript hosts:
//
//	GOOS=js GOARCH=wasm go build -o presence-js.wasm ./wasm/jsmodule
//
// Run with Go's wasm_exec.js ($(go env GOROOT)/lib/wasm), it defines one
// global object:
//
//	presence.abiVersion                 // 1
//	presence.newInstance(eval, publish) // → {call(request), release()}
//
// eval(scriptRequest) receives a script request (JSON text, see ABI.md)
// and must return the script response synchronously, as JSON text;
// publish(channel, message), optional, is called for status changes and
// kicks when the engine is configured with "publish": true. call takes an
// ABI request (JSON text) and returns the response (JSON text); it never
// throws: bad input, a throwing eval and failures come back as error
// responses. wasm/node holds an example for Node.js.
package main
