package sim

import (
	"time"

	"github.com/presencekit/presence/core"
)

type evKind uint8

const (
	evStart evKind = iota
	evBeat
	evBackground
	evForeground
	evEnd
	evReconnect
	evStale
	evManual
	evTouch
	evWatchEnd
)

// event is something scheduled for a tick.
type event struct {
	kind       evKind
	generation uint32 // the generation it was scheduled in: stale once the device's or user's moves on
	index      int32  // the device's index; the user's for evManual, evTouch and evWatchEnd
}

// exp draws an exponential duration of the given mean, in ms (at least 1).
func (w *world) exp(mean time.Duration) int64 {
	return max(1, int64(w.rng.ExpFloat64()*float64(mean.Milliseconds())))
}

// at schedules ev at the first tick at or after t (and after the current one).
func (w *world) at(t int64, ev event) {
	due := int((t - w.start + w.tickMS - 1) / w.tickMS)
	if due <= w.currentTick {
		due = w.currentTick + 1
	}
	if due <= w.tickCount {
		w.wheel[due] = append(w.wheel[due], ev)
	}
}

// nextBeat schedules a device's next heartbeat, I·(1−U·jitter) from now.
func (w *world) nextBeat(d *device) {
	wait := float64(d.beatInterval) * (1 - w.rng.Float64()*w.mix.Jitter)
	w.at(w.now+int64(wait), event{kind: evBeat, generation: d.beatGeneration, index: d.index})
}

func (w *world) beatOp(d *device, active bool) op {
	return op{kind: opBeat, device: d.index, user: d.user, heartbeat: core.Heartbeat{User: w.users[d.user].id, Device: d.id,
		Kind: d.kind, Gateway: w.edges[d.edge].name, Token: d.token, Active: active, Background: d.background}}
}

func mobile(k core.Kind) bool { return k == core.KindIOS || k == core.KindAndroid }

// handle carries out one event: the client's side of it, and the
// operations it sends.
func (w *world) handle(ev event) {
	mix := w.mix
	if ev.kind == evManual {
		w.toggleDND(ev.index)
		return
	}
	if ev.kind == evTouch || ev.kind == evWatchEnd {
		w.watchEvent(ev)
		return
	}
	d := &w.devices[ev.index]
	switch ev.kind {
	case evStart:
		if d.online {
			return
		}
		d.online, d.background, d.paused, d.busy = true, false, false, true
		d.busyEnd = w.now + w.exp(mix.Busy)
		d.sessionGeneration++
		d.beatGeneration++
		d.edge = w.liveEdge()
		if w.rng.Float64() < mix.Implicit {
			d.token = "" // the first heartbeat logs in
			w.send(d.edge, w.beatOp(d, true))
		} else {
			o := op{kind: opLogin, device: d.index, user: d.user}
			if w.rng.Float64() < mix.Exclusive {
				p := core.PolicyExclusive
				o.policy = &p
			}
			w.send(d.edge, o)
		}
		w.nextBeat(d)
		w.at(w.now+w.exp(mix.Session), event{kind: evEnd, generation: d.sessionGeneration, index: d.index})
		if mobile(d.kind) {
			w.at(w.now+w.exp(mix.Foreground), event{kind: evBackground, generation: d.beatGeneration, index: d.index})
		}
	case evBeat:
		if ev.generation != d.beatGeneration || !d.online || d.background || d.paused {
			return
		}
		if w.now >= d.busyEnd {
			d.busy = !d.busy
			if d.busy {
				d.busyEnd = w.now + w.exp(mix.Busy)
			} else {
				d.busyEnd = w.now + w.exp(mix.Idle)
			}
		}
		switch r := w.rng.Float64(); {
		case r < mix.Switch:
			// A network switch: the gateway sees the connection close; the
			// client reconnects, maybe to another edge, within seconds.
			w.send(d.edge, op{kind: opDisconnect, device: d.index, user: d.user, heartbeat: core.Heartbeat{Token: d.token}})
			d.paused = true
			d.beatGeneration++
			w.stats.Switches++
			w.at(w.now+1000+w.rng.Int64N(max(1, mix.SwitchDelay.Milliseconds()-1000)), event{kind: evReconnect, generation: d.sessionGeneration, index: d.index})
			return
		case r < mix.Switch+mix.Loss:
			w.stats.Lost++
		default:
			w.send(d.edge, w.beatOp(d, d.busy))
		}
		w.nextBeat(d)
	case evBackground:
		if ev.generation != d.beatGeneration || !d.online || d.background || d.paused {
			return
		}
		d.background = true
		w.send(d.edge, w.beatOp(d, false))
		d.beatGeneration++
		w.at(w.now+w.exp(mix.Background), event{kind: evForeground, generation: d.beatGeneration, index: d.index})
	case evForeground:
		if ev.generation != d.beatGeneration || !d.online || !d.background {
			return
		}
		d.background, d.busy = false, true
		d.busyEnd = w.now + w.exp(mix.Busy)
		if d.edge < 0 || !w.edges[d.edge].up {
			d.edge = w.liveEdge()
		}
		w.send(d.edge, w.beatOp(d, true))
		w.nextBeat(d)
		w.at(w.now+w.exp(mix.Foreground), event{kind: evBackground, generation: d.beatGeneration, index: d.index})
	case evReconnect:
		if ev.generation != d.sessionGeneration || !d.online || !d.paused {
			return
		}
		d.paused = false
		d.beatGeneration++
		d.edge = w.liveEdge()
		w.send(d.edge, w.beatOp(d, d.busy))
		w.nextBeat(d)
		if mobile(d.kind) {
			w.at(w.now+w.exp(mix.Foreground), event{kind: evBackground, generation: d.beatGeneration, index: d.index})
		}
	case evEnd:
		if ev.generation != d.sessionGeneration || !d.online {
			return
		}
		edgeIdx := d.edge
		if edgeIdx < 0 || !w.edges[edgeIdx].up {
			edgeIdx = w.liveEdge()
		}
		switch r := w.rng.Float64(); {
		case d.paused:
			// still reconnecting: the session just ends
		case r < mix.Logout:
			w.send(edgeIdx, op{kind: opLogout, device: d.index, user: d.user, heartbeat: core.Heartbeat{Token: d.token}})
		case r < mix.Logout+mix.Disconnect:
			w.send(edgeIdx, op{kind: opDisconnect, device: d.index, user: d.user, heartbeat: core.Heartbeat{Token: d.token}})
		default:
			w.stats.Vanished++ // no goodbye: the session expires
		}
		w.offline(d)
	case evStale:
		// A kicked client, not yet told, heartbeats with its old token.
		edgeIdx := w.liveEdge()
		o := op{kind: opBeat, device: d.index, user: d.user, stale: true, heartbeat: core.Heartbeat{User: w.users[d.user].id,
			Device: d.id, Kind: d.kind, Gateway: w.edges[edgeIdx].name, Token: d.staleToken, Active: true}}
		w.send(edgeIdx, o)
		w.at(w.now+w.exp(w.mix.Gap), event{kind: evStart, index: d.index})
	}
}

// offline ends a device's session on the client's side and schedules the
// next one.
func (w *world) offline(d *device) {
	d.online, d.paused, d.background = false, false, false
	d.sessionGeneration++
	d.beatGeneration++
	w.at(w.now+w.exp(w.mix.Gap), event{kind: evStart, index: d.index})
}

func (w *world) toggleDND(userIndex int32) {
	u := &w.users[userIndex]
	next := core.ManualDND
	wait := w.exp(w.mix.DNDFor)
	if u.requestedManual == core.ManualDND {
		next, wait = core.ManualNone, w.exp(time.Hour)
	}
	u.requestedManual = next
	w.send(w.liveEdge(), op{kind: opManual, user: userIndex, manual: next})
	w.at(w.now+wait, event{kind: evManual, index: userIndex})
}
