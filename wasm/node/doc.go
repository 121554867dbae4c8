// Package node holds the Node.js host of the presence core's JS build
// (wasm/jsmodule): example.mjs loads the module with Go's wasm_exec.js
// and drives its plans (ABI v2) on Node's event loop with node-redis,
// through wasm/js; bench.mjs measures a heartbeat's cost. See README.md.
//
// The package has no Go API; its tests run the lanes' sequence and the
// example where node and the npm packages of wasm/package.json are
// installed.
package node
