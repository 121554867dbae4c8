// Package faultproxy is a small TCP proxy for tests that put faults between a
// client and a server on the loopback interface: it can reset every open
// connection (Cut), slow every chunk down (SetDelay), hold all traffic as a
// network black hole would (Blackhole), and lose the next reply after the
// server has acted on the request (LoseNextReply).
//
// A black hole holds data rather than dropping it: TCP retransmits what a
// dropped packet carried, so a connection that outlives the black hole
// delivers everything in order once it lifts, while a client whose deadline
// passes gives up on its own. Dropping bytes inside the proxy would instead
// desynchronise the stream, which no real network does.
//
// Use it from a test:
//
//	p := faultproxy.Start(t, srv.Addr) // closed when the test ends
//	client := redis.NewClient(&redis.Options{Addr: p.Addr()})
//	p.Blackhole(true)  // calls now hang until their deadlines
//	p.Blackhole(false) // held traffic flows again
//	p.Cut()            // every open connection is reset
package faultproxy
