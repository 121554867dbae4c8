package sim

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/presencekit/presence/core"
)

// flush sends an edge's operations of this tick, in order: runs of
// heartbeats as one HeartbeatBatch, runs of touches as one TouchBatch.
// Each operation is applied to the truth as it is sent, and its outcome
// checked against the truth's expectation.
func (w *world) flush(e *edge) error {
	q := e.queue
	e.queue = e.queue[:0]
	if !e.up {
		return nil
	}
	for i := 0; i < len(q); {
		j := i + 1
		for j < len(q) && q[j].kind == q[i].kind && (q[i].kind == opBeat || q[i].kind == opTouch) && j-i < core.MaxBatch {
			j++
		}
		var err error
		switch q[i].kind {
		case opBeat:
			err = w.beats(e, q[i:j])
		case opTouch:
			err = w.touches(e, q[i:j])
		default:
			err = w.single(e, q[i])
		}
		if err != nil {
			return fmt.Errorf("sim: %s at t=%s: %w", e.name, time.Duration(w.now-w.start)*time.Millisecond, err)
		}
		i = j
	}
	return nil
}

func (w *world) beats(e *edge, ops []op) error {
	beats := make([]core.Heartbeat, len(ops))
	for i, o := range ops {
		beats[i] = o.hb
	}
	acks, err := e.p.HeartbeatBatch(w.ctx, beats)
	if err != nil {
		return err
	}
	w.stats.Batches++
	for i, o := range ops {
		d := &w.devs[o.dev]
		u := &w.users[d.user]
		w.advance(u, w.now)
		want := w.beat(d, o.hb, w.now)
		ack := acks[i]
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
			if d.rec.token == "" {
				d.rec.token = ack.Token // an implicit login: the engine issues it
			}
			if !o.stale && d.online {
				d.token = ack.Token
			}
		}
		w.settle(u, w.now)
		w.changes(ack.Changes)
	}
	return nil
}

func (w *world) touches(e *edge, ops []op) error {
	ts := make([]core.ScopeTouch, len(ops))
	for i, o := range ops {
		ts[i] = core.ScopeTouch{Scope: core.Scope{Class: videoClass, ID: w.videos[o.video].id}, Member: w.users[o.user].id}
	}
	if err := e.p.TouchBatch(w.ctx, ts); err != nil {
		return err
	}
	for _, o := range ops {
		w.videos[o.video].members[o.user] = w.now
	}
	w.stats.Touches += len(ops)
	return nil
}

// single sends one operation other than a heartbeat or a touch.
func (w *world) single(e *edge, o op) error {
	u := &w.users[o.user]
	w.advance(u, w.now)
	switch o.kind {
	case opLogin:
		d := &w.devs[o.dev]
		l := core.Login{User: u.id, Device: d.id, Kind: d.kind, Gateway: e.name, Policy: o.policy}
		res, err := e.p.Login(w.ctx, l)
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
			wantIDs = append(wantIDs, w.devs[di].id)
		}
		for _, k := range res.Kicked {
			gotIDs = append(gotIDs, k.Device)
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
			if di == d.idx {
				continue // its own earlier session, replaced
			}
			k := &w.devs[di]
			if k.online {
				// The kicked client is not told at once: it heartbeats once
				// more with its old token, which must be refused.
				k.stale = k.token
				k.online, k.paused, k.bg = false, false, false
				k.gen++
				k.beatGen++
				w.at(w.now+1000+w.rng.Int64N(2000), event{kind: evStale, id: k.idx})
			}
		}
		w.settle(u, w.now)
		w.changes(res.Changes)
	case opLogout, opDisconnect:
		d := &w.devs[o.dev]
		end := e.p.Disconnect
		if o.kind == opLogout {
			end = e.p.Logout
		}
		res, err := end(w.ctx, u.id, d.id, o.hb.Token)
		wantRemoved, wantRefused := w.end(d, o.hb.Token, o.kind == opLogout, w.now)
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
		cs, err := e.p.SetManual(w.ctx, u.id, o.manual, 0)
		if err != nil {
			return err
		}
		u.manual = o.manual
		w.stats.Manual++
		w.settle(u, w.now)
		w.changes(cs)
	case opLeave:
		v := &w.videos[o.video]
		_, err := e.p.Leave(w.ctx, core.Scope{Class: videoClass, ID: v.id}, u.id)
		if err != nil {
			return err
		}
		delete(v.members, o.user)
		w.stats.Leaves++
	}
	return nil
}

// changes takes the status changes the engine published: each must follow
// the user's previous one.
func (w *world) changes(cs []core.Change) {
	for _, c := range cs {
		ui, ok := w.byID[c.User]
		if !ok {
			w.violation("change of unknown user %q", c.User)
			continue
		}
		u := &w.users[ui]
		if c.From != u.pub || c.From == c.To {
			w.violation("change of %s %s→%s, but its last published status is %s", u.id, c.From, c.To, u.pub)
		}
		u.pub = c.To
		w.stats.Events++
	}
}
