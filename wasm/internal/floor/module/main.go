//go:build wasip1

// Command module is package floor as a WASI reactor, for BenchmarkFloor.
package main

import "github.com/presencekit/presence/wasm/internal/floor"

func main() {}

var work *floor.Work

// setup makes the work of n beats.
//
//go:wasmexport floor_setup
func setup(n uint32) { work = floor.New(int(n)) }

// noop does nothing: the cost of a call into the module.
//
//go:wasmexport floor_noop
func noop() {}

// decode is floor.Work.Decode.
//
//go:wasmexport floor_decode
func decode() { work.Decode() }

// plan is floor.Work.Plan.
//
//go:wasmexport floor_plan
func plan() { work.Plan() }

// guest is floor.Work.Guest.
//
//go:wasmexport floor_guest
func guest() { work.Guest() }
