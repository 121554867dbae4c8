package core

import (
	"context"
	"errors"
	"strings"
)

// Event is one message of a Feed: a status change or a kick.
type Event struct {
	Change *Change
	Kick   *Kick
}

// Feed delivers the changes and kicks published by every engine on the
// same Redis and prefix. It is read with Next on the caller's goroutine.
type Feed struct {
	msgs     <-chan Message
	stop     func() error
	changes  string
	kickPref string
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
		return nil, &StoreError{Op: "subscribe", Unavailable: Retryable(err), Err: err}
	}
	return &Feed{msgs: msgs, stop: stop, changes: e.ChangeChannel(), kickPref: e.KickChannel("")}, nil
}

// Next returns the next event. It returns ctx's error when ctx ends, and
// ErrUnavailable when the subscription closed; a malformed message is
// returned as an error matching ErrReply and skipped.
func (f *Feed) Next(ctx context.Context) (Event, error) {
	select {
	case <-ctx.Done():
		return Event{}, ctx.Err()
	case m, ok := <-f.msgs:
		if !ok {
			return Event{}, &StoreError{Op: "subscribe", Unavailable: true, Err: errClosed}
		}
		switch {
		case m.Channel == f.changes:
			c, err := UnmarshalChange(m.Payload)
			if err != nil {
				return Event{}, err
			}
			return Event{Change: &c}, nil
		case strings.HasPrefix(m.Channel, f.kickPref):
			k, err := UnmarshalKick(m.Payload)
			if err != nil {
				return Event{}, err
			}
			return Event{Kick: &k}, nil
		}
		return Event{}, replyErr("message on unexpected channel %q", m.Channel)
	}
}

// Close ends the subscription.
func (f *Feed) Close() error { return f.stop() }

// errClosed is the cause of the error Next returns once the subscription closed.
var errClosed = errors.New("subscription closed")
