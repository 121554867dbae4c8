package sim

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// flush sends the operations of this tick, as gateways would. First the
// logins, logouts, disconnects, manual changes and leaves, one by one,
// edge by edge, in order. Then every edge, at once (the edges run in
// parallel, as separate nodes do), sends all its heartbeats in one
// HeartbeatBatch and all its touches in one TouchBatch. Each operation is
// applied to the truth, and its outcome checked against the truth's
// expectation: the singles in the order they were sent; the batches after
// they all returned, which is sound because a device sends through one
// edge only and the beats of one instant commute (they may publish a
// user's change from either edge: changes are chained in whichever order
// fits).
func (w *world) flush() error {
	type batch struct {
		edge    *edge
		beats   []op
		touches []op
		acks    [][]core.Ack
		err     error
	}
	var batches []*batch
	for _, e := range w.edges {
		q := e.queue
		e.queue = e.queue[:0]
		if !e.up || len(q) == 0 {
			continue
		}
		b := &batch{edge: e}
		for _, o := range q {
			switch o.kind {
			case opBeat:
				b.beats = append(b.beats, o)
			case opTouch:
				b.touches = append(b.touches, o)
			default:
				if err := w.single(e, o); err != nil {
					return w.opErr(e, err)
				}
			}
		}
		if len(b.beats)+len(b.touches) > 0 {
			batches = append(batches, b)
		}
	}
	// Each batch call gets a ticket: the edges run at once, but reach
	// Redis in ticket order, which keeps a run the same every time.
	ticket := w.sequencer.turn()
	type call struct {
		batch   *batch
		ticket  int
		beats   []op
		touches []op
	}
	var callsByBatch [][]call // per batch, in order
	for _, b := range batches {
		var calls []call
		for lo := 0; lo < len(b.beats); lo += core.MaxBatch {
			calls = append(calls, call{batch: b, ticket: ticket, beats: b.beats[lo:min(lo+core.MaxBatch, len(b.beats))]})
			ticket++
		}
		for lo := 0; lo < len(b.touches); lo += core.MaxBatch {
			calls = append(calls, call{batch: b, ticket: ticket, touches: b.touches[lo:min(lo+core.MaxBatch, len(b.touches))]})
			ticket++
		}
		callsByBatch = append(callsByBatch, calls)
	}
	var wg sync.WaitGroup
	for _, calls := range callsByBatch {
		wg.Go(func() {
			for _, c := range calls {
				c.batch.edge.store.sequenced(c.ticket, func() {
					if c.batch.err != nil {
						return
					}
					if c.beats != nil {
						beats := make([]core.Heartbeat, len(c.beats))
						for i, o := range c.beats {
							beats[i] = o.heartbeat
						}
						var acks []core.Ack
						acks, c.batch.err = opdo.Do[[]core.Ack](w.ctx, c.batch.edge.engine, core.HeartbeatBatch(beats))
						c.batch.acks = append(c.batch.acks, acks)
						return
					}
					touches := make([]core.ScopeTouch, len(c.touches))
					for i, o := range c.touches {
						touches[i] = core.ScopeTouch{Scope: core.Scope{Class: videoClass, ID: w.videos[o.video].id}, Member: w.users[o.user].id}
					}
					c.batch.err = opdo.Err(w.ctx, c.batch.edge.engine, core.TouchBatch(touches))
				})
			}
		})
	}
	wg.Wait()
	var touched []int32
	var changes []core.Change
	for _, b := range batches {
		if b.err != nil {
			return w.opErr(b.edge, b.err)
		}
		for i, acks := range b.acks {
			touched, changes = w.beats(b.beats[i*core.MaxBatch:], acks, touched, changes)
		}
		w.stats.Batches += len(b.acks)
		for _, o := range b.touches {
			w.videos[o.video].lastTouch[o.user] = w.now
		}
		w.stats.Touches += len(b.touches)
	}
	for _, ui := range touched {
		u := &w.users[ui]
		w.settle(u, w.now)
		u.inBatch = false
	}
	w.chain(changes)
	return nil
}

func (w *world) opErr(e *edge, err error) error {
	return fmt.Errorf("sim: %s at t=%s: %w", e.name, time.Duration(w.now-w.start)*time.Millisecond, err)
}

// beats applies one batch of heartbeats to the truth and checks the acks;
// it returns the users touched and the changes published, to be settled
// and chained once every edge's batch is in.
func (w *world) beats(ops []op, acks []core.Ack, touched []int32, changes []core.Change) ([]int32, []core.Change) {
	for i, ack := range acks {
		o := ops[i]
		d := &w.devices[o.device]
		u := &w.users[d.user]
		if !u.inBatch {
			u.inBatch = true
			w.advance(u, w.now-1) // the truth up to just before this instant's beats
			touched = append(touched, d.user)
		}
		want := w.beat(d, o.heartbeat, w.now)
		w.stats.Beats++
		if o.stale {
			w.stats.StaleSent++
		}
		if want.refused {
			w.stats.RefusedExpected++
		}
		switch {
		case ack.Err != nil && !(want.refused && ack.Err == core.ErrSessionReplaced):
			w.violation("heartbeat of %s/%s: engine refused (%v), truth accepts", u.id, d.id, ack.Err)
		case ack.Err == nil && want.refused:
			w.violation("heartbeat of %s/%s: engine accepted, truth refuses the superseded token", u.id, d.id)
		case ack.Err == nil && want.token != "" && ack.Token != want.token:
			w.violation("heartbeat of %s/%s: token %q in force, truth says %q", u.id, d.id, ack.Token, want.token)
		}
		if ack.Err != nil {
			w.stats.Refused++
		} else {
			if d.record.token == "" {
				d.record.token = ack.Token // an implicit login: the engine issues it
			}
			if !o.stale && d.online {
				d.token = ack.Token
			}
		}
		changes = append(changes, ack.Changes...)
	}
	return touched, changes
}

// chain takes changes published at one instant by operations that may have
// run in any order: each user's are taken in an order in which each
// follows the previous one.
func (w *world) chain(changes []core.Change) {
	if len(changes) <= 1 {
		w.changes(changes)
		return
	}
	byUser := map[string][]core.Change{}
	var order []string
	for _, c := range changes {
		if _, ok := byUser[c.User]; !ok {
			order = append(order, c.User)
		}
		byUser[c.User] = append(byUser[c.User], c)
	}
	for _, id := range order {
		list := byUser[id]
		ui, ok := w.userByID[id]
		for ok && len(list) > 1 {
			j := slices.IndexFunc(list, func(c core.Change) bool { return c.From == w.users[ui].published })
			if j < 0 {
				break
			}
			w.changes(list[j : j+1])
			list = slices.Delete(list, j, j+1)
		}
		w.changes(list)
	}
}

// single sends one operation other than a heartbeat or a touch.
func (w *world) single(e *edge, o op) error {
	u := &w.users[o.user]
	w.advance(u, w.now)
	switch o.kind {
	case opLogin:
		d := &w.devices[o.device]
		login := core.Login{User: u.id, Device: d.id, Kind: d.kind, Gateway: e.name, Policy: o.policy}
		res, err := opdo.Do[core.LoginResult](w.ctx, e.engine, login)
		if err != nil {
			return err
		}
		policy := core.PolicyMulti
		if o.policy != nil {
			policy = *o.policy
		}
		want := w.login(d, policy, false, res.Token, w.now)
		var wantIDs, gotIDs []string
		for _, di := range want {
			wantIDs = append(wantIDs, w.devices[di].id)
		}
		for _, kicked := range res.Kicked {
			gotIDs = append(gotIDs, kicked.Device)
		}
		sort.Strings(wantIDs)
		sort.Strings(gotIDs)
		if !slices.Equal(wantIDs, gotIDs) {
			w.violation("login of %s/%s (%s) kicked %v, truth says %v", u.id, d.id, policy, gotIDs, wantIDs)
		}
		w.stats.Logins++
		w.stats.KicksExpected += len(want)
		w.stats.Kicks += len(res.Kicked)
		if d.online {
			d.token = res.Token
		}
		for _, di := range want {
			if di == d.index {
				continue // its own earlier session, replaced
			}
			kicked := &w.devices[di]
			if kicked.online {
				// The kicked client is not told at once: it heartbeats once
				// more with its old token, which must be refused.
				kicked.staleToken = kicked.token
				kicked.online, kicked.paused, kicked.background = false, false, false
				kicked.sessionGeneration++
				kicked.beatGeneration++
				w.at(w.now+1000+w.rng.Int64N(2000), event{kind: evStale, index: kicked.index})
			}
		}
		w.settle(u, w.now)
		w.changes(res.Changes)
	case opLogout, opDisconnect:
		d := &w.devices[o.device]
		var end core.Op = core.Disconnect{User: u.id, Device: d.id, Token: o.heartbeat.Token}
		if o.kind == opLogout {
			end = core.Logout{User: u.id, Device: d.id, Token: o.heartbeat.Token}
		}
		res, err := opdo.Do[core.Ended](w.ctx, e.engine, end)
		wantRemoved, wantRefused := w.end(d, o.heartbeat.Token, o.kind == opLogout, w.now)
		switch {
		case err != nil && !(wantRefused && err == core.ErrSessionReplaced):
			return err
		case err == nil && wantRefused:
			w.violation("logout/disconnect of %s/%s: engine accepted a superseded token", u.id, d.id)
		case err == nil && res.Removed != wantRemoved:
			w.violation("logout/disconnect of %s/%s: removed=%v, truth says %v", u.id, d.id, res.Removed, wantRemoved)
		}
		w.settle(u, w.now)
		w.changes(res.Changes)
	case opManual:
		changes, err := opdo.Do[[]core.Change](w.ctx, e.engine, core.SetManual{User: u.id, Manual: o.manual})
		if err != nil {
			return err
		}
		u.manual = o.manual
		w.stats.Manual++
		w.settle(u, w.now)
		w.changes(changes)
	case opLeave:
		v := &w.videos[o.video]
		_, err := opdo.Do[bool](w.ctx, e.engine, core.Leave{Scope: core.Scope{Class: videoClass, ID: v.id}, Member: u.id})
		if err != nil {
			return err
		}
		delete(v.lastTouch, o.user)
		w.stats.Leaves++
	}
	return nil
}

// changes takes the status changes the engine published: each must follow
// the user's previous one.
func (w *world) changes(changes []core.Change) {
	for _, c := range changes {
		ui, ok := w.userByID[c.User]
		if !ok {
			w.violation("change of unknown user %q", c.User)
			continue
		}
		u := &w.users[ui]
		if c.From != u.published || c.From == c.To {
			w.violation("change of %s %s→%s, but its last published status is %s", u.id, c.From, c.To, u.published)
		}
		u.published = c.To
		w.stats.Events++
	}
}
