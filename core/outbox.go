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

// ackCalls are the calls of lua/outbox_ack.lua that acknowledge the
// events of pubs: one per bucket and epoch and ackChunk events, with
// their estimated costs.
func (p *planner) ackCalls(ids []string) ([]Call, []int) {
	var calls []Call
	index := map[string]int{}
	for _, id := range ids {
		b, epoch, seq, ok := outboxBucket(id)
		if !ok || int(b) >= len(p.settings.users) {
			continue
		}
		key := p.settings.users[b].outbox
		at, seen := index[key+" "+epoch]
		if !seen || len(calls[at].Args) > ackChunk {
			at = len(calls)
			index[key+" "+epoch] = at
			calls = append(calls, Call{SHA: p.scripts.outboxAck.sha, Keys: []string{key}, Args: []string{epoch}})
		}
		calls[at].Args = append(calls[at].Args, seq)
	}
	costs := make([]int, len(calls))
	for i, c := range calls {
		costs[i] = (len(c.Args) - 1) * ackMicros
	}
	return calls, costs
}

// Ack plans the acknowledgement of delivered events by their outbox IDs
// (Publication.ID): a driver that publishes a plan's messages itself (a
// WebAssembly host) runs it once they are out. IDs it cannot read are
// ignored; acknowledging an event twice is harmless.
func (pl *Planner) ack(now string, ids []string) *Plan[struct{}] {
	p := pl.p
	plan := newPlan[struct{}](p, now)
	m := &plan.m
	calls, costs := p.ackCalls(ids)
	if len(calls) == 0 {
		m.settle(nil, nil)
		return plan
	}
	m.settle(&round{op: "outbox ack", calls: calls, costs: costs, next: func([]Value) (*round, error) { return nil, nil }}, nil)
	return plan
}

// decodeOutbox reads the undelivered events a sweep step returned (ID,
// entry, ...; lua/sweep_users.lua).
func decodeOutbox(v Value) ([]delivery, error) {
	items, err := v.AsArray(-1)
	if err != nil || len(items)%2 != 0 {
		return nil, replyErr("outbox: %s", v)
	}
	var out []delivery
	for i := 0; i < len(items); i += 2 {
		id, err1 := items[i].AsString()
		raw, err2 := items[i+1].AsString()
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
// to at, or "k" user device kind gateway at, joined by US.
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
	}
	return delivery{}, false
}
