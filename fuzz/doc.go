// Package fuzz holds the fuzz targets of the presence core: everything that
// takes outside input (identifiers, metadata, timestamps, durations,
// configuration, and the replies a Redis driver hands back) is fuzzed
// through the core's exported API only, against an engine on miniredis and,
// where it applies, the in-memory reference model in lockstep.
//
// The package has no code of its own beyond this file: the targets are in
// the test files, so they never ship in a binary.
//
// # Targets
//
//   - FuzzIdentifiers (ids_test.go) builds Login, Heartbeat, Logout,
//     Disconnect, SetManual, Statuses, Touch, Leave, Count and Members
//     requests from fuzzed user, device, gateway, token, scope, member,
//     class, cursor and metadata strings. A request is accepted exactly when
//     the rules of docs/design.md §3, applied by the test, allow it; an
//     accepted one round-trips (Status shows the device with exactly the
//     metadata sent, Members lists the member); a refused one fails with a
//     *core.InputError (matching core.ErrInvalid) that names a field at fault
//     and sends nothing to Redis (a recording core.Store counts the calls).
//     Engine and model must refuse alike.
//   - FuzzKeyLayout (keys_test.go) runs the same operations for two fuzzed
//     (user, device, scope, member) tuples. Every call's keys, and every
//     key-shaped argument a script builds keys from, share one cluster slot;
//     neither tuple's state shows in the other's Status, Count or Members
//     unless their IDs coincide; and, learning the layout from marker IDs,
//     the keys and fields of two tuples coincide only where the IDs they are
//     built from are equal (the mapping is injective).
//   - FuzzSlot (keys_test.go) checks internal/slot against a reference
//     implementation of the Redis Cluster hash slot; TestSlotVectors pins the
//     published values and the hash-tag rules.
//   - FuzzTimes (times_test.go) fuzzes Heartbeat.At (any int64 milliseconds,
//     near the skew limit, or whole seconds), MaxSkew, SetManual's ttl and
//     ActiveWithin's d: typed errors for bad durations, ErrClockSkew exactly
//     when |At − now| > MaxSkew (computed exactly), last-active moved only as
//     the design says, a manual status ending exactly at its expiry.
//   - FuzzConfig (config_test.go) fuzzes the durations and integers of
//     core.Config and of a scope class: New and NewModel agree and accept
//     exactly what the documented rules allow; an accepted configuration
//     then runs a short lockstep scenario with clock steps derived from it.
//   - FuzzReplies (replies_test.go) runs every Engine method over a fake
//     store whose replies are decoded from the input (contract-keeping
//     replies, mutated ones, arbitrary value trees, NOSCRIPT, failures, the
//     wrong number of results, and a client-side cache): no panic, no hang;
//     a reply breaking its script's contract yields core.ErrReply, a failure
//     a *core.StoreError, and whatever succeeds holds nothing impossible.
//   - FuzzStateMachine (machine_test.go, lockstep_test.go) decodes a
//     configuration and up to 120 events (heartbeats, batches, logins under
//     each policy, logouts, disconnects, manual statuses, clock steps, sweeps,
//     scope touches, leaves, counts, pages) and runs them on an engine on
//     miniredis and the model in lockstep: equal observations, the state
//     table of docs/design.md §5 and the aggregate of section 6 computed
//     independently from each device's fields, counts never negative,
//     changes never From == To and chained per user, and after quiescence
//     every user OFFLINE and published so.
//   - FuzzWasmABI (wasm_test.go) runs raw bytes through every decoder of
//     wasm/abi (no panic, accepted messages re-encode to a fixed point, a
//     decoded request the core then vets with typed errors) and takes
//     fuzzed heartbeats, logins, script calls and script replies across the
//     boundary and back: they arrive unchanged, and the core's verdict on a
//     request is the same natively and through the ABI.
//
// The bounds of docs/design.md §3 and their constants (internal/limits'
// IDBytes, MetaEntries and MetaBytes, core's MaxBatch and MaxPage,
// MaxDevices and the Config ranges) are plain tests in bounds_test.go: at the cap accepted, one
// over refused with a clear error. Bugs the targets found in core are
// regression tests in regressions_test.go, with the input that showed each;
// one still open in core is skipped until fixed (FUZZ_KNOWN_BUGS=1 runs it),
// and a target skips the inputs that hit it with knownBug, naming the test.
//
// # Running
//
// go test ./fuzz runs the seed corpora (testdata/fuzz/FuzzX: named seeds
// written by TestWriteSeeds, and every input that ever failed, under the
// hash name go gave it; keep those). Go fuzzes one target per invocation:
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzStateMachine$' -fuzztime 10m -parallel 2
//
// fuzz/run.sh runs every target in turn for FUZZTIME each (default 10s), as
// CI does; set FUZZTIME=5m (or more) for a longer campaign, and FUZZPARALLEL
// to choose the workers. A failing input is written to testdata/fuzz/FuzzX;
// replay it with go test ./fuzz -run 'FuzzX/NAME', and read what the
// lockstep targets did with FUZZ_TRACE=1.
//
// For example:
//
//	go test ./fuzz                       # seeds and regressions, seconds
//	FUZZTIME=60s bash fuzz/run.sh        # every target for a minute
//	go test ./fuzz -run Regression -v    # the bugs found so far
package fuzz
