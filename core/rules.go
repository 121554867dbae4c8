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

// itemSep separates the items of a user's record (lua/recordlib.lua): its
// state, then one item per device and per fence that needs one.
const itemSep = "\x1d"

// dynPrefix starts the field of a user's dynamic record in its page.
const dynPrefix = "\x01"

// fencePrefix starts a fence's item in a user's record.
const fencePrefix = "\x02"

// fence is a device's fence: until end, a heartbeat of the device with no
// live session is refused unless it carries token (none when "").
type fence struct {
	end   int64
	token string
}

// decodeItem reads a device's items of a user's records
// (lua/recordlib.lua): static (device ID, bits, kind, gateway, token,
// interval, loginAt in hex, metadata) and dynamic (lastSeen in hex,
// lastSeen - lastActive).
func decodeItem(static, dynamic string) (string, record, error) {
	f := strings.SplitN(static, unitSep, 8)
	d := strings.Split(dynamic, unitSep)
	if len(f) < 7 || len(d) != 2 {
		return "", record{}, replyErr("device items have %d+%d fields, want 7 or 8, and 2", len(f), len(d))
	}
	bits, err := strconv.Atoi(f[1])
	if err != nil || bits < 0 || bits > 7 {
		return "", record{}, replyErr("device item bits %q", f[1])
	}
	k, err := strconv.Atoi(f[2])
	if err != nil || !inRange(int64(k), len(kindNames)) {
		return "", record{}, replyErr("device item kind %q", f[2])
	}
	r := record{kind: Kind(k), gateway: f[3], token: f[4], background: bits&1 != 0, gone: bits&2 != 0}
	if len(f) == 8 {
		r.meta = f[7]
	}
	var n [4]int64
	for i, s := range []string{f[5], f[6], d[0], d[1]} {
		base := 10
		if i == 1 || i == 2 {
			base = 16 // instants (lua/recordlib.lua)
		}
		if n[i], err = strconv.ParseInt(s, base, 64); err != nil {
			return "", record{}, replyErr("device item field %q", s)
		}
	}
	r.interval, r.loginAt, r.seen, r.active = n[0], n[1], n[2], n[2]-n[3]
	return f[0], r, nil
}

// decodeDevices reads the devices of a user's records ("" none), leaving
// out its state and its fences, which show no device.
func decodeDevices(static, dynamic string) (map[string]record, error) {
	recs := map[string]record{}
	if static == "" {
		return recs, nil
	}
	items, dyns := strings.Split(static, itemSep), strings.Split(dynamic, itemSep)
	// the header starts with the published status, one digit
	if h := items[0]; h == "" || h[0] < '0' || int(h[0]-'0') >= len(statusNames) {
		return nil, replyErr("user record header %q", items[0])
	}
	d := 1 // past the pending change
	for _, item := range items[1:] {
		if strings.HasPrefix(item, fencePrefix) {
			continue
		}
		if d >= len(dyns) {
			return nil, replyErr("user record has more devices than dynamic items")
		}
		id, r, err := decodeItem(item, dyns[d])
		if err != nil {
			return nil, err
		}
		d++
		recs[id] = r
	}
	return recs, nil
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

// classCode is the device class PolicyExclusivePerKind keeps one device
// of, as login.lua's class compares them.
func (k Kind) classCode() string { return k.class() }
