// Package node holds a Node.js example of the presence core's JS build
// (wasm/jsmodule): example.mjs loads the module with Go's wasm_exec.js
// and runs a heartbeat and a count against a Redis server through a
// synchronous script runner (redis-sync.mjs). See README.md.
//
// The package has no Go API; its test runs the example where node is
// installed.
package node
