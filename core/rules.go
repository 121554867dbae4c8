package core

import (
	"sort"
	"strconv"
	"strings"
)

// This file holds the presence rules in Go: the same rules as the Lua
// library (lua/userlib.lua, and the steady beat's inline copy in
// lua/heartbeat_steady.lua), used to derive states from stored records and
// by the reference model. TestRuleVectors runs the vectors of
// testdata/rules.json against each copy; the conformance suite checks
// that the engine and the model agree.

// record is a stored device session (the encoding is described in lua/recordlib.lua).
type record struct {
	kind       Kind
	gateway    string
	token      string
	loginAt    int64
	seen       int64
	active     int64
	background bool
	interval   int64
	gone       bool
	meta       string
}

const (
	unitSep   = "\x1f"
	recordSep = "\x1e"
)

// dynamicPrefix starts the hash field of a record's dynamic part
// (lua/recordlib.lua explains the split).
const dynamicPrefix = "\x01"

// fencePrefix starts the hash field of a device's fence, which the device
// hash keeps apart from its session record when the record does not imply
// the fence (lua/recordlib.lua).
const fencePrefix = "\x02"

// steadyField is the device hash's copy of the user's due score, which
// the steady beat reads (lua/recordlib.lua); it shows no device.
const steadyField = "\x03"

// fence is a device's fence: until end, a heartbeat of the device with no
// live session is refused unless it carries token (none when "").
type fence struct {
	end   int64
	token string
}

// decodeRecord reads a record from its two parts.
func decodeRecord(static, dynamic string) (record, error) {
	f := strings.SplitN(static, unitSep, 6)
	d := strings.Split(dynamic, unitSep)
	if len(f) != 6 || len(d) != 4 {
		return record{}, replyErr("device record has %d+%d fields, want 6+4", len(f), len(d))
	}
	k, err := strconv.Atoi(f[0])
	if err != nil || !inRange(int64(k), len(kindNames)) {
		return record{}, replyErr("device record kind %q", f[0])
	}
	r := record{kind: Kind(k), gateway: f[1], token: f[2], meta: f[5], background: d[2] == "1", gone: d[3] == "1" || d[3] == "3"}
	for _, n := range []struct {
		s   string
		out *int64
	}{{f[3], &r.loginAt}, {f[4], &r.interval}, {d[0], &r.seen}, {d[1], &r.active}} {
		if *n.out, err = strconv.ParseInt(n.s, 10, 64); err != nil {
			return record{}, replyErr("device record field %q", n.s)
		}
	}
	return r, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (s *settings) window(r record) int64 {
	if r.background {
		return s.push
	}
	return 2 * r.interval
}

// deadline is the last instant at which the device is alive, or for a gone
// (logged-out) record the last instant its token stays refused (kept in
// active).
func (s *settings) deadline(r record) int64 {
	if r.gone {
		return r.active
	}
	return r.seen + s.window(r)
}

// state is the device state of docs/design.md §5.
func (s *settings) state(r record, now int64) Status {
	switch {
	case r.gone || now > s.deadline(r):
		return StatusOffline
	case r.background:
		return StatusPushOnline
	case now-r.active >= s.idle:
		return StatusAway
	}
	return StatusOnline
}

// aggregate is the status others see, by the rules of docs/design.md §6.
func aggregate(states []Status, manual Manual) Status {
	best := StatusOffline
	for _, st := range states {
		if st > best && st <= StatusOnline {
			best = st
		}
	}
	switch {
	case best == StatusOffline:
		return StatusOffline
	case manual == ManualDND:
		return StatusDND
	case manual == ManualInvisible:
		return StatusOffline
	}
	return best
}

// Aggregate returns the status others see for a user whose devices are in
// the given states and whose manual status is manual: OFFLINE with no live
// device, DND or (for INVISIBLE) OFFLINE by the manual status, else the most
// present device (ONLINE over AWAY over PUSH_ONLINE).
func Aggregate(states []Status, manual Manual) Status { return aggregate(states, manual) }

// cause is why a user's status is being re-evaluated (docs/design.md §7).
type cause uint8

const (
	causeChange cause = iota // heartbeat, login, manual status
	causeLeave               // disconnect or expiry: OFFLINE waits for LeaveDelay
	causeLogout              // explicit logout: OFFLINE is published at once
)

// debounce is a user's published status and the change waiting to be published.
type debounce struct {
	pub     Status
	pending bool
	pend    Status
	due     int64
}

// observe applies the debounce of docs/design.md §7 to the current status
// cur and reports the change it publishes, if any. Going offline by a
// disconnect or an expiry waits LeaveDelay from now, when it is seen.
func (d *debounce) observe(cur Status, c cause, now int64, s *settings) (from, to Status, published bool) {
	if cur == d.pub {
		d.pending, d.due = false, 0
		return 0, 0, false
	}
	switch {
	case c == causeLogout && cur == StatusOffline:
		d.due = now
	case d.pending && d.pend == cur:
	case cur == StatusOffline && c == causeLeave:
		d.due = now + s.leave
	case d.pending:
		d.due = min(d.due, now+s.coalesce)
	default:
		d.due = now + s.coalesce
	}
	d.pending, d.pend = true, cur
	if now >= d.due {
		from = d.pub
		d.pub, d.pending, d.pend, d.due = cur, false, 0, 0
		return from, cur, true
	}
	return 0, 0, false
}

// encodeMeta renders metadata as "k\x1ev\x1ek\x1ev" with keys in order.
func encodeMeta(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(recordSep)
		}
		b.WriteString(k)
		b.WriteString(recordSep)
		b.WriteString(m[k])
	}
	return b.String()
}

func decodeMeta(s string) map[string]string {
	if s == "" {
		return nil
	}
	f := strings.Split(s, recordSep)
	m := make(map[string]string, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		m[f[i]] = f[i+1]
	}
	return m
}

func sortStrings(s []string) { sort.Strings(s) }

func (k Kind) classCode() string {
	if k == KindIOS || k == KindAndroid {
		return "mobile"
	}
	return strconv.Itoa(int(k))
}
