package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
)

// Event kinds sent on event streams (the SSE "event:" field, the
// WebSocket message's "type").
const (
	EventChange = "change" // a status change; carries the change log ID
	EventKick   = "kick"   // a kick addressed to a gateway the stream asked for
	EventStatus = "status" // a snapshot of one asked-for user's status
	EventSweep  = "sweep"  // a sweep pass of this instance that did something
	EventReset  = "reset"  // changes were missed (trimmed from the log): reload statuses
	EventLoss   = "loss"   // Redis lost its data; no change is sent until "until": reload statuses then
	EventReady  = "ready"  // catch-up is over; live events follow
	EventBye    = "bye"    // the server ends the stream; reconnect with Last-Event-ID
)

// event is one message of an event stream.
type event struct {
	id      string // change log ID, for changes and kicks
	kind    string
	data    any
	user    string // the changed user, for filtering
	gateway string // the kicked session's gateway, for filtering
}

// logEvent turns a change log entry into its event.
func logEvent(e core.LoggedChange) event {
	if e.Loss != nil {
		return event{id: e.ID, kind: EventLoss, data: LossEvent{At: e.Loss.At.UnixMilli(), Until: e.Loss.Until.UnixMilli(), ID: e.EventID}}
	}
	if e.Kick != nil {
		return event{id: e.ID, kind: EventKick, data: wireKick(*e.Kick, e.EventID), user: e.Kick.User, gateway: e.Kick.Gateway}
	}
	return event{id: e.ID, kind: EventChange, data: wireChange(e.Change, e.EventID), user: e.Change.User}
}

// filter says which events a subscriber wants.
type filter struct {
	all      bool
	users    map[string]bool
	gateways map[string]bool
	sweeps   bool
}

func (f filter) wants(ev event) bool {
	switch ev.kind {
	case EventChange:
		return f.all || f.users[ev.user]
	case EventKick:
		return f.gateways[ev.gateway]
	case EventSweep:
		return f.sweeps
	case EventReset, EventLoss:
		return true
	}
	return false
}

// subscriber is one stream's queue in the hub.
type subscriber struct {
	f      filter
	ch     chan event
	lagged chan struct{} // closed when the hub dropped an event for it
	once   sync.Once
}

func (s *subscriber) lag() { s.once.Do(func() { close(s.lagged) }) }

// hub reads the change log in Redis, the one ordered record of the changes
// and kicks of every instance, and fans each entry out to the streams that
// want it.
// A pub/sub Feed only wakes it up early; a timer makes it read anyway, so a
// lost pub/sub message delays an event by one poll interval at most.
type hub struct {
	eng      *core.Engine
	log      *slog.Logger
	m        *metrics
	poll     time.Duration
	buffer   int
	onChange func(core.LoggedChange)

	wake   chan struct{}
	ready  chan struct{} // closed once the log was read up to its end at start
	health redisHealth   // whether the reads reach Redis, for the dashboard

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	pos  string       // ID of the last entry read
	seen core.Repeats // events delivered again (docs/design.md §7), and a loss's repeats, are fanned out once
}

func newHub(eng *core.Engine, log *slog.Logger, m *metrics, poll time.Duration, buffer int, onChange func(core.LoggedChange)) *hub {
	return &hub{eng: eng, log: log, m: m, poll: poll, buffer: buffer, onChange: onChange,
		wake: make(chan struct{}, 1), ready: make(chan struct{}), subs: map[*subscriber]struct{}{}}
}

// subscribe registers a stream and returns the hub's position: every entry
// after it will be queued on the subscriber.
func (h *hub) subscribe(f filter) (*subscriber, string) {
	s := &subscriber{f: f, ch: make(chan event, h.buffer), lagged: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	return s, h.pos
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// broadcastLocked queues ev on every subscriber that wants it; one whose
// queue is full is marked lagged (its stream ends, and the client catches
// up from the log when it reconnects).
func (h *hub) broadcastLocked(ev event) {
	for s := range h.subs {
		if !s.f.wants(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			s.lag()
		}
	}
}

// broadcast queues an event that is not a change log entry (sweeps).
func (h *hub) broadcast(ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.broadcastLocked(ev)
}

func (h *hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// run reads the log until ctx ends: first all of it (to seed the status
// counts), then whatever is new on every wake-up or poll tick.
func (h *hub) run(ctx context.Context) {
	for {
		began := time.Now() // a failing read may take long: the outage began before it
		err := h.read(ctx, false)
		if ctx.Err() == nil {
			h.health.record(began, err)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		h.log.WarnContext(ctx, "presence: reading the change log at start-up failed; retrying", "err", err)
		if !sleep(ctx, h.poll) {
			return
		}
	}
	close(h.ready)
	var listener sync.WaitGroup
	listener.Go(func() { h.listen(ctx) })
	defer listener.Wait()
	t := time.NewTicker(h.poll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		case <-t.C:
		}
		began := time.Now()
		err := h.read(ctx, true)
		if ctx.Err() == nil {
			h.health.record(began, err)
		}
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			failing = true
			h.log.WarnContext(ctx, "presence: reading the change log failed", "err", err)
		case err == nil && failing:
			failing = false
			h.log.InfoContext(ctx, "presence: reading the change log again")
		}
	}
}

// read reads the log from the hub's position to its end; live entries are
// fanned out, seed entries (at start-up) only counted.
func (h *hub) read(ctx context.Context, live bool) error {
	for {
		h.mu.Lock()
		pos := h.pos
		h.mu.Unlock()
		entries, gap, err := h.eng.ChangeLogAfter(ctx, pos, core.MaxPage)
		if err != nil {
			return err
		}
		h.mu.Lock()
		// A log lost with Redis's data starts again with the loss's entry:
		// its gap is the loss, which streams hear of once, as a loss.
		lost := slices.ContainsFunc(entries, func(e core.LoggedChange) bool { return e.Loss != nil })
		if gap && live && !lost {
			h.m.logGaps.Inc()
			h.broadcastLocked(event{kind: EventReset, data: map[string]string{"reason": "gap"}})
		}
		for _, e := range entries {
			h.pos = e.ID
			if h.seen.Repeat(e.EventID) {
				continue
			}
			switch {
			case e.Loss != nil:
				if !h.seen.Lost(*e.Loss) {
					continue
				}
				if live {
					h.m.losses.Inc()
				}
			case e.Kick == nil:
				h.onChange(e)
			}
			if live {
				h.broadcastLocked(logEvent(e))
			}
		}
		h.mu.Unlock()
		h.m.logRead.Add(float64(len(entries)))
		if len(entries) < core.MaxPage {
			return nil
		}
	}
}

// listen turns the engine's pub/sub Feed into wake-ups, resubscribing after
// a lost connection. Without a Subscriber capability the hub just polls.
func (h *hub) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		feed, err := h.eng.Subscribe(ctx)
		if errors.Is(err, core.ErrUnsupported) {
			h.log.InfoContext(ctx, "presence: the store cannot subscribe; the event hub polls the change log", "every", h.poll)
			return
		}
		if err != nil {
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		h.poke() // messages may have been lost while unsubscribed
		for {
			ev, err := feed.Next(ctx)
			if errors.Is(err, core.ErrReply) {
				continue
			}
			if err != nil {
				break
			}
			if ev.Change != nil || ev.Kick != nil {
				h.poke()
			}
		}
		_ = feed.Close()
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// parseStreamID splits a change log ID "ms-seq".
func parseStreamID(id string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return ms, seq, found && err1 == nil && err2 == nil
}

// idLess compares two change log IDs; an invalid one sorts first.
func idLess(a, b string) bool {
	am, as, _ := parseStreamID(a)
	bm, bs, _ := parseStreamID(b)
	if am != bm {
		return am < bm
	}
	return as < bs
}
