// Package workerd holds the presence module's lane on Cloudflare's
// workerd: a Worker (worker.mjs) that hosts the WASI reactor and reaches
// Redis over cloudflare:sockets, its configuration (config.capnp), and
// the tests that run the lanes' sequence through it against a real
// redis-server and compare the output with native Go. See README.md.
package workerd
