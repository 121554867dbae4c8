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
)

// op is one step of a sequence. Steps are plain values: a sequence can be
// printed, replayed and shrunk. Inputs that depend on earlier outcomes
// (session tokens) are named symbolically and resolved when the step runs.
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

// ---- user presence

// beatSpec is one heartbeat.
type beatSpec struct {
	user, dev  string
	kind       core.Kind
	tok        tokenMode
	active, bg bool
	gw         string
	meta       map[string]string
	at         int // 0: no client time; 1: 1.5 s ago; 2: beyond MaxSkew ahead
}

func (b beatSpec) String() string {
	s := b.user + "/" + b.dev + " " + b.kind.String() + " " + b.tok.String()
	if b.active {
		s += " active"
	}
	if b.bg {
		s += " background"
	}
	if b.gw != "" {
		s += " gw=" + b.gw
	}
	if b.meta != nil {
		s += " meta=" + renderMeta(b.meta)
	}
	switch b.at {
	case 1:
		s += " at=-1.5s"
	case 2:
		s += " at=+skew"
	}
	return s
}

func (b beatSpec) heartbeat(x *runner, skew time.Duration) core.Heartbeat {
	hb := core.Heartbeat{User: b.user, Device: b.dev, Kind: b.kind, Token: x.book.token(b.user, b.dev, b.tok),
		Active: b.active, Background: b.bg, Gateway: b.gw, Meta: b.meta}
	switch b.at {
	case 1:
		hb.At = x.now().Add(-1500 * time.Millisecond)
	case 2:
		hb.At = x.now().Add(skew + 2*time.Second)
	}
	return hb
}

// beatOp sends one heartbeat (Heartbeat) or several (HeartbeatBatch).
type beatOp struct {
	beats []beatSpec
	skew  time.Duration
}

func (o beatOp) String() string {
	parts := make([]string, len(o.beats))
	for i, b := range o.beats {
		parts[i] = b.String()
	}
	if len(parts) == 1 {
		return "heartbeat " + parts[0]
	}
	return "heartbeat batch {" + strings.Join(parts, "; ") + "}"
}

func (o beatOp) run(x *runner, p core.Presence) obs {
	var out obs
	beats := make([]core.Heartbeat, len(o.beats))
	for i, b := range o.beats {
		beats[i] = b.heartbeat(x, o.skew)
	}
	if len(beats) == 1 {
		ack, err := p.Heartbeat(x.ctx, beats[0])
		if err != nil && ack.Err == nil {
			ack.Err = err
		}
		out.text = x.ack(&out, beats[0], ack)
		return out
	}
	acks, err := p.HeartbeatBatch(x.ctx, beats)
	if err != nil {
		out.text = errName(err)
		return out
	}
	if len(acks) != len(beats) {
		out.text = fmt.Sprintf("%d acks for %d beats", len(acks), len(beats))
		return out
	}
	parts := make([]string, len(acks))
	for i, ack := range acks {
		parts[i] = x.ack(&out, beats[i], ack)
	}
	out.text = strings.Join(parts, "; ")
	return out
}

func (x *runner) ack(o *obs, hb core.Heartbeat, ack core.Ack) string {
	if ack.Err != nil {
		return errName(ack.Err)
	}
	o.issued = append(o.issued, [2]string{hb.User + "/" + hb.Device, ack.Token})
	return "ok token=" + ack.Token + " " + x.changeList(o, ack.Changes)
}

// loginOp logs a device in, optionally under another policy than the
// engine's.
type loginOp struct {
	user, dev string
	kind      core.Kind
	gw        string
	bg        bool
	meta      map[string]string
	policy    *core.Policy
	// tok is the token the login asks for (Login.Token): none (a new
	// one), the device's current one (a retry whose reply was lost), or a
	// token of the client's choosing.
	tok tokenMode
}

func (o loginOp) String() string {
	s := "login " + o.user + "/" + o.dev + " " + o.kind.String()
	if o.gw != "" {
		s += " gw=" + o.gw
	}
	if o.bg {
		s += " background"
	}
	if o.meta != nil {
		s += " meta=" + renderMeta(o.meta)
	}
	if o.policy != nil {
		s += " policy=" + o.policy.String()
	}
	switch o.tok {
	case tokCur:
		s += " (retry with its token)"
	case tokBogus:
		s += " with token " + bogusToken
	}
	return s
}

func (o loginOp) run(x *runner, p core.Presence) obs {
	var out obs
	res, err := p.Login(x.ctx, core.Login{User: o.user, Device: o.dev, Kind: o.kind, Gateway: o.gw,
		Background: o.bg, Meta: o.meta, Policy: o.policy, Token: x.book.token(o.user, o.dev, o.tok)})
	if err != nil {
		out.text = errName(err)
		return out
	}
	out.issued = append(out.issued, [2]string{o.user + "/" + o.dev, res.Token})
	kicks := make([]string, len(res.Kicked))
	for i, k := range res.Kicked {
		kicks[i] = x.kick(k)
		if k.Gateway != "" {
			out.kicks = append(out.kicks, k.Gateway+"|"+kicks[i])
		}
	}
	sort.Strings(kicks)
	out.text = "ok token=" + res.Token + " kicked=[" + strings.Join(kicks, " ") + "] " + x.changeList(&out, res.Changes)
	return out
}

// endOp logs a device out or disconnects it.
type endOp struct {
	logout    bool
	user, dev string
	tok       tokenMode
}

func (o endOp) String() string {
	verb := "disconnect "
	if o.logout {
		verb = "logout "
	}
	return verb + o.user + "/" + o.dev + " " + o.tok.String()
}

func (o endOp) run(x *runner, p core.Presence) obs {
	var out obs
	tok := x.book.token(o.user, o.dev, o.tok)
	var r core.Ended
	var err error
	if o.logout {
		r, err = p.Logout(x.ctx, o.user, o.dev, tok)
	} else {
		r, err = p.Disconnect(x.ctx, o.user, o.dev, tok)
	}
	if err != nil {
		out.text = errName(err)
		return out
	}
	out.text = "removed=" + strconv.FormatBool(r.Removed) + " " + x.changeList(&out, r.Changes)
	return out
}

// manualOp sets a manual status.
type manualOp struct {
	user string
	m    core.Manual
	ttl  time.Duration
}

func (o manualOp) String() string {
	s := "manual " + o.user + " " + o.m.String()
	if o.ttl != 0 {
		s += " for " + o.ttl.String()
	}
	return s
}

func (o manualOp) run(x *runner, p core.Presence) obs {
	var out obs
	cs, err := p.SetManual(x.ctx, o.user, o.m, o.ttl)
	if err != nil {
		out.text = errName(err)
		return out
	}
	out.text = "ok " + x.changeList(&out, cs)
	return out
}

// statusOp reads one user's status (Status) or several (Statuses).
type statusOp struct{ users []string }

func (o statusOp) String() string {
	if len(o.users) == 1 {
		return "status " + o.users[0]
	}
	return "statuses " + strings.Join(o.users, ",")
}

func (o statusOp) run(x *runner, p core.Presence) obs {
	var sts []core.UserStatus
	if len(o.users) == 1 {
		st, err := p.Status(x.ctx, o.users[0])
		if err != nil {
			return obs{text: errName(err)}
		}
		sts = []core.UserStatus{st}
	} else {
		var err error
		if sts, err = p.Statuses(x.ctx, o.users); err != nil {
			return obs{text: errName(err)}
		}
	}
	parts := make([]string, len(sts))
	for i, st := range sts {
		parts[i] = x.status(st)
	}
	return obs{text: strings.Join(parts, "; ")}
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

// touchOp touches members of scopes (Touch, or TouchBatch for several).
type touchOp struct{ touches []core.ScopeTouch }

func (o touchOp) String() string {
	parts := make([]string, len(o.touches))
	for i, t := range o.touches {
		parts[i] = t.Scope.String() + " " + t.Member
	}
	if len(parts) == 1 {
		return "touch " + parts[0]
	}
	return "touch batch {" + strings.Join(parts, "; ") + "}"
}

func (o touchOp) run(x *runner, p core.Presence) obs {
	var err error
	if len(o.touches) == 1 {
		err = p.Touch(x.ctx, o.touches[0].Scope, o.touches[0].Member)
	} else {
		err = p.TouchBatch(x.ctx, o.touches)
	}
	if err != nil {
		return obs{text: errName(err)}
	}
	return obs{text: "ok"}
}

// leaveOp removes a member from a scope.
type leaveOp struct {
	sc     core.Scope
	member string
}

func (o leaveOp) String() string { return "leave " + o.sc.String() + " " + o.member }

func (o leaveOp) run(x *runner, p core.Presence) obs {
	ok, err := p.Leave(x.ctx, o.sc, o.member)
	if err != nil {
		return obs{text: errName(err)}
	}
	return obs{text: "was there=" + strconv.FormatBool(ok)}
}

// countOp reads a scope's count, twice in a row when twice is set (the
// second read of a compact count is a client-side cache hit where the
// adapter caches).
type countOp struct {
	sc    core.Scope
	twice bool
}

func (o countOp) String() string {
	if o.twice {
		return "count twice " + o.sc.String()
	}
	return "count " + o.sc.String()
}

func (o countOp) run(x *runner, p core.Presence) obs {
	var out obs
	n := 1
	if o.twice {
		n = 2
	}
	parts := make([]string, n)
	for i := range parts {
		c, err := p.Count(x.ctx, o.sc)
		if err != nil {
			parts[i] = errName(err)
			continue
		}
		parts[i] = fmt.Sprintf("n=%s asOf=%s stale=%t", number(&out, o.sc, c.N), x.rel(c.AsOf), c.Stale)
	}
	out.text = strings.Join(parts, "; ")
	return out
}

// membersOp lists a scope's members, page by page.
type membersOp struct {
	sc    core.Scope
	limit int
}

func (o membersOp) String() string { return fmt.Sprintf("members %s by %d", o.sc, o.limit) }

// maxPages bounds a listing, so that a cursor that never ends fails the step.
const maxPages = 64

func (o membersOp) run(x *runner, p core.Presence) obs {
	var pages []string
	cursor := ""
	for range maxPages {
		page, err := p.Members(x.ctx, o.sc, cursor, o.limit)
		if err != nil {
			pages = append(pages, errName(err))
			break
		}
		ids := make([]string, len(page.Members))
		for i, m := range page.Members {
			ids[i] = m.ID + "@" + x.rel(m.LastSeen)
		}
		pages = append(pages, strings.Join(ids, " "))
		if cursor = page.Next; cursor == "" {
			return obs{text: strings.Join(pages, " | ")}
		}
	}
	return obs{text: strings.Join(pages, " | ") + " | …"}
}

// activeOp counts the members touched within d.
type activeOp struct {
	sc core.Scope
	d  time.Duration
}

func (o activeOp) String() string { return "active within " + o.d.String() + " " + o.sc.String() }

func (o activeOp) run(x *runner, p core.Presence) obs {
	var out obs
	n, err := p.ActiveWithin(x.ctx, o.sc, o.d)
	if err != nil {
		out.text = errName(err)
		return out
	}
	out.text = "n=" + number(&out, o.sc, n)
	return out
}

// sweepOp runs a sweep pass over users or scopes. Reports compare by what
// they did (changes, removed, released), not by how many steps it took.
type sweepOp struct{ scopes bool }

func (o sweepOp) String() string {
	if o.scopes {
		return "sweep scopes"
	}
	return "sweep users"
}

func (o sweepOp) run(x *runner, p core.Presence) obs {
	var out obs
	var r core.SweepReport
	var err error
	if o.scopes {
		r, err = p.SweepScopes(x.ctx)
	} else {
		r, err = p.SweepUsers(x.ctx)
	}
	if err != nil {
		out.text = errName(err)
		return out
	}
	out.text = fmt.Sprintf("removed=%d released=%d changes=%s", r.Removed, r.Released, x.changeList(&out, r.Changes))
	return out
}

// ---- rejected input

// invalidOp makes a call with one bad argument; both sides must reject it
// naming the same field, before sending anything.
type invalidOp struct{ which int }

var invalidNames = []string{
	"heartbeat with an empty user",
	"login with a 129-byte device",
	"touch of an unknown class",
	"members with limit 0",
	"active within 0s",
	"manual status with a negative ttl",
	"status of a user with a control character",
	"heartbeat with 17 metadata entries",
	"members with a malformed cursor",
	"logout with a token holding a control character",
	"count of a scope with an empty ID",
	"login with an unknown kind",
}

func (o invalidOp) String() string { return "invalid: " + invalidNames[o.which] }

func (o invalidOp) run(x *runner, p core.Presence) obs {
	var err error
	ex := core.Scope{Class: "ex", ID: "r1"}
	switch o.which {
	case 0:
		_, err = p.Heartbeat(x.ctx, core.Heartbeat{Device: "d1"})
	case 1:
		_, err = p.Login(x.ctx, core.Login{User: "u1", Device: strings.Repeat("d", core.MaxIDBytes+1)})
	case 2:
		err = p.Touch(x.ctx, core.Scope{Class: "nope", ID: "r1"}, "m1")
	case 3:
		_, err = p.Members(x.ctx, ex, "", 0)
	case 4:
		_, err = p.ActiveWithin(x.ctx, ex, 0)
	case 5:
		_, err = p.SetManual(x.ctx, "u1", core.ManualDND, -time.Second)
	case 6:
		_, err = p.Status(x.ctx, "u\x01")
	case 7:
		meta := map[string]string{}
		for i := range core.MaxMetaEntries + 1 {
			meta["k"+strconv.Itoa(i)] = "v"
		}
		_, err = p.Heartbeat(x.ctx, core.Heartbeat{User: "u1", Device: "d1", Meta: meta})
	case 8:
		_, err = p.Members(x.ctx, ex, "not-a-cursor", 10)
	case 9:
		_, err = p.Logout(x.ctx, "u1", "d1", "a\x01b")
	case 10:
		_, err = p.Count(x.ctx, core.Scope{Class: "ex"})
	case 11:
		_, err = p.Login(x.ctx, core.Login{User: "u1", Device: "d1", Kind: core.Kind(99)})
	}
	if err == nil {
		return obs{text: "accepted"}
	}
	if !errors.Is(err, core.ErrInvalid) {
		return obs{text: "not ErrInvalid: " + errName(err)}
	}
	return obs{text: errName(err)}
}
