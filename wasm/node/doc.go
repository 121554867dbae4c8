// Package node holds a Node.js example of the presence core's JS build
// (wasm/jsmodule): example.mjs loads the module with Go's wasm_exec.js
// and drives it over ABI v2 on Node's event loop, with plain async code
// and a minimal asynchronous RESP client (redis-async.mjs). See README.md.
//
// The package has no Go API; its test runs the example where node is
// installed.
package node
