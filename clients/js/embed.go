// Package jsclient holds presence.js, the browser client of `presence
// serve`, with its TypeScript declarations and its example page, for the
// service to serve under /examples/. The JavaScript is the product; this
// package only embeds it.
package jsclient

import "embed"

// Files holds presence.js, presence.d.ts and the example page (under
// example/).
//
//go:embed presence.js presence.d.ts example
var Files embed.FS
