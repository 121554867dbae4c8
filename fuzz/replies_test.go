package fuzz

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/opdo"
)

// replyLog is what the fake store handed out during one engine call: the
// final result of every script call (a NOSCRIPT answer is not final: the
// engine resends the source), judged against the reply contracts below.
type replyLog struct {
	mu       sync.Mutex
	invalid  []string // calls whose reply breaks its script's contract
	storeErr bool     // a call failed (other than NOSCRIPT)
	unavail  bool     // ... with an error matching core.ErrUnavailable
	broken   bool     // Eval returned the wrong number of results
	refusal  error    // the refusal a valid reply's result code asks for
	unknown  bool     // a script without a contract here was called
	unlisted bool     // a script missing from luascripts.All was called
	flaws    []string // why the invalid replies are invalid
	soft     bool     // a reply was flawed only where the engine need not look
	calls    int
}

// reset forgets the previous engine call.
func (l *replyLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flaws, l.soft = nil, false
	l.invalid, l.storeErr, l.unavail, l.broken, l.refusal, l.unknown, l.unlisted, l.calls = nil, false, false, false, nil, false, false, 0
}

var errFake = errors.New("ERR fake failure")

// fakeStore answers every call from the fuzz input: a reply that keeps its
// script's contract, such a reply with one node mutated, an arbitrary value
// tree, an error, or the wrong number of results. It never runs anything.
type fakeStore struct {
	s   *source
	log *replyLog
}

// maxEvals bounds the round trips of one engine call: past it every call
// fails, so that a sweep told "more" forever still ends.
const maxEvals = 40

// Eval answers calls as the input says.
func (f *fakeStore) Eval(ctx context.Context, calls []core.Call) []core.Result {
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	f.log.calls++
	out := make([]core.Result, len(calls))
	ignored := len(calls) > 0 && (scriptName(calls[0]) == "unlock" || scriptName(calls[0]) == "outbox_ack")
	if ignored {
		// The engine ignores what an unlock or an outbox acknowledgement
		// (after the operation, best effort) returns; answer plainly so
		// that the verdict is about the operation's own replies.
		for i := range out {
			out[i].Value = core.Value{Kind: core.ValueInt, Int: 1}
		}
		return out
	}
	if f.log.calls > maxEvals {
		for i := range out {
			out[i].Err = errFake
		}
		f.log.storeErr = true
		return out
	}
	if f.s.intn(32) == 0 {
		f.log.broken = true
		if f.s.bool() {
			return out[:len(out)-1]
		}
		return append(out, core.Result{Value: core.Value{Kind: core.ValueInt, Int: 1}})
	}
	for i, c := range calls {
		name := scriptName(c)
		if name == "" {
			f.log.unlisted = true // luascripts.All promises every script
		}
		switch mode := f.s.intn(16); {
		case mode == 0 && c.Source == "":
			out[i].Err = fmt.Errorf("%w: No matching script", core.ErrNoScript)
			continue // not final: the engine resends the source
		case mode == 1:
			out[i].Err = pick(f.s, errFake, error(fmt.Errorf("%w: fake connection refused", core.ErrUnavailable)))
		case mode <= 3:
			out[i].Value = genTree(f.s, 3)
		case mode <= 7:
			out[i].Value = mutate(f.s, genReply(f.s, name, c.Args))
		default:
			out[i].Value = genReply(f.s, name, c.Args)
		}
		if out[i].Err != nil {
			f.log.storeErr = true
			f.log.unavail = f.log.unavail || errors.Is(out[i].Err, core.ErrUnavailable)
			continue
		}
		var ck checker
		ok, refusal := ck.checkReply(name, c.Args, out[i].Value)
		if refusal == errUnknownScript {
			f.log.unknown = true
			continue
		}
		if ok && ck.soft {
			f.log.soft = true
		}
		if !ok {
			f.log.invalid = append(f.log.invalid, name+" "+out[i].Value.String())
			f.log.flaws = append(f.log.flaws, ck.flaws...)
			if len(ck.flaws) == 0 {
				f.log.flaws = append(f.log.flaws, "shape")
			}
		}
		if refusal != nil {
			f.log.refusal = refusal
		}
	}
	return out
}

// cachedFakeStore is a fakeStore that also serves compact counts from a
// client-side cache, as the rueidis adapter does.
type cachedFakeStore struct{ *fakeStore }

// CachedGet answers a count key read like a script call.
func (c cachedFakeStore) CachedGet(ctx context.Context, key string) (core.Value, error) {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	if c.s.intn(8) == 0 {
		c.log.storeErr, c.log.unavail = true, true
		return core.Value{}, fmt.Errorf("%w: fake cache unreachable", core.ErrUnavailable)
	}
	var v core.Value
	switch c.s.intn(4) {
	case 0:
		v = core.Value{} // not cached: the engine runs the count script
	case 1:
		v = genTree(c.s, 2)
	default:
		v = core.Value{Kind: core.ValueString, Str: strconv.Itoa(c.s.intn(5)-1) + pick(c.s, ":", ";", "") + strconv.FormatInt(t0.UnixMilli(), 10)}
	}
	if !countKeyOK(v) {
		c.log.invalid = append(c.log.invalid, "cached count "+v.String())
	}
	return v, nil
}

// FenceCache fails now and then, as a round trip may.
func (c cachedFakeStore) FenceCache(ctx context.Context, keys []string) error {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	if c.s.intn(8) == 0 {
		c.log.storeErr, c.log.unavail = true, true
		return fmt.Errorf("%w: fake cache unreachable", core.ErrUnavailable)
	}
	return nil
}

// --- reply contracts -------------------------------------------------------
//
// checkReply judges a reply by the contract in the header of its script
// (core/lua/*.lua), read as strictly as the engine can check it: shapes and
// item counts exact; integers as integers or decimal strings and strings as
// strings or integers (as the core reads them); statuses, kinds and manual
// statuses in range; counts not negative. It also returns the refusal a
// valid reply's result code stands for.

func vInt(v core.Value) (int64, bool) {
	switch v.Kind {
	case core.ValueInt:
		return v.Int, true
	case core.ValueString:
		n, err := strconv.ParseInt(v.Str, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func vStr(v core.Value) (string, bool) {
	switch v.Kind {
	case core.ValueString:
		return v.Str, true
	case core.ValueInt:
		return strconv.FormatInt(v.Int, 10), true
	}
	return "", false
}

func vArr(v core.Value, n int) ([]core.Value, bool) {
	if v.Kind != core.ValueArray || (n >= 0 && len(v.Array) != n) {
		return nil, false
	}
	return v.Array, true
}

// checker collects why replies break their contracts.
type checker struct {
	flaws []string
	soft  bool // the reply's only flaw may be one the engine need not see
}

// Flaws of replies that the engine is known to accept (known_bugs_test.go).
const (
	flawNegative  = "count out of range"
	flawTruncates = "enum out of range, in range modulo 256"
)

func (ck *checker) inRange(v core.Value, lo, hi int64) bool {
	n, ok := vInt(v)
	switch {
	case !ok:
		ck.flaws = append(ck.flaws, "not an integer: "+v.String())
	case n >= lo && n <= hi:
		return true
	case lo == 0 && hi == maxCount:
		ck.flaws = append(ck.flaws, flawNegative)
	case int64(uint8(n)) >= lo && int64(uint8(n)) <= hi:
		ck.flaws = append(ck.flaws, flawTruncates)
	default:
		ck.flaws = append(ck.flaws, fmt.Sprintf("%d outside [%d, %d]", n, lo, hi))
	}
	return false
}

// flag reads a 0/1 flag: an integer; another value than 0 or 1 is a flaw
// the engine may refuse or read as 0.
func (ck *checker) flag(v core.Value) bool {
	n, ok := vInt(v)
	if ok && n != 0 && n != 1 {
		ck.soft = true
	}
	return ok
}

func isInt(v core.Value) bool { _, ok := vInt(v); return ok }
func isStr(v core.Value) bool { _, ok := vStr(v); return ok }

const maxStatus, maxKind, maxManual = 4, 4, 2

// maxCount bounds the counts in replies (the core reads counts from 0 to 2^40, so
// that sums of many cannot overflow).
const maxCount = 1 << 40

// eventsOK: user, from, to, outbox ID quadruples; from and to are
// statuses.
func (ck *checker) eventsOK(v core.Value) bool {
	items, ok := vArr(v, -1)
	if !ok || len(items)%4 != 0 {
		return false
	}
	for i := 0; i < len(items); i += 4 {
		if !isStr(items[i]) || !ck.inRange(items[i+1], 0, maxStatus) || !ck.inRange(items[i+2], 0, maxStatus) || !isStr(items[i+3]) {
			return false
		}
	}
	return true
}

// outboxOK: ID, entry pairs of lua/userlib.lua's emit: "c" user from to at,
// or "k" user device kind gateway at, joined by US.
func (ck *checker) outboxOK(v core.Value) bool {
	items, ok := vArr(v, -1)
	if !ok || len(items)%2 != 0 {
		return false
	}
	num := func(s string, hi int64) bool {
		n, err := strconv.ParseInt(s, 10, 64)
		return err == nil && (hi < 0 || n >= 0 && n <= hi)
	}
	for i := 0; i < len(items); i += 2 {
		entry, ok := vStr(items[i+1])
		if !isStr(items[i]) || !ok {
			return false
		}
		f := strings.Split(entry, "\x1f")
		switch {
		case len(f) == 5 && f[0] == "c" && num(f[2], maxStatus) && num(f[3], maxStatus) && num(f[4], -1):
		case len(f) == 6 && f[0] == "k" && num(f[3], maxKind) && num(f[5], -1):
		default:
			return false
		}
	}
	return true
}

var refusals = map[string]error{
	"REPLACED": core.ErrSessionReplaced, "NOSESSION": core.ErrNoSession,
	"TOOMANY": core.ErrTooManyDevices, "SKEW": core.ErrClockSkew,
}

// code reads a result code: "" (accepted), a refusal, or unknown.
func code(v core.Value) (refusal error, ok bool) {
	s, isS := vStr(v)
	if !isS {
		return nil, false
	}
	if s == "" {
		return nil, true
	}
	r, known := refusals[s]
	return r, known
}

// recordOK: a device record of lua/recordlib.lua in its two hash fields, joined
// by \x1f: static (field DEVICE) kind, gateway, token, loginAt, interval,
// metadata, with kind a kind and loginAt and interval integers; dynamic
// (field "\x01" DEVICE) lastSeen, lastActive, background, flags (gone, fenced), with the
// instants integers.
// recordsOK checks a user's two records (core/lua/recordlib.lua): the
// static one ("" none) a status digit, then items joined by \x1d: a
// device's (ID, bits 0-7, kind, gateway, token, interval, loginAt in hex,
// metadata) or a fence's (\x02 first); the dynamic one the pending change,
// then each device's lastSeen in hex and lastSeen - lastActive, in order.
func (ck *checker) recordsOK(static, dynamic string) bool {
	if static == "" {
		return true
	}
	items, dyns := strings.Split(static, "\x1d"), strings.Split(dynamic, "\x1d")
	if len(items[0]) == 0 || items[0][0] < '0' || items[0][0] > '0'+maxStatus {
		return false
	}
	d := 1
	for _, item := range items[1:] {
		if strings.HasPrefix(item, "\x02") {
			continue
		}
		if d >= len(dyns) {
			return false
		}
		f, g := strings.SplitN(item, "\x1f", 8), strings.Split(dyns[d], "\x1f")
		d++
		if len(f) < 7 || len(g) != 2 {
			return false
		}
		if b, err := strconv.Atoi(f[1]); err != nil || b < 0 || b > 7 {
			return false
		}
		if k, err := strconv.Atoi(f[2]); err != nil || k < 0 || k > maxKind {
			if err == nil && k&0xff <= maxKind && k >= 0 {
				ck.flaws = append(ck.flaws, flawTruncates)
			}
			return false
		}
		for i, n := range []string{f[5], f[6], g[0], g[1]} {
			base := 10
			if i == 1 || i == 2 {
				base = 16
			}
			if _, err := strconv.ParseInt(n, base, 64); err != nil {
				return false
			}
		}
	}
	return true
}

func countKeyOK(v core.Value) bool {
	if v.Kind == core.ValueNil {
		return true
	}
	s, ok := vStr(v)
	if !ok {
		return false
	}
	n, at, found := strings.Cut(s, ":")
	c, err1 := strconv.ParseInt(n, 10, 64)
	_, err2 := strconv.ParseInt(at, 10, 64)
	return found && err1 == nil && err2 == nil && c >= 0
}

// replyUsers are the users of the reply target's requests.
var replyUsers = []string{"u1", "u2", "u3", "u4"}

// items is how many results a heartbeat (beat or heartbeat script) or
// status call asks for: the target sends one heartbeat at a time, and a status call ends with its
// users (counted from the end, so that the common arguments before them may
// change without the target noticing).
func items(name string, args []string) int {
	if name == "heartbeat" || name == "beat" {
		return 1
	}
	n := 0
	for n < len(args) && slices.Contains(replyUsers, args[len(args)-1-n]) {
		n++
	}
	return n
}

func (ck *checker) checkReply(name string, args []string, v core.Value) (ok bool, refusal error) {
	// Every script but leave, unlock and touch replies {now, ...}.
	head := func(n int) []core.Value {
		items, ok := vArr(v, n+1)
		if !ok {
			return nil
		}
		// An engine call that does not use "now" may ignore a broken
		// one: such a reply may be accepted or refused.
		ck.soft = ck.soft || !isInt(items[0])
		return items[1:]
	}
	switch name {
	case "touch", "unlock":
		return true, nil // the engine reads nothing of it
	case "beat":
		// one string: a token or "" per beat offered, joined by \x1f
		s, ok := vStr(v)
		return ok && strings.Count(s, "\x1f") == items(name, args)-1, nil
	case "leave":
		return isInt(v), nil
	case "heartbeat":
		r := head(2)
		n := items(name, args)
		if r == nil || !lostOK(r[1]) {
			return false, nil
		}
		res, ok := vArr(r[0], 6*n)
		if !ok {
			return false, nil
		}
		for i := 0; i < len(res); i += 6 {
			c, known := code(res[i])
			if !known || !isStr(res[i+1]) || !isInt(res[i+2]) || !isInt(res[i+3]) || !isStr(res[i+4]) || !isStr(res[i+5]) {
				return false, nil
			}
			if c != nil {
				refusal = c
				continue
			}
			if from, _ := vInt(res[i+2]); from >= 0 && (!ck.inRange(res[i+2], 0, maxStatus) || !ck.inRange(res[i+3], 0, maxStatus)) {
				return false, nil
			}
		}
		return true, refusal
	case "login":
		r := head(4)
		if r == nil || !lostOK(r[3]) {
			return false, nil
		}
		c, known := code(r[0])
		if !known {
			return false, nil
		}
		if c != nil {
			return true, c
		}
		kicks, ok := vArr(r[1], -1)
		if !ok || len(kicks)%4 != 0 {
			return false, nil
		}
		for i := 0; i < len(kicks); i += 4 {
			if !isStr(kicks[i]) || !ck.inRange(kicks[i+1], 0, maxKind) || !isStr(kicks[i+2]) || !isStr(kicks[i+3]) {
				return false, nil
			}
		}
		return ck.eventsOK(r[2]), nil
	case "logout":
		r := head(4)
		if r == nil || !lostOK(r[3]) {
			return false, nil
		}
		c, known := code(r[0])
		if !known || !isInt(r[1]) {
			return false, nil
		}
		if c != nil {
			return true, c
		}
		return ck.eventsOK(r[2]), nil
	case "manual":
		r := head(2)
		return r != nil && lostOK(r[1]) && ck.eventsOK(r[0]), nil
	case "status":
		r := head(1)
		if r == nil {
			return false, nil
		}
		users, ok := vArr(r[0], items(name, args))
		if !ok {
			return false, nil
		}
		for _, u := range users {
			// {manual, manual expiry (0: none), static record, dynamic record}
			f, ok := vArr(u, 4)
			if !ok || !ck.inRange(f[0], 0, maxManual) || !ck.inRange(f[1], 0, math.MaxInt64) {
				return false, nil
			}
			// the records are strings as stored, never numbers
			static, ok1 := vStr(f[2])
			dynamic, ok2 := vStr(f[3])
			strs := f[2].Kind == core.ValueString && f[3].Kind == core.ValueString
			if !ok1 || !ok2 || !strs || !ck.recordsOK(static, dynamic) {
				return false, nil
			}
		}
		return true, nil
	case "count":
		r := head(2)
		// {now, count, asOf}: asOf an instant, not before the epoch.
		return r != nil && ck.inRange(r[0], 0, maxCount) && ck.inRange(r[1], 0, math.MaxInt64), nil
	case "active":
		r := head(1)
		return r != nil && ck.inRange(r[0], 0, maxCount), nil
	case "members":
		r := head(3)
		if r == nil || !isInt(r[0]) || !isInt(r[1]) {
			return false, nil
		}
		// The next cursor is -1, -1 or a shard and offset a cursor can
		// hold; anything else the engine may refuse, or pass on in a Next
		// that it must then accept (memberProblems).
		shard, _ := vInt(r[0])
		offset, _ := vInt(r[1])
		if !(shard == -1 && offset == -1) && !(shard >= 0 && shard <= 65536 && offset >= 0 && offset <= 1<<30) {
			ck.soft = true
		}
		flat, ok := vArr(r[2], -1)
		if !ok || len(flat)%2 != 0 {
			return false, nil
		}
		for i := 0; i < len(flat); i += 2 {
			if !isStr(flat[i]) || !isInt(flat[i+1]) {
				return false, nil
			}
		}
		return true, nil
	case "sweep_users":
		r := head(5)
		return r != nil && ck.inRange(r[0], 0, maxCount) && ck.flag(r[1]) && isStr(r[2]) && ck.eventsOK(r[3]) && ck.outboxOK(r[4]), nil
	case "outbox_ack":
		return true, nil // the engine reads nothing of it
	case "sweep_scopes":
		// {now, visited, removed, released, more, lock, spread}: spread
		// lists compact scopes whose shards live in other slots; the
		// target configures none, so it must be empty.
		r := head(6)
		if r == nil {
			return false, nil
		}
		_, ok := vArr(r[5], 0)
		return ok && ck.inRange(r[0], 0, maxCount) && ck.inRange(r[1], 0, maxCount) &&
			ck.inRange(r[2], 0, maxCount) && ck.flag(r[3]) && isStr(r[4]), nil
	}
	return false, errUnknownScript
}

// errUnknownScript marks a reply to a script this target has no contract
// for (the core grew one): anything but a panic or a hang is then accepted.
var errUnknownScript = errors.New("no contract")

// --- value generators ------------------------------------------------------

// nastyInts are integers a broken reply may hold where a small one belongs.
var nastyInts = []int64{-1, 5, 7, 256, 259, 260, -255, -256, 1 << 31, 1 << 40, 1<<40 + 1, math.MaxInt64, math.MinInt64, -9}

// nastyStrings are strings a broken reply may hold.
var nastyStrings = []string{"", "x", "1.5", "9223372036854775808", "-0", "+3", " 3", "3 ", "NaN", "REPLACED ", "ok", "0x10", "\x1f\x1f", "0:1:2"}

// genTree decodes an arbitrary value tree of at most depth levels.
func genTree(s *source, depth int) core.Value {
	switch k := s.intn(9); {
	case k == 0:
		return core.Value{}
	case k <= 2:
		if s.bool() {
			return core.Value{Kind: core.ValueInt, Int: nastyInts[s.intn(len(nastyInts))]}
		}
		return core.Value{Kind: core.ValueInt, Int: int64(s.intn(7)) - 1}
	case k <= 4:
		return core.Value{Kind: core.ValueString, Str: pick(s, nastyStrings...)}
	case k <= 7 && depth > 0:
		items := make([]core.Value, s.intn(6))
		for i := range items {
			items[i] = genTree(s, depth-1)
		}
		return core.Value{Kind: core.ValueArray, Array: items}
	case k == 8:
		return core.Value{Kind: core.ValueKind(4 + s.intn(250)), Int: 3, Str: "3"} // no such kind
	}
	return core.Value{}
}

// genInt renders n as an integer or, sometimes, as a decimal string: both
// are valid integer replies.
func genInt(s *source, n int64) core.Value {
	if s.intn(8) == 0 {
		return core.Value{Kind: core.ValueString, Str: strconv.FormatInt(n, 10)}
	}
	return core.Value{Kind: core.ValueInt, Int: n}
}

// genLost is what a user script reports last: whether it looked at its
// bucket's meta, and a data loss it found (lua/userlib.lua's layout).
func genLost(s *source) core.Value {
	return core.Value{Kind: core.ValueString, Str: pick(s, "", "", "-", "1700000120000\x1fu1.1700000000000.9")}
}

// lostOK reports whether v is what a user script may report last: "-",
// "", or a healing's end and an outbox ID, joined by \x1f.
func lostOK(v core.Value) bool {
	s, ok := vStr(v)
	if !ok {
		return false
	}
	if s == "" || s == "-" {
		return true
	}
	until, id, cut := strings.Cut(s, "\x1f")
	_, err := strconv.ParseInt(until, 10, 64)
	return cut && err == nil && id != ""
}

func genEvents(s *source) core.Value {
	var items []core.Value
	for range s.intn(3) {
		items = append(items, core.Value{Kind: core.ValueString, Str: pick(s, "u1", "u2", "{u}")}, genInt(s, int64(s.intn(5))), genInt(s, int64(s.intn(5))),
			core.Value{Kind: core.ValueString, Str: pick(s, "u0.1.1", "u3.1700000000000.7", "")})
	}
	return core.Value{Kind: core.ValueArray, Array: items}
}

// genOutbox returns a sweep step's undelivered events (lua/sweep_users.lua).
func genOutbox(s *source) core.Value {
	var items []core.Value
	for range s.intn(3) {
		entry := pick(s, "c\x1fu1\x1f0\x1f3\x1f1700000000000", "k\x1fu2\x1fd:2\x1f1\x1fgw\x1f1700000000000",
			"c\x1f{u}\x1f3\x1f4\x1f1")
		items = append(items, core.Value{Kind: core.ValueString, Str: pick(s, "u0.1.1", "u5.1700000000000.9")}, core.Value{Kind: core.ValueString, Str: entry})
	}
	return core.Value{Kind: core.ValueArray, Array: items}
}

// genRecord returns the two hash fields of a device record (lua/recordlib.lua).
// genRecord makes a device's static and dynamic items (core/lua/recordlib.lua).
func genRecord(s *source, id string, now int64) (static, dynamic string) {
	seen := now - int64(s.intn(700))*1000
	st := []string{id, strconv.Itoa(s.intn(8)), strconv.Itoa(s.intn(5)), pick(s, "", "gw"), "tok",
		pick(s, "30000", "60000"), strconv.FormatInt(seen-5000, 16)}
	if m := pick(s, "", "k\x1ev", "a\x1e\x1eb\x1ec"); m != "" {
		st = append(st, m)
	}
	dy := strconv.FormatInt(seen, 16) + "\x1f" + strconv.Itoa(s.intn(400)*1000)
	return strings.Join(st, "\x1f"), dy
}

// genReply decodes a reply that keeps the contract of the named script.
func genReply(s *source, name string, args []string) core.Value {
	now := genInt(s, t0.UnixMilli())
	switch name {
	case "beat":
		tokens := make([]string, items(name, args))
		for i := range tokens {
			tokens[i] = pick(s, "tok", "")
		}
		return core.Value{Kind: core.ValueString, Str: strings.Join(tokens, "\x1f")}
	case "leave":
		return genInt(s, int64(s.intn(2)))
	case "touch":
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now}}
	case "heartbeat":
		var res []core.Value
		for range items(name, args) {
			from, to := int64(-1), int64(-1)
			if s.bool() {
				from, to = int64(s.intn(5)), int64(s.intn(5))
			}
			c := pick(s, "", "", "", "REPLACED", "NOSESSION", "TOOMANY", "SKEW")
			res = append(res, core.Value{Kind: core.ValueString, Str: c}, core.Value{Kind: core.ValueString, Str: pick(s, "tok", "")}, genInt(s, from), genInt(s, to),
				core.Value{Kind: core.ValueString, Str: pick(s, "", "u1.1700000000000.3")}, core.Value{Kind: core.ValueString, Str: pick(s, "", "", "1")})
		}
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, core.Value{Kind: core.ValueArray, Array: res}, genLost(s)}}
	case "login":
		var kicks []core.Value
		for range s.intn(3) {
			kicks = append(kicks, core.Value{Kind: core.ValueString, Str: pick(s, "d1", "d:2")}, genInt(s, int64(s.intn(5))), core.Value{Kind: core.ValueString, Str: pick(s, "", "gw")},
				core.Value{Kind: core.ValueString, Str: pick(s, "", "u2.1700000000000.4")})
		}
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, core.Value{Kind: core.ValueString, Str: pick(s, "", "", "TOOMANY")}, core.Value{Kind: core.ValueArray, Array: kicks}, genEvents(s), genLost(s)}}
	case "logout":
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, core.Value{Kind: core.ValueString, Str: pick(s, "", "", "REPLACED")}, genInt(s, int64(s.intn(2))), genEvents(s), genLost(s)}}
	case "manual":
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, genEvents(s), genLost(s)}}
	case "status":
		var users []core.Value
		for range items(name, args) {
			static, dynamic := "", ""
			if n := s.intn(4); n > 0 {
				static, dynamic = strconv.Itoa(s.intn(5)), "\x1f"
				for _, id := range []string{"web", "ios", "x y"}[:n] {
					st, dy := genRecord(s, id, t0.UnixMilli())
					static += "\x1d" + st
					dynamic += "\x1d" + dy
				}
			}
			mexp := pick(s, int64(0), t0.UnixMilli()+60000, t0.UnixMilli()-1)
			users = append(users, core.Value{Kind: core.ValueArray, Array: []core.Value{genInt(s, int64(s.intn(3))), genInt(s, mexp),
				{Kind: core.ValueString, Str: static}, {Kind: core.ValueString, Str: dynamic}}})
		}
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, {Kind: core.ValueArray, Array: users}}}
	case "count":
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, genInt(s, int64(s.intn(1000))), genInt(s, t0.UnixMilli())}}
	case "active":
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, genInt(s, int64(s.intn(1000)))}}
	case "members":
		var flat []core.Value
		for range s.intn(4) {
			flat = append(flat, core.Value{Kind: core.ValueString, Str: pick(s, "m1", "m:2", "{m}")}, genInt(s, t0.UnixMilli()-int64(s.intn(60000))))
		}
		next := pick(s, [2]int64{-1, -1}, [2]int64{0, 4}, [2]int64{2, 0})
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, genInt(s, next[0]), genInt(s, next[1]), {Kind: core.ValueArray, Array: flat}}}
	case "sweep_users":
		more := int64(0)
		if s.intn(6) == 0 {
			more = 1
		}
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, genInt(s, int64(s.intn(4))), genInt(s, more), {Kind: core.ValueString, Str: pick(s, "ok", "idle", "held")}, genEvents(s),
			genOutbox(s)}}
	case "outbox_ack":
		return genInt(s, int64(s.intn(3)))
	case "sweep_scopes":
		more := int64(0)
		if s.intn(6) == 0 {
			more = 1
		}
		return core.Value{Kind: core.ValueArray, Array: []core.Value{now, genInt(s, int64(s.intn(4))), genInt(s, int64(s.intn(4))), genInt(s, int64(s.intn(2))),
			genInt(s, more), {Kind: core.ValueString, Str: pick(s, "ok", "idle", "held")}, {Kind: core.ValueArray}}}
	}
	return genTree(s, 3)
}

// mutate replaces one node of v, chosen by the input, by a nasty value, or
// drops or adds an array item.
func mutate(s *source, v core.Value) core.Value {
	var nodes []*core.Value
	var walk func(*core.Value)
	walk = func(n *core.Value) {
		nodes = append(nodes, n)
		for i := range n.Array {
			walk(&n.Array[i])
		}
	}
	v = deepCopy(v)
	walk(&v)
	n := nodes[s.intn(len(nodes))]
	switch s.intn(6) {
	case 0:
		*n = core.Value{Kind: core.ValueInt, Int: nastyInts[s.intn(len(nastyInts))]}
	case 1:
		*n = core.Value{Kind: core.ValueString, Str: pick(s, nastyStrings...)}
	case 2:
		*n = genTree(s, 2)
	case 3:
		if n.Kind == core.ValueArray && len(n.Array) > 0 {
			n.Array = n.Array[:len(n.Array)-1]
		}
	case 4:
		if n.Kind == core.ValueArray {
			n.Array = append(n.Array, genTree(s, 1))
		}
	case 5:
		*n = core.Value{}
	}
	return v
}

func deepCopy(v core.Value) core.Value {
	if v.Array != nil {
		items := make([]core.Value, len(v.Array))
		for i := range v.Array {
			items[i] = deepCopy(v.Array[i])
		}
		v.Array = items
	}
	return v
}

// replyOp is one engine call of the reply target, with valid arguments:
// whatever goes wrong comes from the store. It returns the call's error, a
// list of impossible things in its result, and whether it served a count
// marked stale.
type replyOp struct {
	name string
	run  func(ctx context.Context, e *core.Engine, ref core.Presence) (err error, problems []string, stale bool)
}

var (
	room   = core.Scope{Class: "room", ID: "r1"}
	video  = core.Scope{Class: "video", ID: "v1"}
	approx = core.Scope{Class: "approx", ID: "a1"}
)

func statusProblems(sts ...core.UserStatus) (out []string) {
	for _, st := range sts {
		if !validStatus(st.Status) || st.Manual > core.ManualInvisible {
			out = append(out, "status "+renderStatus(st))
		}
		for _, d := range st.Devices {
			if d.Kind > core.KindAndroid || !validStatus(d.State) || d.State == core.StatusOffline {
				out = append(out, "device "+renderDevice(d))
			}
		}
	}
	return out
}

func changeProblems(cs []core.Change) (out []string) {
	for _, c := range cs {
		if !validStatus(c.From) || !validStatus(c.To) {
			out = append(out, "change "+renderChanges([]core.Change{c}))
		}
	}
	return out
}

func countProblems(what string, n int64) []string {
	if n < 0 {
		return []string{fmt.Sprintf("%s %d", what, n)}
	}
	return nil
}

func sweepProblems(r core.SweepReport) []string {
	out := changeProblems(r.Changes)
	if r.Visited < 0 || r.Removed < 0 || r.Released < 0 || r.Steps < 0 || r.Held < 0 {
		out = append(out, fmt.Sprintf("report %+v", r))
	}
	return out
}

// memberProblems flags members pages whose Next cursor the engine itself
// would refuse (checked on the model, which parses cursors the same way).
func memberProblems(ctx context.Context, ref core.Presence, sc core.Scope, p core.MemberPage) []string {
	if p.Next == "" {
		return nil
	}
	if _, err := opdo.Do[core.MemberPage](ctx, ref, core.ReadMembers{Scope: sc, Cursor: p.Next, Limit: 1}); errors.Is(err, core.ErrInvalid) {
		return []string{fmt.Sprintf("Next cursor %q is refused: %v", p.Next, err)}
	}
	return nil
}

var replyOps = []replyOp{
	{"Heartbeat", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		a, err := e.Heartbeat(ctx, core.Heartbeat{User: "u1", Device: "d1", Kind: core.KindWeb, Active: true, At: t0.Add(-time.Second)})
		return err, changeProblems(a.Changes), false
	}},
	{"Login", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		r, err := e.Login(ctx, core.Login{User: "u1", Device: "d1", Kind: core.KindIOS, Gateway: "gw"})
		probs := changeProblems(r.Changes)
		for _, k := range r.Kicked {
			if k.Kind > core.KindAndroid {
				probs = append(probs, fmt.Sprintf("kick %+v", k))
			}
		}
		return err, probs, false
	}},
	{"Logout", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		r, err := e.Logout(ctx, "u1", "d1", "tok")
		return err, changeProblems(r.Changes), false
	}},
	{"Disconnect", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		r, err := e.Disconnect(ctx, "u1", "d1", "")
		return err, changeProblems(r.Changes), false
	}},
	{"SetManual", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		cs, err := e.SetManual(ctx, "u1", core.ManualDND, time.Minute)
		return err, changeProblems(cs), false
	}},
	{"Status", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		st, err := e.Status(ctx, "u1")
		return err, statusProblems(st), false
	}},
	{"Statuses", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		sts, err := e.Statuses(ctx, []string{"u1", "u2", "u3", "u4"})
		return err, statusProblems(sts...), false
	}},
	{"TouchBatch", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		return e.TouchBatch(ctx, []core.ScopeTouch{{Scope: room, Member: "m1"}, {Scope: video, Member: "m2"}, {Scope: approx, Member: "m3"}}), nil, false
	}},
	{"Leave", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		_, err := e.Leave(ctx, video, "m1")
		return err, nil, false
	}},
	{"Count", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		var probs []string
		stale := false
		for _, sc := range []core.Scope{room, video, approx} {
			c, err := e.Count(ctx, sc)
			if err != nil {
				return err, probs, stale
			}
			stale = stale || c.Stale
			probs = append(probs, countProblems("Count "+sc.String(), c.N)...)
		}
		return nil, probs, stale
	}},
	{"Members", func(ctx context.Context, e *core.Engine, ref core.Presence) (error, []string, bool) {
		var probs []string
		for _, sc := range []core.Scope{room, video} {
			p, err := e.Members(ctx, sc, "", 10)
			if err != nil {
				return err, probs, false
			}
			probs = append(probs, memberProblems(ctx, ref, sc, p)...)
		}
		return nil, probs, false
	}},
	{"ActiveWithin", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		var probs []string
		for _, sc := range []core.Scope{room, video, approx} {
			n, err := e.ActiveWithin(ctx, sc, 10*time.Second)
			if err != nil {
				return err, probs, false
			}
			probs = append(probs, countProblems("ActiveWithin "+sc.String(), n)...)
		}
		return nil, probs, false
	}},
	{"SweepUsers", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		r, err := e.SweepUsers(ctx)
		return err, sweepProblems(r), false
	}},
	{"SweepScopes", func(ctx context.Context, e *core.Engine, _ core.Presence) (error, []string, bool) {
		r, err := e.SweepScopes(ctx)
		return err, sweepProblems(r), false
	}},
}

// hangAfter is how long one engine call may take before the target calls it
// a hang; the fake store answers at once, so any real wait is a loop.
const hangAfter = 10 * time.Second

// FuzzReplies runs every Engine method over a fake store whose replies come
// from the input: replies that keep their script's contract, such replies
// with one node mutated (huge, negative or out-of-range integers, wrong
// kinds, non-numeric strings, items dropped or added, nil), arbitrary value
// trees, NOSCRIPT, failures and unreachable-server errors, and the wrong
// number of results; a cached-read capability serves count keys likewise.
// No call may panic or hang. A call that consumed only contract-keeping
// replies must succeed (or return the refusal a result code stands for); a
// call that was handed a reply breaking its contract must fail with an error
// matching core.ErrReply, one handed a failure with a *core.StoreError.
// Whatever succeeds must hold nothing impossible: statuses, kinds and manual
// statuses in range, counts not negative, cursors the engine accepts.
func FuzzReplies(f *testing.F) {
	f.Add([]byte{0, 5, 8, 8, 8})
	f.Add([]byte{1, 0, 9, 9, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, data []byte) { runReplies(t, data) })
}

// runReplies is the body of FuzzReplies.
func runReplies(t testing.TB, data []byte) {
	s := newSource(data)
	log := &replyLog{}
	fs := &fakeStore{s: s, log: log}
	var store core.Store = fs
	if s.bool() {
		store = cachedFakeStore{fs}
	}
	clk := &manualClock{t: t0}
	cfg := core.Config{Clock: clk.Now, UserBuckets: 2, ScopeBuckets: 2, Classes: testClasses(), Rand: &detRand{}}
	e, err := core.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := core.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 12 && !s.exhausted(); n++ {
		op := replyOps[s.intn(len(replyOps))]
		log.reset()
		type outcome struct {
			err      error
			problems []string
			stale    bool
		}
		done := make(chan outcome, 1)
		ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
		go func() {
			err, probs, stale := op.run(ctx, e, ref)
			done <- outcome{err, probs, stale}
		}()
		var o outcome
		select {
		case o = <-done:
		case <-time.After(hangAfter + time.Second):
			t.Fatalf("%s hangs", op.name)
		}
		cancel()
		log.mu.Lock()
		judgeReply(t, op.name, o.err, o.problems, o.stale, log)
		log.mu.Unlock()
	}
}

// allKnown reports whether every flaw is the known one.
func allKnown(flaws []string, known string) bool {
	for _, f := range flaws {
		if f != known {
			return false
		}
	}
	return len(flaws) > 0
}

// judgeReply holds one engine call's outcome to what its store did.
func judgeReply(t testing.TB, name string, err error, problems []string, stale bool, log *replyLog) {
	t.Helper()
	var se *core.StoreError
	isStoreErr := errors.As(err, &se)
	if log.unlisted {
		t.Errorf("%s ran a script that luascripts.All does not list", name)
	}
	switch {
	case errors.Is(err, core.ErrInvalid) || errors.Is(err, core.ErrUnsupported):
		t.Errorf("%s: %v for valid arguments", name, err)
	case log.unknown:
		// A script without a contract here: no panic, no hang is all.
	case err == nil && log.broken:
		t.Errorf("%s succeeded although Eval returned the wrong number of results", name)
	case err == nil && log.storeErr && !(stale && log.unavail):
		t.Errorf("%s succeeded although a call failed (stale=%v)", name, stale)
	case err == nil && len(log.invalid) > 0:
		t.Errorf("%s accepted a reply that breaks its script's contract: %s", name, strings.Join(log.invalid, "; "))
	case err == nil && log.refusal != nil:
		t.Errorf("%s succeeded although the reply refused it (%v)", name, log.refusal)
	case err == nil && len(problems) > 0:
		t.Errorf("%s returned impossible results: %s", name, strings.Join(problems, "; "))
	case err == nil:
	case log.broken:
		if !isStoreErr || !errors.Is(err, core.ErrReply) {
			t.Errorf("%s: %v after a wrong number of results, want a *StoreError matching ErrReply", name, err)
		}
	case log.storeErr:
		if !isStoreErr && !(len(log.invalid) > 0 && errors.Is(err, core.ErrReply)) {
			t.Errorf("%s: %v after a failed call, want a *StoreError", name, err)
		}
		if isStoreErr && !strings.HasPrefix(err.Error(), "presence: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	case len(log.invalid) > 0:
		if !errors.Is(err, core.ErrReply) {
			t.Errorf("%s: %v after a reply breaking its contract (%s), want ErrReply", name, err, strings.Join(log.invalid, "; "))
		}
	case log.soft && errors.Is(err, core.ErrReply):
	case log.refusal != nil:
		if !errors.Is(err, log.refusal) {
			t.Errorf("%s: %v, the reply said %v", name, err, log.refusal)
		}
	default:
		t.Errorf("%s failed on contract-keeping replies: %v", name, err)
	}
}
