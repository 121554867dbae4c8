package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/presencekit/presence/core"
)

// The ground truth: what Redis should hold and what every user's status
// is, kept from the operations the simulator sent, in the order the edges
// sent them, with the rules of docs/design.md §5, §6 and §8. It is written
// from that page, not from the core or its model.

// rules are the configured windows, in milliseconds.
type rules struct {
	idleAfter, pushWindow, leaveDelay, coalesceWindow, kickFence int64
}

// record is a device session as Redis should hold it.
type record struct {
	exists       bool  // a session exists (it may be gone or past its window)
	gone         bool  // logged out or kicked: kept only to refuse tokens
	fenceUntil   int64 // a gone record: the last instant it refuses tokens
	background   bool
	token        string
	loginAt      int64
	lastSeen     int64
	lastActive   int64
	beatInterval int64
}

func (ru rules) window(r *record) int64 {
	if r.background {
		return ru.pushWindow
	}
	return 2 * r.beatInterval
}

// present reports whether Redis still has the record at t: its window has
// not passed, or, for a gone record, its fence has not.
func (ru rules) present(r *record, t int64) bool {
	if r.gone {
		return r.exists && t <= r.fenceUntil
	}
	return r.exists && t <= r.lastSeen+ru.window(r)
}

// state is a device's state at t (docs/design.md §5).
func (ru rules) state(r *record, t int64) core.Status {
	switch {
	case !ru.present(r, t) || r.gone:
		return core.StatusOffline
	case r.background:
		return core.StatusPushOnline
	case t-r.lastActive >= ru.idleAfter:
		return core.StatusAway
	}
	return core.StatusOnline
}

// aggregate is a user's status at t (docs/design.md §6).
func (w *world) aggregate(u *user, t int64) core.Status {
	best := core.StatusOffline
	for _, di := range u.devices {
		if s := w.rules.state(&w.devices[di].record, t); rank(s) > rank(best) {
			best = s
		}
	}
	switch {
	case best == core.StatusOffline:
		return best
	case u.manual == core.ManualDND:
		return core.StatusDND
	case u.manual == core.ManualInvisible:
		return core.StatusOffline
	}
	return best
}

// rank orders the automatic states, the most present highest (docs/design.md
// §6, rule 3).
func rank(s core.Status) int {
	switch s {
	case core.StatusOnline:
		return 3
	case core.StatusAway:
		return 2
	case core.StatusPushOnline:
		return 1
	}
	return 0
}

// advance moves u's truth to t through the instants at which a device
// turns AWAY or OFFLINE on its own, noting when the status changed.
func (w *world) advance(u *user, t int64) {
	if t <= u.evaluatedTo {
		return
	}
	var instants []int64
	for _, di := range u.devices {
		r := &w.devices[di].record
		if !r.exists || r.gone {
			continue
		}
		for _, instant := range []int64{r.lastActive + w.rules.idleAfter, r.lastSeen + w.rules.window(r) + 1} {
			if instant > u.evaluatedTo && instant <= t {
				instants = append(instants, instant)
			}
		}
	}
	sort.Slice(instants, func(i, j int) bool { return instants[i] < instants[j] })
	for _, instant := range instants {
		w.settle(u, instant)
	}
	u.evaluatedTo = t
}

// settle records u's status at t after a change of its records.
func (w *world) settle(u *user, t int64) {
	if s := w.aggregate(u, t); s != u.status {
		u.status, u.since = s, t
		w.stats.TruthChanges++
	}
	if t > u.evaluatedTo {
		u.evaluatedTo = t
	}
}

// beatOutcome is what the truth expects of a heartbeat.
type beatOutcome struct {
	refused bool   // REPLACED: a superseded token
	token   string // the token in force after it ("" when the engine issues a new one)
}

// beat applies a heartbeat at t to the truth (docs/design.md §5 and §8,
// under the multi policy of the simulated engines).
func (w *world) beat(d *device, hb core.Heartbeat, t int64) beatOutcome {
	r := &d.record
	present := w.rules.present(r, t)
	switch {
	case present && !r.gone && hb.Token != "" && hb.Token != r.token:
		return beatOutcome{refused: true}
	case present && r.gone && hb.Token != "":
		// a kicked or logged-out device: its token, or any older one,
		// is superseded until the fence ends
		return beatOutcome{refused: true}
	case present && !r.gone:
		// the session goes on
	default:
		// no live session: an implicit login, keeping a token the client
		// still has, or taking a new one
		*r = record{exists: true, token: hb.Token, loginAt: t, lastActive: t, beatInterval: d.beatInterval}
	}
	r.lastSeen, r.background = t, hb.Background
	if hb.Active && t > r.lastActive {
		r.lastActive = t
	}
	return beatOutcome{token: r.token}
}

// login applies a login at t and returns the devices it kicks.
func (w *world) login(d *device, policy core.Policy, bg bool, token string, t int64) []int32 {
	u := &w.users[d.user]
	var kicked []int32
	for _, di := range u.devices {
		other := &w.devices[di]
		if w.rules.state(&other.record, t) == core.StatusOffline {
			continue
		}
		if di == d.index || policy == core.PolicyExclusive ||
			(policy == core.PolicyExclusivePerKind && kindClass(other.kind) == kindClass(d.kind)) {
			other.record.gone, other.record.fenceUntil = true, t+w.rules.kickFence
			kicked = append(kicked, di)
		}
	}
	d.record = record{exists: true, background: bg, token: token, loginAt: t, lastSeen: t, lastActive: t, beatInterval: d.beatInterval}
	return kicked
}

// end applies a logout or disconnect at t: it reports whether the device
// had a session the token may end (refused: the token is superseded).
func (w *world) end(d *device, token string, logout bool, t int64) (removed, refused bool) {
	r := &d.record
	if !w.rules.present(r, t) || r.gone {
		return false, false
	}
	if token != "" && token != r.token {
		return false, true
	}
	if logout {
		r.gone, r.fenceUntil = true, r.lastSeen+w.rules.window(r)
	} else {
		r.exists = false
	}
	return true, false
}

// video is one video scope's truth: its viewers and their last touches.
type video struct {
	id        string
	lastTouch map[int32]int64
	samples   []sample // the truth count at each sweep, oldest first
}

// sample is a video's truth count at an instant.
type sample struct{ at, count int64 }

// staleness returns how long ago the count n, taken at asOf, was last the
// truth (as far as the samples tell), and whether it was the truth at
// asOf at all.
func (v *video) staleness(n, asOf, now int64) (time.Duration, bool) {
	i := sort.Search(len(v.samples), func(i int) bool { return v.samples[i].at >= asOf })
	if i == len(v.samples) || v.samples[i].at != asOf || v.samples[i].count != n {
		return 0, false
	}
	last := asOf
	for _, s := range v.samples[i+1:] {
		if s.count != n {
			break
		}
		last = s.at
	}
	return time.Duration(now-last) * time.Millisecond, true
}

func (w *world) violation(format string, args ...any) {
	w.stats.Violations++
	if len(w.violations) < 50 {
		w.violations = append(w.violations, fmt.Sprintf("t=%s: ", time.Duration(w.now-w.start)*time.Millisecond)+fmt.Sprintf(format, args...))
	}
}

// kindClass is the device class PolicyExclusivePerKind keeps one device of
// (docs/design.md §8): iOS and Android share "mobile".
func kindClass(k core.Kind) core.Kind {
	if k == core.KindAndroid {
		return core.KindIOS
	}
	return k
}
