package node_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/wasm/internal/lanes"
)

// BenchmarkHeartbeatNode runs bench.mjs: heartbeats through the module in
// Node.js over replayed Redis replies, as BenchmarkHeartbeatNative and
// BenchmarkHeartbeatWASM in wasm/host do natively and on wazero. It
// reports the CPU and wall time per beat that Node measured; ns/op is
// the whole run's and means nothing.
func BenchmarkHeartbeatNode(b *testing.B) {
	for _, mode := range []string{"single", "batch"} {
		b.Run(mode, func(b *testing.B) {
			node, module, execJS := setup(b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			n := b.N
			if mode == "batch" {
				n *= 100
			}
			out, err := exec.CommandContext(ctx, node, "bench.mjs", "--wasm", module, "--wasm-exec", execJS,
				"--redis", lanes.Redis(b), "--n", strconv.Itoa(max(n, 100))).CombinedOutput()
			if err != nil {
				b.Fatalf("node bench.mjs: %v\n%s", err, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var r struct {
					Mode string  `json:"mode"`
					CPU  float64 `json:"cpu_ns_per_beat"`
					Wall float64 `json:"wall_ns_per_beat"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					b.Fatalf("bench.mjs printed %q: %v", line, err)
				}
				if r.Mode == mode {
					b.ReportMetric(r.CPU, "cpu-ns/beat")
					b.ReportMetric(r.Wall, "wall-ns/beat")
				}
			}
		})
	}
}
