package core

import "sync/atomic"

// bucketsSeen marks the user buckets whose meta a script of this planner
// found or made (lua/userlib.lua's layout). A bucket marked whose meta is
// gone has lost its data (docs/design.md §11); to a planner that has seen
// nothing of a bucket, a missing meta may as well be a new deployment.
// Concurrent plans of one engine share it.
type bucketsSeen []atomic.Bool

// mark records that bucket b has meta.
func (s bucketsSeen) mark(b uint32) {
	if !s[b].Load() { // a load, not a store, on the steady path: no cache line bounces
		s[b].Store(true)
	}
}

// has reports whether bucket b was marked.
func (s bucketsSeen) has(b uint32) bool { return s[b].Load() }
