package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/presencekit/presence/cmd/internal/sim"
)

// A small run on native edges (set Module and leave Engine empty to run
// the WebAssembly core), against an embedded Redis.
func ExampleRun() {
	res, err := sim.Run(context.Background(), sim.Config{Seed: 3, Users: 100, Edges: 2, Duration: 5 * time.Minute,
		Engine: sim.EngineNative})
	if err != nil {
		panic(err)
	}
	a := res.Agreement()
	fmt.Println("disagreements:", res.Stats.Violations, "unsettled:", a.Unsettled, "count mismatches:", a.CountMismatch)
	fmt.Println("error:", res.Err())
	// Output:
	// disagreements: 0 unsettled: 0 count mismatches: 0
	// error: <nil>
}
