package core

import (
	"crypto/sha1"
	"encoding/binary"
	"strconv"
	"sync/atomic"
)

// pageHints remembers each user bucket's page geometry, its level and split
// pointer (lua/recordlib.lua), as the steady beat last reported it, so that
// a beat names the page its user should be in and the script neither hashes
// the user nor reads the geometry, as a cluster client caches the slot map.
// A hint is only a hint: a stale one costs the script a miss and a lookup,
// never a wrong answer (lua/heartbeat_steady.lua). Concurrent plans of one
// engine share it; page names are formatted once, when a geometry is
// learnt, so that naming a page allocates nothing.
type pageHints struct {
	geometry []atomic.Uint64          // by bucket: (level+1)<<32 | split, 0 unknown
	names    atomic.Pointer[[]string] // "0", "1", ... for every page of any bucket's geometry
}

func newPageHints(buckets int) *pageHints {
	return &pageHints{geometry: make([]atomic.Uint64, buckets)}
}

// page returns the page of user in bucket b at the geometry last reported,
// or "" when none has been.
func (h *pageHints) page(b uint32, user string) string {
	g := h.geometry[b].Load()
	if g == 0 {
		return ""
	}
	p := userPage(user, uint(g>>32)-1, uint32(g))
	if names := h.names.Load(); names != nil && p < uint64(len(*names)) {
		return (*names)[p]
	}
	return strconv.FormatUint(p, 10)
}

// learn records the geometry of bucket b.
func (h *pageHints) learn(b uint32, level uint, split uint32) {
	h.geometry[b].Store(uint64(level+1)<<32 | uint64(split))
	pages := 2 << min(level, 20) // every page of the next level; past a million, formatted per beat
	if old := h.names.Load(); old != nil && len(*old) >= pages {
		return
	}
	names := make([]string, pages)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	h.names.Store(&names)
}

// userPage is the page of user at level, split pointer split: linear
// hashing over the first 32 bits of the user's SHA1, as recordlib.lua's
// hashOf and pageOf compute it.
func userPage(user string, level uint, split uint32) uint64 {
	var buf [64]byte // on the stack: most user IDs hash without an allocation
	sum := sha1.Sum(append(buf[:0], user...))
	h := uint64(binary.BigEndian.Uint32(sum[:4]))
	n := uint64(1) << level
	p := h % n
	if p < uint64(split) {
		p = h % (2 * n)
	}
	return p
}
