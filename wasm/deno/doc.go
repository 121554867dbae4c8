// Package deno holds the Deno host of the presence module (main.mjs) and
// its test, which runs the lanes' sequence through Deno (the `deno` npm
// package pinned in wasm/package.json) against a real redis-server and
// compares every response with native Go's. See README.md.
package deno
