package core

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// changeMessage is the JSON form of a Change: the message the engine
// publishes on ChangeChannel and appends to the change log (docs/design.md
// §7), {"user":…,"from":"ONLINE","to":"AWAY","at":ms,"id":…}, which a Feed
// decodes. Statuses are spelled as Status.String spells them, the instant
// in milliseconds since the epoch. presence serve's API and event streams
// carry the same JSON (cmd/internal/server's Change, held to it by a test).
type changeMessage struct {
	User string `json:"user"`
	From string `json:"from"`
	To   string `json:"to"`
	At   int64  `json:"at"`
	// ID is the change's outbox ID (docs/design.md §7): the same in every
	// delivery of the change, so that a reader drops repeats.
	ID string `json:"id,omitempty"`
}

// kickMessage is the JSON form of a Kick, published on KickChannel(gateway)
// and appended to the change log:
// {"user":…,"device":…,"kind":"ios","gateway":…,"at":ms,"id":…}. Gateway is
// absent for a session that had none (such a kick is logged, never
// published).
type kickMessage struct {
	User    string `json:"user"`
	Device  string `json:"device"`
	Kind    string `json:"kind"`
	Gateway string `json:"gateway,omitempty"`
	At      int64  `json:"at"`
	// ID is the kick's outbox ID, as changeMessage's.
	ID string `json:"id,omitempty"`
}

// lossEvent is the "event" field of the message that announces a Loss on
// ChangeChannel: {"event":"loss","at":ms,"until":ms,"id":…}. A change
// message has no such field.
const lossEvent = "loss"

// lossMessage is the JSON form of a Loss.
type lossMessage struct {
	Event string `json:"event"`
	At    int64  `json:"at"`
	Until int64  `json:"until"`
	ID    string `json:"id,omitempty"`
}

func marshalLoss(l Loss, id string) []byte {
	return lossMessage{Event: lossEvent, At: l.At.UnixMilli(), Until: l.Until.UnixMilli(), ID: id}.appendJSON(nil)
}

// unmarshalChannelMessage decodes a message from ChangeChannel, in one
// pass: a change or a loss, and its outbox ID.
func unmarshalChannelMessage(b []byte) (Event, error) {
	var c changeMessage
	var event string
	var until int64
	if err := c.decodeJSON(b, jsonField{name: "EVENT", str: &event}, jsonField{name: "UNTIL", num: &until}); err != nil {
		return Event{}, replyErr("change message: %v", err)
	}
	switch {
	case event == "":
		ch, err := changeOf(c, b)
		if err != nil {
			return Event{}, err
		}
		return Event{Change: &ch, ID: c.ID}, nil
	case event == lossEvent && until >= c.At:
		return Event{Loss: &Loss{At: time.UnixMilli(c.At), Until: time.UnixMilli(until)}, ID: c.ID}, nil
	}
	return Event{}, replyErr("change message: %s", b)
}

// marshalChange encodes c as the JSON published on ChangeChannel, with its
// outbox ID id ("" none).
func marshalChange(c Change, id string) []byte {
	return changeMessage{User: c.User, From: c.From.String(), To: c.To.String(), At: c.At.UnixMilli(), ID: id}.appendJSON(nil)
}

// marshalKick encodes k as the JSON published on KickChannel(k.Gateway),
// with its outbox ID id ("" none).
func marshalKick(k Kick, id string) []byte {
	return kickMessage{User: k.User, Device: k.Device, Kind: k.Kind.String(), Gateway: k.Gateway, At: k.At.UnixMilli(), ID: id}.appendJSON(nil)
}

// unmarshalChange decodes a message from ChangeChannel and its outbox ID.
func unmarshalChange(b []byte) (Change, string, error) {
	var w changeMessage
	if err := w.decodeJSON(b); err != nil {
		return Change{}, "", replyErr("change message: %v", err)
	}
	c, err := changeOf(w, b)
	return c, w.ID, err
}

// changeOf checks the change message w, decoded from b, and returns its
// change.
func changeOf(w changeMessage, b []byte) (Change, error) {
	from, ok1 := Parse[Status](w.From)
	to, ok2 := Parse[Status](w.To)
	if !ok1 || !ok2 || w.User == "" {
		return Change{}, replyErr("change message: %s", b)
	}
	return Change{User: w.User, From: from, To: to, At: time.UnixMilli(w.At)}, nil
}

// unmarshalKick decodes a message from a kick channel and its outbox ID.
func unmarshalKick(b []byte) (Kick, string, error) {
	var w kickMessage
	if err := w.decodeJSON(b); err != nil {
		return Kick{}, "", replyErr("kick message: %v", err)
	}
	kind, ok := Parse[Kind](w.Kind)
	if !ok || w.User == "" || w.Device == "" {
		return Kick{}, "", replyErr("kick message: %s", b)
	}
	return Kick{User: w.User, Device: w.Device, Kind: kind, Gateway: w.Gateway, At: time.UnixMilli(w.At)}, w.ID, nil
}

// send publishes one message and reports whether it went out.
func (e *Engine) send(ctx context.Context, kind, channel string, msg []byte) bool {
	if err := e.pub.Publish(ctx, channel, msg); err != nil {
		e.metrics.Error("publish", err)
		if e.log != nil {
			e.log.WarnContext(ctx, "presence: publish failed", "channel", channel, "err", err)
		}
		return false
	}
	e.metrics.Published(kind, 1)
	return true
}

// sendBatch publishes pubs in one round trip (BatchPublisher), and
// reports whether all went out.
func (e *Engine) sendBatch(ctx context.Context, pubs []Publication) bool {
	msgs := make([]Message, len(pubs))
	for i, p := range pubs {
		msgs[i] = Message{Channel: p.Channel, Payload: p.Payload}
	}
	if err := e.batchPub.PublishBatch(ctx, msgs); err != nil {
		e.metrics.Error("publish", err)
		if e.log != nil {
			e.log.WarnContext(ctx, "presence: publish failed", "messages", len(msgs), "err", err)
		}
		return false
	}
	sent := map[string]int{}
	for _, p := range pubs {
		sent[p.Kind]++
	}
	for kind, n := range sent {
		e.metrics.Published(kind, n)
	}
	return true
}

// LoggedChange is one entry of the change log: a status change or, when
// Kick is set, a kick, or, when Loss is set, a loss of Redis's data that an
// engine found (docs/design.md §11).
type LoggedChange struct {
	// ID is the entry's stream ID; pass it to ChangeLogAfter to read on.
	ID     string
	Change Change
	Kick   *Kick
	Loss   *Loss
	// EventID is the event's outbox ID (docs/design.md §7). An event
	// delivered again is logged again, under a new ID and the same
	// EventID: a reader drops repeats by it (the log keeps every entry, so
	// that paging by ID never stalls on one).
	EventID string
}

// decodeLogPage reads a reply of lua/log_read.lua read after after.
func decodeLogPage(v Value, after string) (entries []LoggedChange, gap bool, err error) {
	items, err := v.asArray(2)
	if err != nil {
		return nil, false, err
	}
	oldest, err1 := items[0].asString()
	flat, err2 := items[1].asArray(-1)
	if err1 != nil || err2 != nil || len(flat)%3 != 0 {
		return nil, false, replyErr("change log: %s", v)
	}
	for i := 0; i < len(flat); i += 3 {
		id, err1 := flat[i].asString()
		kind, err2 := flat[i+1].asString()
		raw, err3 := flat[i+2].asString()
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, false, replyErr("change log: %s", v)
		}
		entry := LoggedChange{ID: id}
		switch kind {
		case "c":
			if entry.Change, entry.EventID, err = unmarshalChange([]byte(raw)); err != nil {
				return nil, false, err
			}
		case "k":
			k, eventID, err := unmarshalKick([]byte(raw))
			if err != nil {
				return nil, false, err
			}
			entry.Kick, entry.EventID = &k, eventID
		case "l":
			ev, err := unmarshalChannelMessage([]byte(raw))
			if err != nil || ev.Loss == nil {
				return nil, false, replyErr("change log entry %s: %q", id, raw)
			}
			entry.Loss, entry.EventID = ev.Loss, ev.ID
		default:
			return nil, false, replyErr("change log entry %s of kind %q", id, kind)
		}
		entries = append(entries, entry)
	}
	// Entries up to the oldest kept may have been trimmed; a reader whose
	// last entry is older than that cannot know what it missed.
	gap = after != "" && oldest != "" && streamIDLess(after, oldest)
	return entries, gap, nil
}

// logAppendCalls are the calls of lua/log_append.lua that append changes
// and kicks to the change log, in order, logChunk events a call, with
// their estimated costs: a sweep that settles a large backlog logs it in
// bounded calls. ids are the events' outbox IDs, changes first.
func (p *planner) logAppendCalls(changes []Change, kicks []Kick, losses []Loss, ids []string) ([]Call, []int) {
	n := len(changes) + len(kicks) + len(losses)
	kinds := make([]string, 0, n)
	jsons := make([]string, 0, n)
	for i, c := range changes {
		kinds, jsons = append(kinds, "c"), append(jsons, string(marshalChange(c, ids[i])))
	}
	for i, k := range kicks {
		kinds, jsons = append(kinds, "k"), append(jsons, string(marshalKick(k, ids[len(changes)+i])))
	}
	for i, l := range losses {
		kinds, jsons = append(kinds, "l"), append(jsons, string(marshalLoss(l, ids[len(changes)+len(kicks)+i])))
	}
	maxLen := itoa(int64(p.settings.changeLog))
	sp := spans(len(kinds), logChunk)
	calls, costs := make([]Call, len(sp)), make([]int, len(sp))
	for n, s := range sp {
		args := make([]string, 0, 1+2*(s[1]-s[0]))
		args = append(args, maxLen)
		for i := s[0]; i < s[1]; i++ {
			args = append(args, kinds[i], jsons[i])
		}
		calls[n] = Call{SHA: p.scripts.logAppend.sha, Keys: []string{p.settings.keys.logKey()}, Args: args}
		costs[n] = (s[1] - s[0]) * logMicros
	}
	return calls, costs
}

// validStreamID reports whether id looks like "ms-seq".
func validStreamID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return ok && err1 == nil && err2 == nil
}

// streamIDLess compares two valid stream IDs.
func streamIDLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseUint(am, 10, 64)
	y, _ := strconv.ParseUint(bm, 10, 64)
	if x != y {
		return x < y
	}
	x, _ = strconv.ParseUint(as, 10, 64)
	y, _ = strconv.ParseUint(bs, 10, 64)
	return x < y
}
