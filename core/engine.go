package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Engine is the Redis-backed presence engine. It is safe for concurrent use
// by any number of goroutines and processes sharing one Redis: all state
// lives in Redis, and every change is one atomic script.
type Engine struct {
	store    Store
	settings *settings
	scripts  scriptSet
	cache    CachedReader
	pub      Publisher
	metrics  Metrics
	log      *slog.Logger
	rand     io.Reader

	lastNow atomic.Pointer[msArg] // nowArg's latest

	mu       sync.Mutex
	lastGood map[Scope]Count
}

var _ Presence = (*Engine)(nil)

// New returns an engine over store, configured by cfg (see Config for the
// defaults). It returns an *InputError for an invalid configuration. It
// detects the store's optional capabilities (CachedReader, Publisher).
func New(store Store, cfg Config) (*Engine, error) {
	if store == nil {
		return nil, invalid("store", "must not be nil")
	}
	s, err := newSettings(cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{store: store, settings: s, scripts: loadScripts(), metrics: cfg.Metrics, log: cfg.Logger, rand: cfg.Rand}
	if e.metrics == nil {
		e.metrics = NopMetrics{}
	}
	if e.rand == nil {
		e.rand = rand.Reader
	}
	e.cache, _ = store.(CachedReader)
	e.pub, _ = store.(Publisher)
	if s.lastGood > 0 {
		e.lastGood = make(map[Scope]Count)
	}
	return e, nil
}

// ChangeChannel is the channel status changes are published on.
func (e *Engine) ChangeChannel() string { return e.settings.keys.prefix + ":changes" }

// KickChannel is the channel kicks for gateway are published on.
func (e *Engine) KickChannel(gateway string) string {
	return e.settings.keys.prefix + ":kick:" + gateway
}

// nowArg is the "now" argument of every script: the injected clock's
// instant, or "" for the server's clock. The calls of one millisecond share
// its string, so that a busy engine formats it once.
func (e *Engine) nowArg() string {
	if e.settings.cfg.Clock == nil {
		return ""
	}
	ms := e.settings.cfg.Clock.Now().UnixMilli()
	if last := e.lastNow.Load(); last != nil && last.millis == ms {
		return last.text
	}
	s := itoa(ms)
	e.lastNow.Store(&msArg{millis: ms, text: s})
	return s
}

// msArg is an instant in ms and its decimal string.
type msArg struct {
	millis int64
	text   string
}

// newToken returns 16 hex digits of randomness for a session or lock token.
func (e *Engine) newToken() (string, error) {
	var b [8]byte
	if _, err := io.ReadFull(e.rand, b[:]); err != nil {
		return "", fmt.Errorf("presence: reading a token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// userArgs returns the common arguments of the user scripts of bucket b
// (their order is documented in lua/userlib.lua), with room for more.
func (e *Engine) userArgs(b uint32, more int) []string {
	args := make([]string, 0, 12+more)
	args = append(args, e.nowArg())
	args = append(args, e.settings.userParams[:]...)
	args[6], args[10] = e.settings.users[b].devPrefix, e.settings.users[b].counts
	return args
}

func (e *Engine) userKeys(b uint32) []string { return e.settings.users[b].keys }

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// decodeChanges reads events (user, from, to, ...) published at now.
func decodeChanges(v Value, now int64) ([]Change, error) {
	items, err := v.AsArray(-1)
	if err != nil || len(items)%3 != 0 {
		return nil, replyErr("events: %s", v)
	}
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]Change, 0, len(items)/3)
	for i := 0; i < len(items); i += 3 {
		user, err1 := items[i].AsString()
		from, err2 := items[i+1].AsInt()
		to, err3 := items[i+2].AsInt()
		if err1 != nil || err2 != nil || err3 != nil || !inRange(from, len(statusNames)) || !inRange(to, len(statusNames)) {
			return nil, replyErr("event %d: %s", i/3, v)
		}
		out = append(out, Change{User: user, From: Status(from), To: Status(to), At: msTime(now)})
	}
	return out, nil
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
	items, err := v.AsArray(n + 1)
	if err != nil {
		return 0, nil, err
	}
	now, err := items[0].AsInt()
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

// Ping checks that Redis is reachable and runs scripts, for readiness
// probes, and returns the server's clock.
func (e *Engine) Ping(ctx context.Context) (time.Time, error) {
	// A key-less call: a cluster driver sends it to any node.
	res, err := e.evalCalls(ctx, "ping", []Call{{SHA: e.scripts.ping.sha}})
	if err != nil {
		return time.Time{}, err
	}
	ms, err := res[0].Value.AsInt()
	if err != nil {
		return time.Time{}, err
	}
	return msTime(ms), nil
}
