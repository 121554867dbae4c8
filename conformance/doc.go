// Package conformance checks that every adapter, on every backend, behaves
// exactly like the reference model, core.Model: the property-based suite of
// docs/design.md §2.
//
// # Model-based sequences
//
// Check (and Run, its testing form) generates sequences of steps with
// gopter's commands package: heartbeats (single and batched, with the
// current, a superseded, a bogus or no session token, active or idle,
// foreground or background, with metadata and client timestamps), logins
// under each policy, logouts and disconnects, manual statuses with and
// without expiry, touches and leaves of exact, compact and approx scopes,
// clock advances, user and scope sweeps, every query (Status, Statuses,
// Count, Members page by page, ActiveWithin), and calls with one invalid
// argument. Each sequence draws its own configuration (policy, bucket and
// shard counts, spread shards, sweep step sizes, LeaveDelay,
// CoalesceWindow, device cap), and a quarter of them draw their steps from
// one user's two devices alone (a phone in the background, a browser tab
// in the foreground), so that one device's window passes while the other
// keeps beating. Every step runs on the model and on the
// target's engine, which share a virtual clock and a seeded token source,
// and every observation must agree: statuses and device lists, counts
// (approx ones within a HyperLogLog tolerance), member pages, published
// changes and kicks (compared as sorted lists, and read back through a
// pub/sub subscription), sweep reports (by changes, removed and released,
// not by steps), errors (by sentinel, or by the field an *InputError
// names). Rejected input must not reach the Store at all. A failing
// sequence is shrunk to a minimal one and printed step by step, with what
// the model and the target observed at the step where they part.
//
// # Clocks and key expiry
//
// Model and engine read the same virtual clock (core.Config.Clock). On
// miniredis the server's clock follows it too (SetTime with ClockTTL), so
// keys expire in virtual time exactly as the model mirrors them. The clock
// only moves by even, non-round numbers of milliseconds while every key
// lifetime is odd (the key grace and count lifetime are odd, all windows
// even), so no step lands on an expiry instant, where miniredis (TTL 0) and
// Redis (TTL below 0) differ. A real server keeps wall-clock time, so there
// the suite gives keys lifetimes (KeyGrace, CountTTL) of an hour, longer
// than any sequence spans in virtual time: nothing expires on either side,
// and every observation still depends only on the scripts, never on when
// the server happens to expire a key. Key expiry itself is covered on
// miniredis.
//
// # Race suite
//
// CheckRace (RunRace) drives a real server from eight goroutines at once,
// each with an engine of its own on one of the adapters: heartbeats,
// logins (some retried with their token), kicks, logouts and disconnects of
// a few users, touches and leaves, two sweepers whose locks collide, and
// readers; for a bounded time, in rounds of a few hundred operations under
// each login policy in turn. Each operation runs at its own instant of a
// shared virtual clock. Each round's history is checked for: no member or
// device removed while inside its window (at the instant of whatever
// removed it); nothing expired counted after a sweep that began after its
// expiry; one event per net change (published events equal returned ones,
// and each user's changes chain from OFFLINE back to OFFLINE after the
// round's quiet end); no kicked token ever accepted again; and
// linearizability against the model, per user and per scope, with
// github.com/anishathalye/porcupine. Compact counts read through a
// client-side cache may lag until the server's invalidation arrives
// (docs/design.md §9): they must equal the model's or an older count, and
// never go back in time for a reader.
//
// # Targets
//
// A Target names an adapter on a backend and opens it. MiniredisTargets and
// AdapterTargets (or ServerTargets, AdapterTargetsURL) list the three
// adapters; a target for another topology, such as Redis Cluster, is a
// Target whose Open returns that adapter's Store:
//
//	conformance.Target{Name: "goredis/cluster", Adapter: "goredis",
//		Open: func(ctx context.Context) (*conformance.Backend, error) {
//			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
//			return &conformance.Backend{Store: goredis.New(c), Close: c.Close}, nil
//		}}
//
// Every sequence and race round writes under a fresh key prefix, so one
// server serves any number of them without being flushed, and several
// targets can share it.
//
// # Sizes
//
// DefaultOptions asks for 2,000 sequences per target and a 30-second race
// run; PRESENCE_CONFORMANCE_SCALE multiplies both, and
// PRESENCE_CONFORMANCE_SEED replays a reported seed. "presence conform
// --redis redis://host:port" runs the same suite against any server.
//
// A minimal test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.MiniredisTargets(), conformance.DefaultOptions())
//	}
package conformance
