// Package rig holds the shared equipment of the reliability tests: one
// client per driver, configured as a service in production would configure
// it (Adapters), an engine constructor, a settable clock, a MONITOR
// recorder, readers of the server's memory and keys, a latency histogram
// and a goroutine-leak check. Every helper takes a testing.TB and registers
// its own cleanup.
//
//	for _, a := range rig.Adapters() {
//		t.Run(a.Name, func(t *testing.T) {
//			srv := redistest.Server(t)
//			eng := rig.Engine(t, a.Open(t, srv.Addr), core.Config{})
//			// …
//		})
//	}
package rig
