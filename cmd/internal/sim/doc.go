// Package sim simulates users heartbeating through edge nodes, each
// running the presence engine (in WebAssembly by default), against one
// Redis, in virtual time, and checks what the engine says against a
// ground truth it computes itself from the rules of docs/design.md.
//
// Users have devices of each kind (web, desktop, ios, android). Devices
// log in (some exclusively, kicking the user's other sessions), heartbeat
// at their kind's interval with jitter, lose beats, switch networks
// (a disconnect and a quick reconnect), go to the background and come
// back, log out or just vanish; users set DND now and then, and watch
// videos (scope counters), joining and leaving. Edge nodes crash, and
// their users reconnect to the others. Each tick, an edge merges the beats
// it received into one HeartbeatBatch, as a gateway does.
//
// The truth is kept by the simulator from the events it generated, with
// the rules of docs/design.md (device windows, idle time, the aggregate, kicks,
// token fencing, scope windows) and without calling the core's model. At
// every sweep the run compares, and writes a row of the time series:
// users per status (the truth, and what Engine.Online says, which follows
// the debounced published changes), video viewer counts (truth against
// Count, which for compact scopes may be one sweep interval old),
// published events against net changes, kicks, refused stale heartbeats,
// Redis calls and wall time. Every minute it also reads every user's status
// and compares it exactly. A disagreement beyond what the design allows
// fails the run.
//
//	res, err := sim.Run(ctx, sim.Config{Users: 1000, Duration: 10 * time.Minute, Module: wasmBytes})
//	fmt.Println(res.Summary())
//
// Results are deterministic for a seed: the same configuration gives the
// same time series (wall times aside).
package sim
