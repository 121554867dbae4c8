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
	kind evKind
	gen  uint32
	id   int32
}

// exp draws an exponential duration of the given mean, in ms (at least 1).
func (w *world) exp(mean time.Duration) int64 {
	return max(1, int64(w.rng.ExpFloat64()*float64(mean.Milliseconds())))
}

// at schedules ev at the first tick at or after t (and after the current one).
func (w *world) at(t int64, ev event) {
	k := int((t - w.start + w.tick - 1) / w.tick)
	if k <= w.k {
		k = w.k + 1
	}
	if k <= w.ticks {
		w.wheel[k] = append(w.wheel[k], ev)
	}
}

// nextBeat schedules a device's next heartbeat, I·(1−U·jitter) from now.
func (w *world) nextBeat(d *device) {
	iv := float64(d.iv) * (1 - w.rng.Float64()*w.mix.Jitter)
	w.at(w.now+int64(iv), event{kind: evBeat, gen: d.beatGen, id: d.idx})
}

func (w *world) beatOp(d *device, active bool) op {
	return op{kind: opBeat, dev: d.idx, user: d.user, hb: core.Heartbeat{User: w.users[d.user].id, Device: d.id,
		Kind: d.kind, Gateway: w.edges[d.edge].name, Token: d.token, Active: active, Background: d.bg}}
}

func mobile(k core.Kind) bool { return k == core.KindIOS || k == core.KindAndroid }

// handle carries out one event: the client's side of it, and the
// operations it sends.
func (w *world) handle(ev event) {
	m := w.mix
	if ev.kind == evManual {
		w.toggleDND(ev.id)
		return
	}
	if ev.kind == evTouch || ev.kind == evWatchEnd {
		w.watchEvent(ev)
		return
	}
	d := &w.devs[ev.id]
	switch ev.kind {
	case evStart:
		if d.online {
			return
		}
		d.online, d.bg, d.paused, d.busy = true, false, false, true
		d.busyEnd = w.now + w.exp(m.Busy)
		d.gen++
		d.beatGen++
		d.edge = w.liveEdge()
		if w.rng.Float64() < m.Implicit {
			d.token = "" // the first heartbeat logs in
			w.send(d.edge, w.beatOp(d, true))
		} else {
			o := op{kind: opLogin, dev: d.idx, user: d.user}
			if w.rng.Float64() < m.Exclusive {
				p := core.PolicyExclusive
				o.policy = &p
			}
			w.send(d.edge, o)
		}
		w.nextBeat(d)
		w.at(w.now+w.exp(m.Session), event{kind: evEnd, gen: d.gen, id: d.idx})
		if mobile(d.kind) {
			w.at(w.now+w.exp(m.Foreground), event{kind: evBackground, gen: d.beatGen, id: d.idx})
		}
	case evBeat:
		if ev.gen != d.beatGen || !d.online || d.bg || d.paused {
			return
		}
		if w.now >= d.busyEnd {
			d.busy = !d.busy
			if d.busy {
				d.busyEnd = w.now + w.exp(m.Busy)
			} else {
				d.busyEnd = w.now + w.exp(m.Idle)
			}
		}
		switch r := w.rng.Float64(); {
		case r < m.Switch:
			// A network switch: the gateway sees the connection close; the
			// client reconnects, maybe to another edge, within seconds.
			w.send(d.edge, op{kind: opDisconnect, dev: d.idx, user: d.user, hb: core.Heartbeat{Token: d.token}})
			d.paused = true
			d.beatGen++
			w.stats.Switches++
			w.at(w.now+1000+w.rng.Int64N(max(1, m.SwitchDelay.Milliseconds()-1000)), event{kind: evReconnect, gen: d.gen, id: d.idx})
			return
		case r < m.Switch+m.Loss:
			w.stats.Lost++
		default:
			w.send(d.edge, w.beatOp(d, d.busy))
		}
		w.nextBeat(d)
	case evBackground:
		if ev.gen != d.beatGen || !d.online || d.bg || d.paused {
			return
		}
		d.bg = true
		w.send(d.edge, w.beatOp(d, false))
		d.beatGen++
		w.at(w.now+w.exp(m.Background), event{kind: evForeground, gen: d.beatGen, id: d.idx})
	case evForeground:
		if ev.gen != d.beatGen || !d.online || !d.bg {
			return
		}
		d.bg, d.busy = false, true
		d.busyEnd = w.now + w.exp(m.Busy)
		if d.edge < 0 || !w.edges[d.edge].up {
			d.edge = w.liveEdge()
		}
		w.send(d.edge, w.beatOp(d, true))
		w.nextBeat(d)
		w.at(w.now+w.exp(m.Foreground), event{kind: evBackground, gen: d.beatGen, id: d.idx})
	case evReconnect:
		if ev.gen != d.gen || !d.online || !d.paused {
			return
		}
		d.paused = false
		d.beatGen++
		d.edge = w.liveEdge()
		w.send(d.edge, w.beatOp(d, d.busy))
		w.nextBeat(d)
		if mobile(d.kind) {
			w.at(w.now+w.exp(m.Foreground), event{kind: evBackground, gen: d.beatGen, id: d.idx})
		}
	case evEnd:
		if ev.gen != d.gen || !d.online {
			return
		}
		edgeIdx := d.edge
		if edgeIdx < 0 || !w.edges[edgeIdx].up {
			edgeIdx = w.liveEdge()
		}
		switch r := w.rng.Float64(); {
		case d.paused:
			// still reconnecting: the session just ends
		case r < m.Logout:
			w.send(edgeIdx, op{kind: opLogout, dev: d.idx, user: d.user, hb: core.Heartbeat{Token: d.token}})
		case r < m.Logout+m.Disconnect:
			w.send(edgeIdx, op{kind: opDisconnect, dev: d.idx, user: d.user, hb: core.Heartbeat{Token: d.token}})
		default:
			w.stats.Vanished++ // no goodbye: the session expires
		}
		w.offline(d)
	case evStale:
		// A kicked client, not yet told, heartbeats with its old token.
		edgeIdx := w.liveEdge()
		o := op{kind: opBeat, dev: d.idx, user: d.user, stale: true, hb: core.Heartbeat{User: w.users[d.user].id,
			Device: d.id, Kind: d.kind, Gateway: w.edges[edgeIdx].name, Token: d.stale, Active: true}}
		w.send(edgeIdx, o)
		w.at(w.now+w.exp(w.mix.Gap), event{kind: evStart, id: d.idx})
	}
}

// offline ends a device's session on the client's side and schedules the
// next one.
func (w *world) offline(d *device) {
	d.online, d.paused, d.bg = false, false, false
	d.gen++
	d.beatGen++
	w.at(w.now+w.exp(w.mix.Gap), event{kind: evStart, id: d.idx})
}

func (w *world) toggleDND(ui int32) {
	u := &w.users[ui]
	next := core.ManualDND
	wait := w.exp(w.mix.DNDFor)
	if u.plan == core.ManualDND {
		next, wait = core.ManualNone, w.exp(time.Hour)
	}
	u.plan = next
	w.send(w.liveEdge(), op{kind: opManual, user: ui, manual: next})
	w.at(w.now+wait, event{kind: evManual, id: ui})
}
