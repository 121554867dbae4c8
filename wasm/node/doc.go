// Package node holds the Node.js host of the presence module (the WASI
// reactor, wasm/module): example.mjs instantiates it through
// wasm/js/reactor.mjs and drives its plans (ABI v2) on Node's event loop
// with node-redis, through wasm/js. See README.md.
//
// The package has no Go API; its tests run the lanes' sequence, the
// tests of wasm/js/plans.mjs and the example where node and the npm
// packages of wasm/package.json are installed.
package node
