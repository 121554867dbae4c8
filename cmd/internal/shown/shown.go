// Package shown is the order in which the service, the CLI and the
// simulator show statuses: one list, so that a status added to core shows
// everywhere.
package shown

import "github.com/presencekit/presence/core"

// first are the statuses people read first: those of a user at the
// screen, then one reachable by push.
var first = [...]core.Status{core.StatusOnline, core.StatusAway, core.StatusDND, core.StatusPushOnline}

// Statuses returns every status but OFFLINE, in the order they are shown:
// those of first, then any other status core has, by number.
func Statuses() []core.Status {
	out := append([]core.Status(nil), first[:]...)
	for s := core.StatusOffline + 1; known(s); s++ {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// known reports whether s is one of core's statuses: its name parses back
// to it.
func known(s core.Status) bool {
	back, ok := core.Parse[core.Status](s.String())
	return ok && back == s
}

func contains(list []core.Status, s core.Status) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
