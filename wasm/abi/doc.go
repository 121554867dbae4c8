// Package abi is the versioned wire format between a presence module built
// for WebAssembly and its host: the operations a host hands the module
// (configure, heartbeat, login, status, count, sweep …), their results and
// errors, and, since version 2, the plans: a response may instead carry the
// Lua script calls a plan waits for (Response.Plan, Response.Calls), which
// the host runs on Redis and answers with a resume request (Resume).
//
// Every message is one JSON object carrying "v": [Version], or, for the hot
// path (heartbeat, heartbeat_batch and resume requests; responses carrying
// calls, an Ack or Acks), a binary message in the compact form, which
// starts with the byte [Compact] (EncodeRequestCompact,
// AppendResponseCompact). The decoders
// (DecodeRequest, DecodeResponse) are strict: unknown fields, wrong types, trailing
// data, unknown operations or enum names and oversized messages are
// rejected with a *DecodeError (it matches [ErrMalformed]), a message of
// another version with a *VersionError (it matches [ErrVersion]). They never
// panic, so a module can answer malformed input with an error instead of
// trapping.
//
// Errors cross the boundary as an [Error] with a code; [Error.Err] rebuilds
// a Go error that matches the same core sentinels (errors.Is) and has the
// same message as the one the module returned, so that a host sees the same
// errors as callers of the native core. The full format is described in
// wasm/ABI.md.
//
// Each message is declared once, as a struct whose json tags name its
// fields; wire_gen.go, written by go generate from those declarations,
// holds the codec and the conversions from and to the core types.
//
// The package depends only on the standard library and core, and builds
// for every GOOS, GOOS=wasip1 and GOOS=js included.
//
// A host builds a request, and reads the response:
//
//	req, _ := abi.EncodeRequest(abi.Request{Op: abi.OpHeartbeat, Now: now,
//		Args: &abi.Heartbeat{User: "alice", Device: "web", Kind: abi.Kind(core.KindWeb)}})
//	out := module.Call(req) // however the host reaches the module
//	resp, err := abi.DecodeResponse(abi.OpHeartbeat, out)
//	for resp.Calls != nil { // the plan waits for script calls
//		results := store.Eval(ctx, resp.Calls)
//		req, _ = abi.EncodeRequest(abi.Request{Op: abi.OpResume, Now: now,
//			Args: &abi.Resume{Plan: resp.Plan, Results: results}})
//		resp, err = abi.DecodeResponse(abi.OpHeartbeat, module.Call(req))
//	}
//	ack := resp.Result.(*abi.Ack).Core()
package abi
