package conformance

import (
	"bytes"
	"context"
	"math/rand"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
)

// concOp issues heartbeats and status reads of distinct users at once, each
// from a goroutine of its own, all released together: an engine as users get
// it (group commit on, Config.GroupCommit's default) combines them, and each
// caller must still get what its own call returns alone. One call at a time
// never combines, so without this step a group commit that hands callers each
// other's results went unnoticed. The users are disjoint, so the model runs
// the calls one after the other, in any order, for the same results.
type concOp struct {
	beats    []core.Heartbeat // of distinct users
	syms     []sym            // the token and client time of each beat
	statuses []string         // distinct users, none of them beating in the step
}

func (o concOp) String() string {
	parts := make([]string, 0, len(o.beats)+len(o.statuses))
	for i, hb := range o.beats {
		parts = append(parts, "heartbeat "+beatString(hb, o.syms[i]))
	}
	for _, u := range o.statuses {
		parts = append(parts, "status "+u)
	}
	return "concurrently {" + strings.Join(parts, "; ") + "}"
}

// calls is the number of calls the step makes.
func (o concOp) calls() int { return len(o.beats) + len(o.statuses) }

// heartbeat returns beat i. Every beat carries a token: the engine draws
// an implicit login's token when it plans the beat, as a seed and the
// beat's position in the batch it joins, so that a tokenless beat's token
// depends on what it was combined with, which the model cannot know. A
// device with no token to send sends a bogus one (an implicit login with
// the client's token under PolicyMulti, refused under the others).
func (o concOp) heartbeat(x *runner, i int) core.Heartbeat {
	hb := x.beat(o.beats[i], o.syms[i], maxSkew)
	if hb.Token == "" {
		hb.Token = bogusToken
	}
	return hb
}

// one makes call i of the step and renders what it returned.
func (o concOp) one(x *runner, p core.Presence, i int) obs {
	var out obs
	var op core.Op
	if i < len(o.beats) {
		op = o.heartbeat(x, i)
	} else {
		op = core.ReadStatus{User: o.statuses[i-len(o.beats)]}
	}
	v, err := p.Do(x.ctx, op)
	out.text = x.outcome(&out, op, v, err)
	return out
}

func (o concOp) run(x *runner, p core.Presence) obs {
	n := o.calls()
	parts := make([]obs, n)
	if x.gate == nil { // the model, or a Presence that does not combine
		for i := range parts {
			parts[i] = o.one(x, p, i)
		}
	} else {
		start := make(chan struct{})
		var wg sync.WaitGroup
		users := o.callUsers()
		for i := range parts {
			wg.Go(func() {
				x.gate.own(users[i])
				<-start
				parts[i] = o.one(x, p, i)
			})
		}
		close(start)
		x.gate.openWhenQueued(x.ctx, n)
		wg.Wait()
	}
	var out obs
	texts := make([]string, n)
	for i, part := range parts {
		texts[i] = part.text
		out.changes = append(out.changes, part.changes...)
		out.kicks = append(out.kicks, part.kicks...)
		out.issued = append(out.issued, part.issued...)
	}
	out.text = strings.Join(texts, "; ")
	return out
}

// callUsers returns the user of each call, in the order of the calls.
func (o concOp) callUsers() []string {
	var us []string
	for _, hb := range o.beats {
		us = append(us, hb.User)
	}
	return append(us, o.statuses...)
}

// concUsers are users of concurrent steps only, besides genUsers: six
// calls in all, so that with Config.GroupCommit's two round trips on the
// wire four calls queue and leave together, and a batch often holds two
// calls of one kind besides one of the other.
var concUsers = []string{"u4", "u5"}

// randomConcOp draws a concurrent step: one call for each generated user
// and each of concUsers.
func randomConcOp(r *rand.Rand) concOp {
	users := append(append([]string(nil), genUsers...), concUsers...)
	r.Shuffle(len(users), func(i, j int) { users[i], users[j] = users[j], users[i] })
	nb := r.Intn(len(users) + 1)
	o := concOp{statuses: users[nb:]}
	for _, u := range users[:nb] {
		hb, s := randomBeat(r)
		hb.User = u
		s.at %= 2 // a beat beyond MaxSkew is refused before it is sent, so it would not queue
		if s.tok == tokNone {
			s.tok = tokCur // see heartbeat
		}
		o.beats, o.syms = append(o.beats, hb), append(o.syms, s)
	}
	return o
}

// gate holds the round trips of a concurrent step at the Store until the
// step's other calls have queued in the engine's group commit, so that they
// combine whatever the scheduler does, and records whether a caller's
// goroutine sent another caller's call: combining happened. (A combined
// batch may still send its calls in several round trips, each of one
// user's, when their cost exceeds a round trip's budget, so the users of
// one round trip do not tell.)
type gate struct {
	open chan struct{}

	mu       sync.Mutex
	owner    map[string]uint64 // user → goroutine of its call
	opened   bool
	held     int  // round trips waiting for open
	combined bool // a goroutine sent another caller's call

	stacks []byte // openWhenQueued's buffer for goroutine dumps
}

func newGate() *gate {
	return &gate{open: make(chan struct{}), owner: map[string]uint64{}}
}

// own records that the calling goroutine makes user's call.
func (g *gate) own(user string) {
	id := goroutineID()
	g.mu.Lock()
	g.owner[user] = id
	g.mu.Unlock()
}

// enter sees one round trip, on the goroutine that sends it; it blocks
// until the gate opens. A user is recognised as an argument of its own
// (every user script takes the user IDs so).
func (g *gate) enter(ctx context.Context, calls []core.Call) {
	id := goroutineID()
	g.mu.Lock()
	for _, c := range calls {
		for _, a := range c.Args {
			if owner, ok := g.owner[a]; ok && owner != id {
				g.combined = true
			}
		}
	}
	if g.opened {
		g.mu.Unlock()
		return
	}
	g.held++
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

// queueWait bounds how long a step waits for its calls to queue; past it,
// the gate opens anyway; a run in which no step combined fails (Check).
const queueWait = 10 * time.Second

// openWhenQueued opens the gate once each of the step's n calls is either
// held at the Store (the leaders, one per round trip group commit allows)
// or waiting in group commit's queue, or after queueWait.
func (g *gate) openWhenQueued(ctx context.Context, n int) {
	deadline := time.Now().Add(queueWait)
	// a dump of every goroutine stops the world: back off, as the
	// sequences of other targets share the process
	pause := 50 * time.Microsecond
	for time.Now().Before(deadline) && ctx.Err() == nil {
		g.mu.Lock()
		held := g.held
		g.mu.Unlock()
		if held+g.queuedCalls() >= n {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, 2*time.Millisecond)
	}
	g.mu.Lock()
	g.opened = true
	g.mu.Unlock()
	close(g.open)
}

// wasCombined reports whether a goroutine sent another caller's call.
func (g *gate) wasCombined() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.combined
}

// queuedCalls counts the goroutines blocked in group commit's queue (in
// core's Engine.wait itself): the engine keeps its queue to
// itself, and its callers' stacks are the only outside view of it. A rename
// of Engine.wait makes concurrent steps wait queueWait and fail, loudly.
func (g *gate) queuedCalls() int {
	if g.stacks == nil {
		g.stacks = make([]byte, 64<<10)
	}
	var buf []byte
	for {
		n := runtime.Stack(g.stacks, true)
		if n < len(g.stacks) {
			buf = g.stacks[:n]
			break
		}
		g.stacks = make([]byte, 2*len(g.stacks))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		// the header, then the frame that blocks (runtime frames are left
		// out of tracebacks): a queued job blocks in wait itself
		lines := bytes.SplitN(g, []byte("\n"), 3)
		if len(lines) >= 2 && bytes.Contains(lines[1], []byte("presence/core.(*Engine).wait(")) {
			count++
		}
	}
	return count
}

// goroutineID returns the calling goroutine's ID, from its stack's header
// ("goroutine 42 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
