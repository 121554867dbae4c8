package guest_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
	"github.com/presencekit/presence/wasm/guest"
)

// The steady beat's arguments before its beats and for each beat
// (core/lua/heartbeat_steady.lua).
const steadyHead, steadyFields = 6, 6

// BenchmarkGuestHeartbeat runs the guest natively through one heartbeat's
// plan, or one heartbeat_batch's, that the steady script applies: the
// request, the calls, the resume with canned results, the acks. It is
// the module's work without WebAssembly, in JSON and in the compact form.
func BenchmarkGuestHeartbeat(b *testing.B) {
	for _, n := range []int{1, 100} {
		for _, form := range []string{"json", "compact"} {
			b.Run("form="+form+"/beats="+strconv.Itoa(n), func(b *testing.B) {
				encode := abi.EncodeRequest
				if form == "compact" {
					encode = abi.EncodeRequestCompact
				}
				g := guest.New()
				cfg := abi.FromConfig(core.Config{UserBuckets: 1})
				creq, _ := abi.EncodeRequest(abi.Request{Op: abi.OpConfigure, Args: &cfg})
				g.Handle(creq)
				beats := abi.HeartbeatBatch{}
				tokens := make([]string, n)
				for i := range tokens {
					beats.Beats = append(beats.Beats, abi.Heartbeat{User: "user-" + strconv.Itoa(i), Device: "web", Kind: abi.Kind(core.KindWeb), Token: "0123456789abcdef"})
					tokens[i] = "0123456789abcdef"
				}
				op, args := abi.OpHeartbeatBatch, any(&beats)
				if n == 1 {
					op, args = abi.OpHeartbeat, &beats.Beats[0]
				}
				req, err := encode(abi.Request{Op: op, Now: 1767225600000, Args: args})
				if err != nil {
					b.Fatal(err)
				}
				// the steady beat's reply to each call: a token for each of its
				// beats (core/lua/heartbeat_steady.lua)
				resp, err := abi.DecodeResponse(op, g.Handle(req))
				if err != nil || resp.Plan == 0 {
					b.Fatal(err, resp)
				}
				var results abi.Results
				for _, c := range resp.Calls {
					beats := (len(c.Args) - steadyHead) / steadyFields
					results = append(results, core.Result{Value: core.Value{Kind: core.ValueString, Str: strings.Join(tokens[:beats], "\x1f")}})
				}
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					resp, err := abi.DecodeResponse(op, g.Handle(req))
					if err != nil || resp.Plan == 0 {
						b.Fatal(err, resp)
					}
					res, _ := encode(abi.Request{Op: abi.OpResume, Now: 1767225600001, Args: &abi.Resume{Plan: resp.Plan, Results: results}})
					if resp, err = abi.DecodeResponse(op, g.Handle(res)); err != nil || resp.Result == nil {
						b.Fatal(err, resp)
					}
				}
			})
		}
	}
}
