package sim

// startWatching lets online users start watching videos: each user online
// in the foreground starts with probability Watch per minute.
func (w *world) startWatching() {
	if len(w.videos) == 0 || w.mix.Watch == 0 {
		return
	}
	expected := float64(len(w.users)) * w.mix.Watch * float64(w.tickMS) / 60000
	n := int(expected)
	if w.rng.Float64() < expected-float64(n) {
		n++
	}
	for ; n > 0; n-- {
		ui := int32(w.rng.IntN(len(w.users)))
		u := &w.users[ui]
		if u.watching >= 0 {
			continue
		}
		via := int32(-1)
		for _, di := range u.devices {
			if d := &w.devices[di]; d.online && !d.background && !d.paused {
				via = di
				break
			}
		}
		if via < 0 {
			continue
		}
		u.watching, u.watchDevice = int32(pick(w.rng, w.videoWeights)), via
		u.watchGeneration++
		w.stats.Watches++
		w.send(w.devices[via].edge, op{kind: opTouch, user: ui, video: u.watching})
		w.at(w.now+w.touchEvery(), event{kind: evTouch, generation: u.watchGeneration, index: ui})
		w.at(w.now+w.exp(w.mix.WatchFor), event{kind: evWatchEnd, generation: u.watchGeneration, index: ui})
	}
}

func (w *world) touchEvery() int64 {
	return int64(30_000 * (1 - 0.1*w.rng.Float64()))
}

func (w *world) watchEvent(ev event) {
	u := &w.users[ev.index]
	if ev.generation != u.watchGeneration || u.watching < 0 {
		return
	}
	d := &w.devices[u.watchDevice]
	gone := !d.online || d.background || d.paused
	switch {
	case ev.kind == evTouch && !gone:
		w.send(d.edge, op{kind: opTouch, user: ev.index, video: u.watching})
		w.at(w.now+w.touchEvery(), event{kind: evTouch, generation: u.watchGeneration, index: ev.index})
		return
	case ev.kind == evWatchEnd && !gone && w.rng.Float64() < w.mix.Leave:
		w.send(d.edge, op{kind: opLeave, user: ev.index, video: u.watching})
	}
	// The viewer stops: left, or the device went away (the window ends it).
	u.watching, u.watchDevice = -1, -1
	u.watchGeneration++
}
