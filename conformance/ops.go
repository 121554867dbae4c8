package conformance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/limits"
)

// op is one step of a sequence. Steps are plain values: a sequence can be
// printed, replayed and shrunk. Most are a core.Op run through Do (call);
// inputs that depend on earlier outcomes (session tokens) are named
// symbolically and resolved when the step runs.
type op interface {
	fmt.Stringer
	// run performs the step on p and renders what it observed.
	run(x *runner, p core.Presence) obs
}

// runner is what a step needs besides the Presence: the sequence's clock,
// its first instant (times are printed relative to it) and the tokens
// handed out so far.
type runner struct {
	ctx   context.Context
	t0    time.Time
	clock *clock
	book  *book
	// gate, on the engine's side of a concurrent step, holds its round
	// trips until its calls have queued (concOp); nil elsewhere.
	gate *gate
}

func (x *runner) now() time.Time { return x.clock.Now() }

// rel renders an instant relative to the start of the sequence.
func (x *runner) rel(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + strconv.FormatFloat(t.Sub(x.t0).Seconds(), 'f', 3, 64) + "s"
}

// obs is what one step observed on one Presence. Two observations agree
// when their texts are equal and their approximate numbers are close.
type obs struct {
	text string
	// approx are HyperLogLog estimates, which the model gives exactly.
	approx []int64
	// changes and kicks are the events the step should have published:
	// rendered changes, and kicks of sessions that had a gateway as
	// "gateway|kick".
	changes, kicks []string
	// issued are the session tokens the step handed out, by "user/device".
	issued [][2]string
}

// redisTolerance is how far Redis's HyperLogLog estimate of a scope's
// members may be from the exact count.
func redisTolerance(exact int64) int64 { return 1 + exact/50 }

// agree reports whether a (the model's) and b (the target's) observed the
// same, and if not, why; tolerance bounds the error of an approximate count.
func agree(a, b obs, tolerance func(exact int64) int64) (bool, string) {
	if a.text != b.text {
		return false, "observations differ"
	}
	if len(a.approx) != len(b.approx) {
		return false, "observations differ"
	}
	for i, n := range a.approx {
		if d := b.approx[i] - n; d > tolerance(n) || -d > tolerance(n) {
			return false, fmt.Sprintf("approximate count %d is more than %d away from %d", b.approx[i], tolerance(n), n)
		}
	}
	return true, ""
}

// errName names an error by the sentinel it matches, so that errors compare
// by meaning rather than by text.
func errName(err error) string {
	var ie *core.InputError
	switch {
	case errors.As(err, &ie):
		return "invalid(" + ie.Field + ")"
	case errors.Is(err, core.ErrSessionReplaced):
		return "ErrSessionReplaced"
	case errors.Is(err, core.ErrNoSession):
		return "ErrNoSession"
	case errors.Is(err, core.ErrTooManyDevices):
		return "ErrTooManyDevices"
	case errors.Is(err, core.ErrClockSkew):
		return "ErrClockSkew"
	case errors.Is(err, core.ErrUnsupported):
		return "ErrUnsupported"
	case errors.Is(err, core.ErrUnavailable):
		return "ErrUnavailable(" + err.Error() + ")"
	}
	return "error(" + err.Error() + ")"
}

func (x *runner) change(c core.Change) string {
	return c.User + ":" + c.From.String() + "→" + c.To.String() + "@" + x.rel(c.At)
}

func (x *runner) kick(k core.Kick) string {
	return k.User + "/" + k.Device + "(" + k.Kind.String() + ")@" + k.Gateway + " " + x.rel(k.At)
}

// changeList renders changes sorted, and adds them to o's events.
func (x *runner) changeList(o *obs, cs []core.Change) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = x.change(c)
	}
	o.changes = append(o.changes, out...)
	sort.Strings(out)
	return "[" + strings.Join(out, " ") + "]"
}

// ---- tokens

// tokenMode names the token a step sends.
type tokenMode uint8

const (
	tokNone  tokenMode = iota // no token
	tokCur                    // the latest token issued to the device
	tokStale                  // the one before it (superseded)
	tokBogus                  // a token never issued
)

var tokenNames = [...]string{"no token", "token", "stale token", "bogus token"}

func (m tokenMode) String() string { return tokenNames[m] }

// bogusToken is a well-formed token that no login issues (tokens are random).
const bogusToken = "0badc0de0badc0de"

// book records the session tokens handed out in a sequence, by "user/device".
type book struct{ tokens map[string][]string }

func newBook() *book { return &book{tokens: map[string][]string{}} }

func (b *book) token(user, dev string, m tokenMode) string {
	ts := b.tokens[user+"/"+dev]
	switch m {
	case tokCur:
		if len(ts) > 0 {
			return ts[len(ts)-1]
		}
	case tokStale:
		if len(ts) > 1 {
			return ts[len(ts)-2]
		}
		return bogusToken
	case tokBogus:
		return bogusToken
	}
	return ""
}

func (b *book) record(issued [][2]string) {
	for _, is := range issued {
		ts := b.tokens[is[0]]
		if len(ts) == 0 || ts[len(ts)-1] != is[1] {
			b.tokens[is[0]] = append(ts, is[1])
		}
	}
}

// ---- clock

// advanceOp moves the virtual clock forward.
type advanceOp struct{ d time.Duration }

func (o advanceOp) String() string { return "advance " + o.d.String() }

func (o advanceOp) run(x *runner, p core.Presence) obs { return obs{text: x.rel(x.now())} }

// ---- calls

// sym is the symbolic part of a heartbeat, a login or an end of a session:
// the token it sends, by name, and a beat's client time.
type sym struct {
	tok tokenMode
	at  int // 0: no client time; 1: 1.5 s ago; 2: beyond MaxSkew ahead
}

// call runs one core.Op through Do. Its session tokens are empty in op and
// named by syms instead: one for each beat of a Heartbeat or
// HeartbeatBatch, one for a Login (the token it asks for), Logout or
// Disconnect.
type call struct {
	op   core.Op
	syms []sym
	// twice reads a count twice in a row (the second read of a compact
	// count is a client-side cache hit where the adapter caches)
	twice bool
	// invalid names the bad argument of a call that both sides must reject,
	// naming the same field, before sending anything
	invalid string
}

// resolve returns c's op with its tokens and client times filled in.
func (c call) resolve(x *runner) core.Op {
	if len(c.syms) == 0 {
		return c.op
	}
	switch op := c.op.(type) {
	case core.Heartbeat:
		return x.beat(op, c.syms[0], maxSkew)
	case core.HeartbeatBatch:
		out := make(core.HeartbeatBatch, len(op))
		for i, hb := range op {
			out[i] = x.beat(hb, c.syms[i], maxSkew)
		}
		return out
	case core.Login:
		op.Token = x.book.token(op.User, op.Device, c.syms[0].tok)
		return op
	case core.Logout:
		op.Token = x.book.token(op.User, op.Device, c.syms[0].tok)
		return op
	case core.Disconnect:
		op.Token = x.book.token(op.User, op.Device, c.syms[0].tok)
		return op
	}
	return c.op
}

// beat fills in a heartbeat's token and client time.
func (x *runner) beat(hb core.Heartbeat, s sym, skew time.Duration) core.Heartbeat {
	hb.Token = x.book.token(hb.User, hb.Device, s.tok)
	switch s.at {
	case 1:
		hb.At = x.now().Add(-1500 * time.Millisecond)
	case 2:
		hb.At = x.now().Add(skew + 2*time.Second)
	}
	return hb
}

// maxPages bounds a listing, so that a cursor that never ends fails the step.
const maxPages = 64

func (c call) run(x *runner, p core.Presence) obs {
	var out obs
	op := c.resolve(x)
	switch o := op.(type) {
	case core.ReadMembers: // every page, from the first
		var pages []string
		for range maxPages {
			v, err := p.Do(x.ctx, o)
			if err != nil {
				pages = append(pages, errName(err))
				break
			}
			page := as[core.MemberPage](v)
			pages = append(pages, x.members(page))
			if o.Cursor = page.Next; o.Cursor == "" {
				out.text = strings.Join(pages, " | ")
				return out
			}
		}
		out.text = strings.Join(pages, " | ") + " | …"
		return out
	case core.ReadCount:
		if c.twice {
			parts := make([]string, 2)
			for i := range parts {
				v, err := p.Do(x.ctx, op)
				parts[i] = x.outcome(&out, op, v, err)
			}
			out.text = strings.Join(parts, "; ")
			return out
		}
	}
	v, err := p.Do(x.ctx, op)
	if c.invalid != "" {
		switch {
		case err == nil:
			out.text = "accepted"
		case !errors.Is(err, core.ErrInvalid):
			out.text = "not ErrInvalid: " + errName(err)
		default:
			out.text = errName(err)
		}
		return out
	}
	out.text = x.outcome(&out, op, v, err)
	return out
}

// as is an outcome as the type its op names, or the zero T (which then
// disagrees with the model's) if a target returned another type.
func as[T any](v any) T {
	t, _ := v.(T)
	return t
}

// outcome renders what op returned (v, err), adding the events and tokens
// it handed out to o. A heartbeat's refusal reads the same alone as in a
// batch.
func (x *runner) outcome(o *obs, op core.Op, v any, err error) string {
	if hb, ok := op.(core.Heartbeat); ok {
		ack := as[core.Ack](v)
		if err != nil && ack.Err == nil {
			ack.Err = err
		}
		return x.ack(o, hb, ack)
	}
	if err != nil {
		return errName(err)
	}
	switch op := op.(type) {
	case core.HeartbeatBatch:
		acks := as[[]core.Ack](v)
		if len(acks) != len(op) {
			return fmt.Sprintf("%d acks for %d beats", len(acks), len(op))
		}
		parts := make([]string, len(acks))
		for i, ack := range acks {
			parts[i] = x.ack(o, op[i], ack)
		}
		return strings.Join(parts, "; ")
	case core.Login:
		res := as[core.LoginResult](v)
		o.issued = append(o.issued, [2]string{op.User + "/" + op.Device, res.Token})
		kicks := make([]string, len(res.Kicked))
		for i, k := range res.Kicked {
			kicks[i] = x.kick(k)
			if k.Gateway != "" {
				o.kicks = append(o.kicks, k.Gateway+"|"+kicks[i])
			}
		}
		sort.Strings(kicks)
		return "ok token=" + res.Token + " kicked=[" + strings.Join(kicks, " ") + "] " + x.changeList(o, res.Changes)
	case core.Logout, core.Disconnect:
		r := as[core.Ended](v)
		return "removed=" + strconv.FormatBool(r.Removed) + " " + x.changeList(o, r.Changes)
	case core.SetManual:
		return "ok " + x.changeList(o, as[[]core.Change](v))
	case core.ReadStatus:
		return x.status(as[core.UserStatus](v))
	case core.ReadStatuses:
		sts := as[[]core.UserStatus](v)
		parts := make([]string, len(sts))
		for i, st := range sts {
			parts[i] = x.status(st)
		}
		return strings.Join(parts, "; ")
	case core.ScopeTouch, core.TouchBatch:
		return "ok"
	case core.Leave:
		return "was there=" + strconv.FormatBool(as[bool](v))
	case core.ReadCount:
		c := as[core.Count](v)
		return fmt.Sprintf("n=%s asOf=%s stale=%t", number(o, op.Scope, c.N), x.rel(c.AsOf), c.Stale)
	case core.ReadMembers:
		return x.members(as[core.MemberPage](v))
	case core.ReadActive:
		return "n=" + number(o, op.Scope, as[int64](v))
	case core.SweepUsers, core.SweepScopes:
		// Reports compare by what they did (changes, removed, released),
		// not by how many steps it took.
		r := as[core.SweepReport](v)
		return fmt.Sprintf("removed=%d released=%d changes=%s", r.Removed, r.Released, x.changeList(o, r.Changes))
	}
	return fmt.Sprintf("an outcome of %T", op)
}

func (x *runner) ack(o *obs, hb core.Heartbeat, ack core.Ack) string {
	if ack.Err != nil {
		return errName(ack.Err)
	}
	o.issued = append(o.issued, [2]string{hb.User + "/" + hb.Device, ack.Token})
	return "ok token=" + ack.Token + " " + x.changeList(o, ack.Changes)
}

// members renders one page of members.
func (x *runner) members(page core.MemberPage) string {
	ids := make([]string, len(page.Members))
	for i, m := range page.Members {
		ids[i] = m.ID + "@" + x.rel(m.LastSeen)
	}
	return strings.Join(ids, " ")
}

func (x *runner) status(st core.UserStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s manual=%s until=%s at=%s devices=[", st.User, st.Status, st.Manual, x.rel(st.ManualUntil), x.rel(st.At))
	for i, d := range st.Devices {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s %s gw=%q bg=%t login=%s seen=%s active=%s meta=%s", d.ID, d.Kind, d.State, d.Gateway,
			d.Background, x.rel(d.LoginAt), x.rel(d.LastSeen), x.rel(d.LastActive), renderMeta(d.Meta))
	}
	b.WriteString("]")
	return b.String()
}

func renderMeta(m map[string]string) string {
	if m == nil {
		return "nil"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = strconv.Quote(k) + ":" + strconv.Quote(m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// ---- how steps read

func (c call) String() string {
	if c.invalid != "" {
		return "invalid: " + c.invalid
	}
	switch op := c.op.(type) {
	case core.Heartbeat:
		return "heartbeat " + beatString(op, c.syms[0])
	case core.HeartbeatBatch:
		parts := make([]string, len(op))
		for i, hb := range op {
			parts[i] = beatString(hb, c.syms[i])
		}
		return "heartbeat batch {" + strings.Join(parts, "; ") + "}"
	case core.Login:
		return loginString(op, c.syms[0].tok)
	case core.Logout:
		return "logout " + op.User + "/" + op.Device + " " + c.syms[0].tok.String()
	case core.Disconnect:
		return "disconnect " + op.User + "/" + op.Device + " " + c.syms[0].tok.String()
	case core.SetManual:
		s := "manual " + op.User + " " + op.Manual.String()
		if op.TTL != 0 {
			s += " for " + op.TTL.String()
		}
		return s
	case core.ReadStatus:
		return "status " + op.User
	case core.ReadStatuses:
		return "statuses " + strings.Join(op.Users, ",")
	case core.ScopeTouch:
		return "touch " + op.Scope.String() + " " + op.Member
	case core.TouchBatch:
		parts := make([]string, len(op))
		for i, t := range op {
			parts[i] = t.Scope.String() + " " + t.Member
		}
		return "touch batch {" + strings.Join(parts, "; ") + "}"
	case core.Leave:
		return "leave " + op.Scope.String() + " " + op.Member
	case core.ReadCount:
		if c.twice {
			return "count twice " + op.Scope.String()
		}
		return "count " + op.Scope.String()
	case core.ReadMembers:
		return fmt.Sprintf("members %s by %d", op.Scope, op.Limit)
	case core.ReadActive:
		return "active within " + op.Within.String() + " " + op.Scope.String()
	case core.SweepUsers:
		return "sweep users"
	case core.SweepScopes:
		return "sweep scopes"
	}
	return fmt.Sprintf("%T", c.op)
}

func beatString(hb core.Heartbeat, s sym) string {
	out := hb.User + "/" + hb.Device + " " + hb.Kind.String() + " " + s.tok.String()
	if hb.Active {
		out += " active"
	}
	if hb.Background {
		out += " background"
	}
	if hb.Gateway != "" {
		out += " gw=" + hb.Gateway
	}
	if hb.Meta != nil {
		out += " meta=" + renderMeta(hb.Meta)
	}
	switch s.at {
	case 1:
		out += " at=-1.5s"
	case 2:
		out += " at=+skew"
	}
	return out
}

// loginString reads a login that asks for token tok (Login.Token): none (a
// new one), the device's current one (a retry whose reply was lost), or a
// token of the client's choosing.
func loginString(l core.Login, tok tokenMode) string {
	s := "login " + l.User + "/" + l.Device + " " + l.Kind.String()
	if l.Gateway != "" {
		s += " gw=" + l.Gateway
	}
	if l.Background {
		s += " background"
	}
	if l.Meta != nil {
		s += " meta=" + renderMeta(l.Meta)
	}
	if l.Policy != nil {
		s += " policy=" + l.Policy.String()
	}
	switch tok {
	case tokCur:
		s += " (retry with its token)"
	case tokBogus:
		s += " with token " + bogusToken
	}
	return s
}

// ---- scopes

// layoutOf is the layout of a scope class of the generated configurations,
// which their names spell.
func layoutOf(class string) core.Layout {
	switch {
	case strings.HasPrefix(class, "cp"):
		return core.LayoutCompact
	case strings.HasPrefix(class, "ap"):
		return core.LayoutApprox
	}
	return core.LayoutExact
}

func number(o *obs, sc core.Scope, n int64) string {
	if layoutOf(sc.Class) == core.LayoutApprox {
		o.approx = append(o.approx, n)
		return "~"
	}
	return strconv.FormatInt(n, 10)
}

// ---- rejected input

// invalidCalls are calls with one bad argument each.
var invalidCalls = func() []call {
	ex := core.Scope{Class: "ex", ID: "r1"}
	meta := map[string]string{}
	for i := range limits.MetaEntries + 1 {
		meta["k"+strconv.Itoa(i)] = "v"
	}
	return []call{
		{invalid: "heartbeat with an empty user", op: core.Heartbeat{Device: "d1"}},
		{invalid: "login with a 129-byte device", op: core.Login{User: "u1", Device: strings.Repeat("d", limits.IDBytes+1)}},
		{invalid: "touch of an unknown class", op: core.ScopeTouch{Scope: core.Scope{Class: "nope", ID: "r1"}, Member: "m1"}},
		{invalid: "members with limit 0", op: core.ReadMembers{Scope: ex}},
		{invalid: "active within 0s", op: core.ReadActive{Scope: ex}},
		{invalid: "manual status with a negative ttl", op: core.SetManual{User: "u1", Manual: core.ManualDND, TTL: -time.Second}},
		{invalid: "status of a user with a control character", op: core.ReadStatus{User: "u\x01"}},
		{invalid: "heartbeat with 17 metadata entries", op: core.Heartbeat{User: "u1", Device: "d1", Meta: meta}},
		{invalid: "members with a malformed cursor", op: core.ReadMembers{Scope: ex, Cursor: "not-a-cursor", Limit: 10}},
		{invalid: "logout with a token holding a control character", op: core.Logout{User: "u1", Device: "d1", Token: "a\x01b"}},
		{invalid: "count of a scope with an empty ID", op: core.ReadCount{Scope: core.Scope{Class: "ex"}}},
		{invalid: "login with an unknown kind", op: core.Login{User: "u1", Device: "d1", Kind: core.Kind(99)}},
	}
}()
