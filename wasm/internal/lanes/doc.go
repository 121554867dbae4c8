// Package lanes is what the runtime lanes of the presence module share:
// the scripted sequence every lane runs (wasm/testdata/sequence.json), its
// run through native Go, the comparison of a lane's output with it, and
// the fixtures the lanes need (the built modules, wasm_exec.js, the npm
// packages of wasm/package.json, a real redis-server).
//
// A lane runs the sequence through a JavaScript runtime (Node, Deno,
// workerd) hosting the module, against a redis-server the test started,
// and prints one line per request of the sequence: the module's final
// response to it, byte for byte (its result and the messages to publish,
// or its error). Native runs the same requests through the same guest
// code compiled for the machine, over go-redis; the lane agrees when
// every line is equal. The requests of one step start together and share
// pipelines, each round sending the calls of every plan still waiting in
// order; a resume carries the now of the request that started its plan,
// so that a run is an exact function of the sequence.
package lanes
