package core

import (
	"io"
	"sync"
	"time"
)

// Engine is the Redis-backed presence engine. It is safe for concurrent use
// by any number of goroutines and processes sharing one Redis: all state
// lives in Redis, and every change is one atomic script.
type Engine struct {
	plans    *planner // what plans are made of: settings, scripts, token source
	settings *settings
	scripts  scriptSet

	store Store
	cache CachedReader
	pub   Publisher
	// batchPub is the store's BatchPublisher, or nil
	batchPub BatchPublisher
	metrics  Metrics
	log      logger

	mu       sync.Mutex
	lastGood map[Scope]Count

	comb combiner // group commit (combine.go)
}

var _ Presence = (*Engine)(nil)

// New returns an engine over store, configured by cfg (see Config for the
// defaults). It returns an *InputError for an invalid configuration. It
// detects the store's optional capabilities (CachedReader, Publisher).
func New(store Store, cfg Config) (*Engine, error) {
	if store == nil {
		return nil, invalid("store", "must not be nil")
	}
	p, err := newPlanner(cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{plans: p, settings: p.settings, scripts: p.scripts, store: store, metrics: cfg.Metrics, log: cfg.Logger}
	if e.metrics == nil {
		e.metrics = nopMetrics{}
	}
	s := p.settings
	e.cache, _ = store.(CachedReader)
	e.pub, _ = store.(Publisher)
	e.batchPub, _ = store.(BatchPublisher)
	if s.lastGood > 0 {
		e.lastGood = make(map[Scope]Count)
	}
	e.comb.lanes = s.lanes
	return e, nil
}

// Planner returns a planner of this engine's configuration, whose plans
// draw tokens from the engine's source: for driving plans elsewhere, or
// together with Run.
func (e *Engine) Planner() *Planner { return &Planner{e.plans} }

// ChangeChannel is the channel status changes are published on.
func (e *Engine) ChangeChannel() string { return e.plans.changeChannel() }

// KickChannel is the channel kicks for gateway are published on.
func (e *Engine) KickChannel(gateway string) string { return e.plans.kickChannel(gateway) }

// nowArg is the "now" argument of every script: the injected clock's
// instant, or "" for the server's clock. The calls of one millisecond share
// its string, so that a busy engine formats it once.
func (e *Engine) nowArg() string {
	if e.settings.cfg.Clock == nil {
		return ""
	}
	return e.plans.nowText(e.settings.cfg.Clock().UnixMilli())
}

// nowText is ms as plans and scripts take it. The plans of one millisecond
// share its string, so that a busy engine or planner formats it once.
func (p *planner) nowText(ms int64) string {
	if last := p.lastNow.Load(); last != nil && last.millis == ms {
		return last.text
	}
	s := itoa(ms)
	p.lastNow.Store(&msArg{millis: ms, text: s})
	return s
}

// nowOf is nowArg of t, through nowText.
func (p *planner) nowOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return p.nowText(t.UnixMilli())
}

// msArg is an instant in ms and its decimal string.
type msArg struct {
	millis int64
	text   string
}

// newToken returns 64 bits of randomness for a session or lock token, in
// unpadded URL-safe base64 (RFC 4648 §5, as encoding/base64's
// RawURLEncoding writes it): 11 characters, the shortest printable form,
// because every session stores its token (lua/recordlib.lua). Written out
// here so that the WebAssembly builds link no encoding package for it.
func (p *planner) newToken() (string, error) {
	var b [9]byte // 8 random bytes and a zero, three whole groups of 3
	if _, err := io.ReadFull(p.rand, b[:8]); err != nil {
		return "", &wrapError{msg: "presence: reading a token: " + err.Error(), err: err}
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var out [12]byte
	for g := range 3 {
		n := uint(b[3*g])<<16 | uint(b[3*g+1])<<8 | uint(b[3*g+2])
		for i := range 4 {
			out[4*g+i] = alphabet[n>>(18-6*i)&63]
		}
	}
	return string(out[:11]), nil
}

// userArgs returns the common arguments of the user scripts of bucket b at
// now (their order is documented in lua/userlib.lua), with room for more.
func (p *planner) userArgs(now string, b uint32, more int) []string {
	return p.appendUserArgs(make([]string, 0, userArgCount+more), now, b)
}

// userArgCount is the number of the user scripts' common arguments.
const userArgCount = 1 + len(settings{}.userParams)

// appendUserArgs appends the common arguments of bucket b's user scripts
// at now to args.
func (p *planner) appendUserArgs(args []string, now string, b uint32) []string {
	n := len(args)
	args = p.settings.appendCommon(append(args, now), b)
	if p.seen.has(b) {
		args[n+13] = p.settings.heal
	}
	return args
}

func (p *planner) userKeys(b uint32) []string { return p.settings.users[b].keys }

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// decodeChanges reads events (user, from, to, outbox ID, ...) published
// at now.
func decodeChanges(v Value, now int64) ([]Change, []string, error) {
	items, err := v.asArray(-1)
	if err != nil || len(items)%4 != 0 {
		return nil, nil, replyErr("events: %s", v)
	}
	if len(items) == 0 {
		return nil, nil, nil
	}
	out := make([]Change, 0, len(items)/4)
	ids := make([]string, 0, len(items)/4)
	for i := 0; i < len(items); i += 4 {
		user, err1 := items[i].asString()
		from, err2 := items[i+1].asInt()
		to, err3 := items[i+2].asInt()
		id, err4 := items[i+3].asString()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !inRange(from, len(statusNames)) || !inRange(to, len(statusNames)) {
			return nil, nil, replyErr("event %d: %s", i/4, v)
		}
		out = append(out, Change{User: user, From: Status(from), To: Status(to), At: msTime(now)})
		ids = append(ids, id)
	}
	return out, ids, nil
}

// flag is a boolean as the scripts take it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// splitReply reads a script reply {now, rest...} with n items after now.
func splitReply(v Value, n int) (int64, []Value, error) {
	items, err := v.asArray(n + 1)
	if err != nil {
		return 0, nil, err
	}
	now, err := items[0].asInt()
	if err != nil {
		return 0, nil, err
	}
	return now, items[1:], nil
}

// codeErr maps a script's refusal code to its error.
func codeErr(code string) error {
	switch code {
	case "":
		return nil
	case "REPLACED":
		return ErrSessionReplaced
	case "NOSESSION":
		return ErrNoSession
	case "TOOMANY":
		return ErrTooManyDevices
	case "SKEW":
		return ErrClockSkew
	}
	return replyErr("unknown result code %q", code)
}
