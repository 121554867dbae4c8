package core

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Event is one message of a Feed: a status change, a kick or a data loss.
type Event struct {
	Change *Change
	Kick   *Kick
	// Loss is a loss of Redis's data (docs/design.md §11); a Feed hands
	// its reader one for each healing, however many buckets and engines
	// report it.
	Loss *Loss
	// ID is the event's outbox ID (docs/design.md §7): an event delivered
	// again (after a lost reply, a crash or a failed publish) carries the
	// same one.
	ID string
}

// Feed delivers the changes and kicks published by every engine on the
// same Redis and prefix, each once: a repeat of one of the last
// 8,192 events it returned is dropped. It is read with Next on the
// caller's goroutine.
type Feed struct {
	msgs     <-chan Message
	stop     func() error
	changes  string
	kickPref string
	seen     Repeats
}

// feedMemory is how many event IDs a Repeats (and so a Feed) remembers:
// more than a reader sees repeated in the time an outbox takes to deliver
// again.
const feedMemory = 8192

// Repeats tells the events a reader has seen from those it has not, by
// outbox ID (Event.ID, LoggedChange.EventID), remembering the last
// 8,192: at-least-once delivery may hand a reader an event again,
// and a reader drops it. It also tells a loss of Redis's data from its
// repeats by other buckets and engines (Lost). The zero value is ready; it
// is not safe for concurrent use.
type Repeats struct {
	set     map[string]struct{}
	ring    []string
	next    int
	healing time.Time // the end of the healing of the last loss that was news
}

// Repeat records id and reports whether it was seen before. The empty
// ID (an event of a peer without an outbox) is never a repeat.
func (r *Repeats) Repeat(id string) bool {
	return id != "" && !r.add(id)
}

// Lost records loss l and reports whether it is news: each bucket that
// lost its data, on each engine that found it, reports the loss, and a
// loss found while the last one heals is the same (docs/design.md §11).
func (r *Repeats) Lost(l Loss) bool {
	if l.At.Before(r.healing) {
		return false
	}
	r.healing = l.Until
	return true
}

// add records id and reports whether it is new.
func (r *Repeats) add(id string) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	if r.set == nil {
		r.set = make(map[string]struct{}, feedMemory)
		r.ring = make([]string, feedMemory)
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	r.set[id] = struct{}{}
	return true
}

// Subscribe opens a Feed of status changes and of the kicks addressed to
// the given gateways (none: changes only). It needs a store with the
// Subscriber capability (ErrUnsupported otherwise). Pub/sub delivers to
// subscribers that are connected: a reader that needs every change after a
// reconnect also reads statuses (Statuses) when it resubscribes.
func (e *Engine) Subscribe(ctx context.Context, gateways ...string) (*Feed, error) {
	sub, ok := e.store.(Subscriber)
	if !ok {
		return nil, ErrUnsupported
	}
	channels := []string{e.ChangeChannel()}
	for i, gw := range gateways {
		if err := checkID("gateways["+itoa(int64(i))+"]", gw); err != nil {
			return nil, err
		}
		channels = append(channels, e.KickChannel(gw))
	}
	msgs, stop, err := sub.Subscribe(ctx, channels...)
	if err != nil {
		return nil, &StoreError{Op: "subscribe", Unavailable: errors.Is(err, ErrUnavailable), Err: err}
	}
	return &Feed{msgs: msgs, stop: stop, changes: e.ChangeChannel(), kickPref: e.KickChannel("")}, nil
}

// Next returns the next event, skipping repeats. It returns ctx's error
// when ctx ends, and ErrUnavailable when the subscription closed; a
// malformed message is returned as an error matching ErrReply and
// skipped.
func (f *Feed) Next(ctx context.Context) (Event, error) {
	for {
		ev, err := f.next(ctx)
		if err != nil {
			return ev, err
		}
		if f.seen.Repeat(ev.ID) || ev.Loss != nil && !f.seen.Lost(*ev.Loss) {
			continue
		}
		return ev, nil
	}
}

func (f *Feed) next(ctx context.Context) (Event, error) {
	select {
	case <-ctx.Done():
		return Event{}, ctx.Err()
	case m, ok := <-f.msgs:
		if !ok {
			return Event{}, &StoreError{Op: "subscribe", Unavailable: true, Err: errClosed}
		}
		switch {
		case m.Channel == f.changes:
			return unmarshalChannelMessage(m.Payload)
		case strings.HasPrefix(m.Channel, f.kickPref):
			k, id, err := unmarshalKick(m.Payload)
			if err != nil {
				return Event{}, err
			}
			return Event{Kick: &k, ID: id}, nil
		}
		return Event{}, replyErr("message on unexpected channel %q", m.Channel)
	}
}

// Close ends the subscription.
func (f *Feed) Close() error { return f.stop() }

// errClosed is the cause of the error Next returns once the subscription closed.
var errClosed = errors.New("subscription closed")
