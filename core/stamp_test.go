package core_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// wrap is the first instant after t0 at which a compact shard's stored
// touch stamp (the instant modulo 2^31 ms) starts again from 0.
var wrap = time.Duration(1<<31-t0.UnixMilli()%(1<<31)) * time.Millisecond

// TestCompactStampsWrap runs a compact scope across the instant where its
// stored stamps wrap: counts, windows, last-seen instants and sweeps stay
// exact, together and spread.
func TestCompactStampsWrap(t *testing.T) {
	for _, spread := range []bool{false, true} {
		t.Run(map[bool]string{false: "together", true: "spread"}[spread], func(t *testing.T) {
			runTable(t, scopeConfigSpread(4, spread), []step{
				{wrap - 30*sec, touch(video, "a"), "ok"},
				{wrap - 1*ms, touch(video, "b"), "ok"},
				{wrap + 10*sec, sweepScopes, "removed=0 released=0"},
				{wrap + 10*sec, count(video), "2"},
				{wrap + 10*sec, lastSeen(video), "a@-30s b@-1ms"},
				{wrap + 10*sec, activeWithin(video, 20*sec), "1"},
				{wrap + 31*sec, sweepScopes, "removed=1 released=0"},
				{wrap + 31*sec, count(video), "1"},
				{wrap + 50*sec, touch(video, "c"), "ok"},
				{wrap + 50*sec, lastSeen(video), "b@-1ms c@50s"},
				{wrap + 60*sec, sweepScopes, "removed=1 released=0"},
				{wrap + 60*sec, count(video), "1"},
				{wrap + 60*sec, lastSeen(video), "c@50s"},
			})
		})
	}
}

// lastSeen renders a scope's members with their last touch as an offset
// from the wrap instant, sorted by member.
func lastSeen(sc core.Scope) func(*env) string {
	return func(e *env) string {
		p, err := opdo.Do[core.MemberPage](e.ctx, e.p, core.ReadMembers{Scope: sc, Cursor: "", Limit: core.MaxPage})
		if err != nil {
			return errName(err)
		}
		out := make([]string, len(p.Members))
		for i, m := range p.Members {
			out[i] = m.ID + "@" + m.LastSeen.Sub(t0.Add(wrap)).String()
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
}
