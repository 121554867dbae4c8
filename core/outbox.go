package core

import (
	"strconv"
	"strings"
	"time"
)

// The outbox (docs/design.md §7): the script that decides a change or a
// kick records it in its bucket's outbox in the same atomic step
// (lua/userlib.lua's emit) and returns its ID; the plan hands it to the
// driver to publish (and appends it to the change log), the driver then
// acknowledges it (lua/outbox_ack.lua), and a sweep delivers again what
// stayed unacknowledged past RedeliverAfter: a lost reply, a crashed
// process or a failed publish delays an event, never drops it. Every
// message carries the ID, and readers drop repeats (Feed, ChangeLogAfter).

// RedeliverAfter is how long an event may stay in its outbox before a user
// sweep delivers it again: long enough for the engine that decided it to
// publish and acknowledge it first.
const RedeliverAfter = 10 * time.Second

// delivery is one event a plan's scripts decided, to be delivered.
type delivery struct {
	id     string // the outbox ID: "uB.EPOCH.SEQ"
	change Change
	kick   *Kick
	loss   *Loss
}

// deliver adds the events of changes and kicks, with their outbox IDs (""
// for one that has none), to the plan's deliveries.
func (m *machine) deliver(changes []Change, changeIDs []string, kicks []Kick, kickIDs []string) {
	for i, c := range changes {
		m.out = append(m.out, delivery{id: changeIDs[i], change: c})
	}
	for i := range kicks {
		m.out = append(m.out, delivery{id: kickIDs[i], kick: &kicks[i]})
	}
}

// found takes what a user script of bucket b reports last in its reply
// (lua/userlib.lua's layout): "-" when it did not look at the bucket's
// meta; "" when meta was there or it made it; else a data loss it found,
// the healing's end US the loss's outbox ID, which becomes a delivery of
// m. From a bucket's meta on, the planner takes its absence for a loss.
func (p *planner) found(m *machine, b uint32, v Value, now int64) error {
	s, err := v.asString()
	if err != nil {
		return replyErr("loss: %s", v)
	}
	if s == "-" {
		return nil
	}
	p.seen.mark(b)
	if s == "" {
		return nil
	}
	until, id, ok := strings.Cut(s, "\x1f")
	ms, err := strconv.ParseInt(until, 10, 64)
	if !ok || err != nil || id == "" {
		return replyErr("loss: %q", s)
	}
	m.out = append(m.out, delivery{id: id, loss: &Loss{At: msTime(now), Until: msTime(ms)}})
	return nil
}

// outboxBucket returns the user bucket and the epoch and sequence number
// of an outbox ID.
func outboxBucket(id string) (bucket uint32, epoch, seq string, ok bool) {
	tag, rest, ok1 := strings.Cut(id, ".")
	epoch, seq, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || len(tag) < 2 || tag[0] != 'u' {
		return 0, "", "", false
	}
	b, err := strconv.ParseUint(tag[1:], 10, 32)
	return uint32(b), epoch, seq, err == nil
}

// outboxCalls are the calls of lua/outbox_ack.lua that deliver pubs: each
// publishes the messages of a bucket's events that have a channel, then
// acknowledges those events, in calls of one bucket and epoch of at most
// about callMicros, with their estimated costs. A Publication whose ID no
// outbox issued is left out, in rest: its driver publishes it alone.
func (p *planner) outboxCalls(pubs []Publication) (calls []Call, costs []int, rest []Publication) {
	type event struct {
		pub *Publication // nil: acknowledged only
		seq string
	}
	type group struct {
		key, epoch string
		events     []event
	}
	var groups []*group
	index := map[string]*group{}
	for i := range pubs {
		pub := &pubs[i]
		b, epoch, seq, ok := outboxBucket(pub.ID)
		if !ok || int(b) >= len(p.settings.users) {
			if pub.Channel != "" {
				rest = append(rest, *pub)
			}
			continue
		}
		key := p.settings.users[b].outbox
		g := index[key+" "+epoch]
		if g == nil {
			g = &group{key: key, epoch: epoch}
			index[key+" "+epoch] = g
			groups = append(groups, g)
		}
		ev := event{seq: seq}
		if pub.Channel != "" {
			ev.pub = pub
		}
		g.events = append(g.events, ev)
	}
	for _, g := range groups {
		// an event's message and its acknowledgement go in the same call
		for from := 0; from < len(g.events); {
			to, cost := from, 0
			for to < len(g.events) {
				c := ackMicros
				if g.events[to].pub != nil {
					c += publishMicros
				}
				if to > from && cost+c > callMicros {
					break
				}
				cost += c
				to++
			}
			args := make([]string, 0, 1+3*(to-from))
			args = append(args, g.epoch)
			for _, ev := range g.events[from:to] {
				if ev.pub != nil {
					args = append(args, ev.seq, ev.pub.Channel, string(ev.pub.Payload))
				} else {
					args = append(args, ev.seq, "", "")
				}
			}
			calls = append(calls, Call{SHA: p.scripts.outboxAck.sha, Keys: []string{g.key}, Args: args})
			costs = append(costs, cost)
			from = to
		}
	}
	return calls, costs, rest
}

// deliverPlan is the plan of a delivery's calls (outboxCalls): it ends
// well whatever they return, keeping a failure in lost.
type deliverPlan struct {
	plan plan[struct{}]
	lost error
}

func (*deliverPlan) next([]Value) (*round, error) { return nil, nil }

func (d *deliverPlan) failed(err error) (*round, error) {
	d.lost = err
	return nil, nil
}

// ack returns the plan acknowledging delivered events by their outbox IDs
// (Publication.ID): a driver that publishes a plan's messages itself (a
// WebAssembly host) runs it once they are out. IDs it cannot read are
// ignored; acknowledging an event twice is harmless.
func (p *planner) ack(now string, ids []string) *plan[struct{}] {
	pubs := make([]Publication, len(ids))
	for i, id := range ids {
		pubs[i].ID = id
	}
	calls, costs, _ := p.outboxCalls(pubs)
	if len(calls) == 0 {
		return p.newUnitPlan(now, nil)
	}
	return p.newUnitPlan(now, &round{op: "outbox ack", calls: calls, costs: costs})
}

// decodeOutbox reads the undelivered events a sweep step returned (ID,
// entry, ...; lua/sweep_users.lua).
func decodeOutbox(v Value) ([]delivery, error) {
	items, err := v.asArray(-1)
	if err != nil || len(items)%2 != 0 {
		return nil, replyErr("outbox: %s", v)
	}
	var out []delivery
	for i := 0; i < len(items); i += 2 {
		id, err1 := items[i].asString()
		raw, err2 := items[i+1].asString()
		if err1 != nil || err2 != nil {
			return nil, replyErr("outbox: %s", v)
		}
		d, ok := parseOutboxEntry(id, raw)
		if !ok {
			return nil, replyErr("outbox entry %s: %q", id, raw)
		}
		out = append(out, d)
	}
	return out, nil
}

// parseOutboxEntry reads an entry of lua/userlib.lua's emit: "c" user from
// to at, "k" user device kind gateway at, or "l" until at, joined by US.
func parseOutboxEntry(id, raw string) (delivery, bool) {
	f := strings.Split(raw, "\x1f")
	num := func(s string, limit int) (int64, bool) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && (limit < 0 || inRange(n, limit))
	}
	switch {
	case len(f) == 5 && f[0] == "c":
		from, ok1 := num(f[2], len(statusNames))
		to, ok2 := num(f[3], len(statusNames))
		at, ok3 := num(f[4], -1)
		if !ok1 || !ok2 || !ok3 {
			return delivery{}, false
		}
		return delivery{id: id, change: Change{User: f[1], From: Status(from), To: Status(to), At: msTime(at)}}, true
	case len(f) == 6 && f[0] == "k":
		kind, ok1 := num(f[3], len(kindNames))
		at, ok2 := num(f[5], -1)
		if !ok1 || !ok2 {
			return delivery{}, false
		}
		return delivery{id: id, kick: &Kick{User: f[1], Device: f[2], Kind: Kind(kind), Gateway: f[4], At: msTime(at)}}, true
	case len(f) == 3 && f[0] == "l":
		until, ok1 := num(f[1], -1)
		at, ok2 := num(f[2], -1)
		if !ok1 || !ok2 {
			return delivery{}, false
		}
		return delivery{id: id, loss: &Loss{At: msTime(at), Until: msTime(until)}}, true
	}
	return delivery{}, false
}
