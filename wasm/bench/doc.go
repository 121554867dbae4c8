//go:build linux

// Command bench measures the presence module in each JavaScript runtime
// it is tested on (Node.js, Deno, workerd) beside the native engine, in
// one run anyone can repeat:
//
//	npm ci --prefix wasm
//	npm run --prefix wasm bench                 # go run ./wasm/bench
//	npm run --prefix wasm bench -- -runs 5 -n 4000
//
// It builds the reactor as wasm.Build does, runs the benchmark's
// heartbeats natively against a redis-server of its own (redis-server on
// PATH, or in PRESENCE_REDIS_BIN) to record the reply to each shape of
// script call, stops the server, and then measures, round after round,
// the native core.Engine and each runtime over a replay of those replies:
// no Redis and no network in any figure. Every round starts a fresh
// process (run.mjs in node and deno, worker.mjs in workerd).
//
// It prints one JSON line for the native engine, then one per runtime:
// "single_ratio" and "batch_ratio" (CPU per beat of one heartbeat, and of
// a heartbeat_batch of 100, to the native engine's in the same round),
// "first_request_cpu_ms" (a fresh process or isolate, with the module
// compiled: instantiating it, configuring, one heartbeat) and its three
// parts, "init_ms" (instantiating the module and initialising Go's
// runtime), "configure_ms" (the first configure) and "first_beat_ms" (the
// first heartbeat), "reconfigure_ms" (of a second
// configure after the heartbeat, when the code it runs is compiled: in
// workerd less the cost of an empty request, so it can come out a little
// below zero), the CPU per beat in µs, the commit and the load average.
// The per-beat figures are of a steady state: each runtime first runs
// 20,000 heartbeats and 1,000 batches (or half of what it measures, if
// more). Each figure is the median of its rounds. CPU is read from /proc,
// every thread of the process: Linux only.
//
// With -phases it measures instead an isolate's first request part by
// part in Node.js and Deno (phases.mjs), for the module and for reactors of
// Go's runtime alone and with crypto/sha1 (wasm/internal/sizefloor's bare
// and sha1): the bytes of
// WebAssembly that V8 compiles in each part (--trace-wasm-compilation-times,
// a count the load does not move: V8 compiles a function on its first
// call) and each part's CPU, the median of -runs fresh processes:
//
//	npm run --prefix wasm bench -- -phases -runs 5
//
// With -keep DIR it leaves the module and the recorded replies in DIR, so
// that run.mjs can be profiled by hand:
//
//	go run ./wasm/bench -runs 0 -keep /tmp/pb
//	node --cpu-prof wasm/bench/run.mjs --wasm /tmp/pb/presence.wasm --replies /tmp/pb/replies.json
package main
