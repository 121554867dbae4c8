package core

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The plans of the user operations: heartbeats, sessions, manual status,
// statuses, online counts. Each is a state machine (a body, plan.go) over
// its rounds; Engine's methods of the same names drive them.

// beatPlan is a heartbeat's plan: the steady beat, whose script runs the
// full path itself for a beat it cannot apply, or else heartbeat_full.lua,
// then the change log when it decided a change. It is one allocation, or
// none when its driver reuses it (startBeat).
type beatPlan struct {
	plan plan[Ack]
	p    *planner
	b    uint32
	hb   Heartbeat
	seed string
	full bool // the round sent is heartbeat_full.lua's
	// the steady call's arguments: now, the page prefix, the settings,
	// ARG_LEFT and one beat's fields (appendSteady, lua/heartbeat_steady.lua)
	args [3 + len(settings{}.beatParams) + steadyFields]string
}

// startBeat makes bp the plan of hb at now, whatever it held (a new plan,
// or one reused: planPools); checked says the caller has already applied
// checkHeartbeat (the engine's group commit does, before it merges a beat
// with others), so that a beat is validated once. An implicit login's
// token seed is drawn when the plan is made.
func (p *planner) startBeat(bp *beatPlan, now string, hb Heartbeat, checked bool) {
	*bp = beatPlan{plan: plan[Ack]{m: machine{scripts: &p.scripts, now: now}}, p: p, hb: hb}
	m := &bp.plan.m
	m.body = bp
	if !checked {
		if err := p.checkHeartbeat(hb); err != nil {
			m.note(note{kind: noteHeartbeats, refused: 1})
			m.fail(err)
			return
		}
	}
	bp.b = p.settings.keys.userBucket(hb.User)
	// drawn before the steady beat, so that a beat draws one seed whichever
	// script applies it, as the model's does
	seed, err := p.seedFor(hb.Token == "")
	if err != nil {
		m.fail(err)
		return
	}
	bp.seed = seed
	if !p.mayBeSteady(hb) {
		m.settle(bp.fullRound())
		return
	}
	args := append(append(bp.args[:0], m.now, p.settings.users[bp.b].pagePrefix), p.settings.beatParams[:]...)
	args = append(args, p.leftArg(bp.b, seed, nil))
	m.settle(m.one("heartbeat", Call{SHA: p.scripts.beat.sha, Keys: p.settings.users[bp.b].steady,
		Args: p.appendSteady(args, bp.b, hb)}), nil)
}

// fullRound is the round of the beat's full path (lua/heartbeat_full.lua).
func (bp *beatPlan) fullRound() (*round, error) {
	p, m := bp.p, &bp.plan.m
	bp.full = true
	args := append(p.userArgs(m.now, bp.b, 12), "1")
	return m.one("heartbeat", Call{SHA: p.scripts.heartbeat.sha, Keys: p.userKeys(bp.b),
		Args: p.appendBeat(args, bp.hb, bp.seed, 0)}), nil
}

func (bp *beatPlan) next(vals []Value) (*round, error) {
	if bp.full {
		return bp.decided(vals[0])
	}
	// the steady beat's reply: the beat applied, or decided by the full
	// path in the same call, or left to heartbeat_full.lua
	var token [1]string
	decided, err := bp.p.decodeSteady(vals[0], bp.b, token[:])
	switch {
	case err != nil:
		return nil, err
	case decided.Kind != ValueNil:
		return bp.decided(decided)
	case token[0] == "":
		return bp.fullRound()
	}
	bp.plan.m.note(note{kind: noteHeartbeats, accepted: 1})
	bp.plan.out = Ack{Token: token[0]}
	return nil, nil
}

// decided ends the plan with the full path's reply v (decodeBeats).
func (bp *beatPlan) decided(v Value) (*round, error) {
	m := &bp.plan.m
	var acks [1]Ack
	var ids [1]string
	var run = [1]int{0}
	if err := bp.p.decodeBeats(m, bp.b, v, []Heartbeat{bp.hb}, run[:], acks[:], ids[:]); err != nil {
		return nil, err
	}
	m.note(beatNote(acks[:]))
	bp.plan.out = acks[0]
	m.deliver(acks[0].Changes, ids[:], nil, nil)
	return bp.p.finish(m, acks[0].Err)
}

// beatsPlan is a HeartbeatBatch's plan: one round of steady beats, one of
// the beats they left, each in bounded calls (a user's beats in one call),
// then the change log when they decided changes. The token seeds are
// drawn when the plan is made. Its slices and its calls' arguments are its
// own room, which a driver that reuses the plan (startBeats) reuses.
type beatsPlan struct {
	plan   plan[[]Ack]
	p      *planner
	beats  []Heartbeat
	acks   []Ack
	ids    []string // by beat: the outbox ID of its change; nil until a full path runs
	bucket []uint32 // by beat
	seed   []string // by beat: its run's token seed
	pos    []int    // by beat: its position in its run
	order  []int    // the valid beats, by bucket and user
	runs   [][]int  // order, a run a bucket
	full   bool     // the round sent is heartbeat_full.lua's
	// by call of the round sent: the beats it carries, their bucket
	parts  [][]int
	partIn []uint32

	// room
	these   []int    // the beats offered to the steady beat
	left    []int    // the beats left to the full path
	leftRun [][]int  // left, a run a bucket
	applied []bool   // by beat
	tokens  []string // by beat of a steady call
	places  []int    // by beat of a steady call
	args    []string // the calls' arguments
	calls   []Call   // the round's calls
	costs   []int    // and their costs
	r       round
}

// startBeats makes bp the plan of beats at now, keeping the room of what
// it held; checked is startBeat's.
func (p *planner) startBeats(bp *beatsPlan, now string, beats []Heartbeat, checked bool) {
	n := len(beats)
	bp.plan = plan[[]Ack]{m: machine{scripts: &p.scripts, now: now}}
	bp.p, bp.beats, bp.ids, bp.full = p, beats, nil, false
	m := &bp.plan.m
	m.body = bp
	if err := checkBatch("beats", n); err != nil {
		m.fail(err)
		return
	}
	bp.acks = grown(bp.acks, n) // the outcome: read before the plan is reused
	bp.bucket = grown(bp.bucket, n)
	bp.seed = grown(bp.seed, n)
	bp.pos = grown(bp.pos, n)
	bp.applied = grown(bp.applied, n)
	bp.args = bp.args[:0]
	// Valid beats, ordered by bucket and user (stable, so a user's beats
	// keep their order), make one call per run of equal buckets.
	bp.order = bp.order[:0]
	for i, hb := range beats {
		if !checked {
			bp.acks[i].Err = p.checkHeartbeat(hb)
		}
		if bp.acks[i].Err == nil {
			bp.bucket[i] = p.settings.keys.userBucket(hb.User)
			bp.order = append(bp.order, i)
		}
	}
	slices.SortStableFunc(bp.order, bp.compare)
	bp.runs = bp.runs[:0]
	for lo := 0; lo < len(bp.order); {
		hi := lo + 1
		for hi < len(bp.order) && bp.bucket[bp.order[hi]] == bp.bucket[bp.order[lo]] {
			hi++
		}
		bp.runs = append(bp.runs, bp.order[lo:hi:hi])
		lo = hi
	}
	// An implicit login's token is seed.j for the j-th beat of its run,
	// one seed per run that has a beat without a token: drawn before the
	// steady beats, so that a beat's token does not depend on which script
	// applies it.
	for _, run := range bp.runs {
		tokenless := false
		for _, i := range run {
			tokenless = tokenless || beats[i].Token == ""
		}
		s, err := p.seedFor(tokenless)
		if err != nil {
			m.fail(err)
			return
		}
		for j, i := range run {
			bp.seed[i], bp.pos[i] = s, j
		}
	}
	m.settle(bp.steadyRound())
}

// compare orders beats x and y by bucket, then user.
func (bp *beatsPlan) compare(x, y int) int {
	return cmp.Or(cmp.Compare(bp.bucket[x], bp.bucket[y]), strings.Compare(bp.beats[x].User, bp.beats[y].User))
}

// grown returns s with length n, zeroed, reusing its room.
func grown[T any](s []T, n int) []T {
	s = slices.Grow(s[:0], n)[:n]
	clear(s)
	return s
}

// room returns an empty slice of the plan's arguments room with space for
// n: the calls' arguments, which the plan owns.
func (bp *beatsPlan) room(n int) []string {
	if cap(bp.args)-len(bp.args) < n {
		bp.args = make([]string, 0, max(n, 2*cap(bp.args), 256))
	}
	at := len(bp.args)
	bp.args = bp.args[:at+n]
	return bp.args[at : at : at+n]
}

// round returns the plan's round of its calls.
func (bp *beatsPlan) round() *round {
	bp.r = round{op: "heartbeat", calls: bp.calls, costs: bp.costs}
	return &bp.r
}

// steadyRound offers the beats of each run (one bucket's valid beats, in
// order) that may be steady to lua/heartbeat_steady.lua, in calls of at
// most steadyChunk beats of one run, as even as can be (spans: each call
// decides as many of the beats it cannot apply), sent a few at a time. A
// user with several beats in the batch has them all left to
// heartbeat_full.lua, so that one script applies them together and in
// order: split between the two scripts, they could be applied out of
// order or apart. Without such a beat, it goes on with the full path's
// round at once.
func (bp *beatsPlan) steadyRound() (*round, error) {
	p, m, beats := bp.p, &bp.plan.m, bp.beats
	bp.calls, bp.costs, bp.parts, bp.partIn = bp.calls[:0], bp.costs[:0], bp.parts[:0], bp.partIn[:0]
	bp.these = slices.Grow(bp.these[:0], len(bp.order))
	for _, run := range bp.runs {
		from := len(bp.these)
		for k, i := range run {
			// a run holds a user's beats next to each other
			repeated := (k > 0 && beats[run[k-1]].User == beats[i].User) ||
				(k+1 < len(run) && beats[run[k+1]].User == beats[i].User)
			if !repeated && p.mayBeSteady(beats[i]) {
				bp.these = append(bp.these, i)
			}
		}
		these := bp.these[from:]
		b, seed := bp.bucket[run[0]], bp.seed[run[0]]
		k := spanCount(len(these), steadyChunk)
		for s := range k {
			lo, hi := span(len(these), k, s)
			part := these[lo:hi:hi]
			var places []int
			if seed != "" {
				places = bp.places[:0]
				for _, i := range part {
					places = append(places, bp.pos[i])
				}
				bp.places = places
			}
			args := p.appendSteadyHead(bp.room(steadyHead+steadyFields*len(part)), m.now, b, seed, places)
			for _, i := range part {
				args = p.appendSteady(args, b, beats[i])
			}
			bp.calls = append(bp.calls, Call{SHA: p.scripts.beat.sha, Keys: p.settings.users[b].steady, Args: args})
			bp.costs = append(bp.costs, len(part)*steadyMicros)
			bp.parts, bp.partIn = append(bp.parts, part), append(bp.partIn, b)
		}
	}
	if len(bp.calls) == 0 {
		return bp.fullRound(bp.runs)
	}
	return bp.round(), nil
}

// fullRound sends the beats of runs to lua/heartbeat_full.lua, in calls of
// at most fullChunk beats (more for a user with more), a user's beats in
// one, sent a few at a time; without any, the plan ends.
func (bp *beatsPlan) fullRound(runs [][]int) (*round, error) {
	p, m := bp.p, &bp.plan.m
	if len(runs) > 0 && bp.ids == nil {
		bp.ids = make([]string, len(bp.beats)) // steady beats publish nothing: no IDs to keep
	}
	bp.full = true
	bp.calls, bp.costs, bp.parts, bp.partIn = bp.calls[:0], bp.costs[:0], bp.parts[:0], bp.partIn[:0]
	for _, run := range runs {
		for lo := 0; lo < len(run); {
			hi := chunkEnd(bp.beats, run, lo, fullChunk)
			part := run[lo:hi:hi]
			lo = hi
			b := bp.bucket[part[0]]
			args := append(p.appendUserArgs(bp.room(userArgCount+1+11*len(part)), m.now, b), strconv.Itoa(len(part)))
			for _, i := range part {
				args = p.appendBeat(args, bp.beats[i], bp.seed[i], bp.pos[i])
			}
			bp.calls = append(bp.calls, Call{SHA: p.scripts.heartbeat.sha, Keys: p.userKeys(b), Args: args})
			bp.costs = append(bp.costs, len(part)*fullMicros)
			bp.parts, bp.partIn = append(bp.parts, part), append(bp.partIn, b)
		}
	}
	if len(bp.calls) == 0 {
		return bp.end()
	}
	return bp.round(), nil
}

func (bp *beatsPlan) next(vals []Value) (*round, error) {
	if bp.full {
		for c, part := range bp.parts {
			if err := bp.p.decodeBeats(&bp.plan.m, bp.partIn[c], vals[c], bp.beats, part, bp.acks, bp.ids); err != nil {
				return nil, err
			}
		}
		return bp.end()
	}
	return bp.steadyApplied(vals)
}

// steadyApplied takes the steady beats' replies: it sets the acks of the
// beats they applied, and of those their script decided on the full path
// (at most leftChunk of a call), and goes on with the full path's round
// for the beats left, in their runs' order.
func (bp *beatsPlan) steadyApplied(vals []Value) (*round, error) {
	applied := bp.applied // or decided
	for c, these := range bp.parts {
		tokens := grown(bp.tokens, len(these))
		bp.tokens = tokens
		decided, err := bp.p.decodeSteady(vals[c], bp.partIn[c], tokens)
		if err != nil {
			return nil, err
		}
		left := bp.left[:0]
		for j, i := range these {
			if tokens[j] != "" {
				bp.acks[i].Token, applied[i] = tokens[j], true
			} else {
				left = append(left, i)
			}
		}
		bp.left = left
		if decided.Kind == ValueNil {
			continue
		}
		left = left[:min(len(left), leftChunk)]
		if bp.ids == nil {
			bp.ids = make([]string, len(bp.beats))
		}
		if err := bp.p.decodeBeats(&bp.plan.m, bp.partIn[c], decided, bp.beats, left, bp.acks, bp.ids); err != nil {
			return nil, err
		}
		for _, i := range left {
			applied[i] = true
		}
	}
	// the runs of the beats left, in their order
	bp.left = slices.Grow(bp.left[:0], len(bp.order))
	bp.leftRun = bp.leftRun[:0]
	for _, run := range bp.runs {
		from := len(bp.left)
		for _, i := range run {
			if !applied[i] {
				bp.left = append(bp.left, i)
			}
		}
		if len(bp.left) > from {
			bp.leftRun = append(bp.leftRun, bp.left[from:len(bp.left):len(bp.left)])
		}
	}
	return bp.fullRound(bp.leftRun)
}

// end ends the plan with every beat's ack and the changes decided.
func (bp *beatsPlan) end() (*round, error) {
	m := &bp.plan.m
	for i, a := range bp.acks {
		if len(a.Changes) > 0 {
			m.deliver(a.Changes, bp.ids[i:i+1], nil, nil)
		}
	}
	m.note(beatNote(bp.acks))
	bp.plan.out = bp.acks
	return bp.p.finish(m, nil)
}

// chunkEnd is where the part of run (beat indexes, a user's beats next to
// each other) that starts at lo ends: at most n beats, but for a user with
// more, without splitting any user's beats.
func chunkEnd(beats []Heartbeat, run []int, lo, n int) int {
	hi := min(lo+n, len(run))
	for hi < len(run) && hi > lo && beats[run[hi]].User == beats[run[hi-1]].User {
		hi-- // the cut would split a user's beats: cut before them
	}
	if hi == lo { // one user with more than n beats: theirs alone
		for hi = lo + 1; hi < len(run) && beats[run[hi]].User == beats[run[lo]].User; hi++ {
		}
	}
	return hi
}

// seedFor returns a fresh token seed when a run of beats has one without a
// token (its implicit login gets seed.j), else "".
func (p *planner) seedFor(needed bool) (string, error) {
	if !needed {
		return "", nil
	}
	return p.newToken()
}

// mayBeSteady reports whether lua/heartbeat_steady.lua may apply hb. Every beat may,
// but one without a token under an exclusive policy: heartbeat_full.lua refuses
// it whatever is stored, so it changes nothing and can go there at once,
// out of its place among the user's other beats.
func (p *planner) mayBeSteady(hb Heartbeat) bool {
	return hb.Token != "" || p.settings.cfg.Policy == PolicyMulti
}

// beatNote counts accepted and refused beats for the metrics.
func beatNote(acks []Ack) note {
	accepted := 0
	for _, a := range acks {
		if a.Err == nil {
			accepted++
		}
	}
	return note{kind: noteHeartbeats, accepted: accepted, refused: len(acks) - accepted}
}

// loginPlan is a Login's plan: lua/login.lua, then the change log when it
// decided changes or kicks. A new token is drawn when the plan is made.
type loginPlan struct {
	plan        plan[LoginResult]
	p           *planner
	b           uint32
	user, token string
}

func (p *planner) login(now string, l Login) *plan[LoginResult] {
	lp := &loginPlan{plan: plan[LoginResult]{m: machine{scripts: &p.scripts, now: now}}, p: p, user: l.User}
	m := &lp.plan.m
	m.body = lp
	policy := p.settings.cfg.Policy
	if l.Policy != nil {
		policy = *l.Policy
	}
	if err := p.checkLogin(l, policy); err != nil {
		m.fail(err)
		return &lp.plan
	}
	lp.token = l.Token
	if lp.token == "" {
		var err error
		if lp.token, err = p.newToken(); err != nil {
			m.fail(err)
			return &lp.plan
		}
	}
	lp.b = p.settings.keys.userBucket(l.User)
	args := append(p.userArgs(now, lp.b, 9), l.User, l.Device, strconv.Itoa(int(l.Kind)), l.Gateway,
		strconv.Itoa(int(policy)), flag(l.Background), itoa(p.settings.interval[l.Kind]), encodeMeta(l.Meta), lp.token)
	m.settle(m.one("login", Call{SHA: p.scripts.login.sha, Keys: p.userKeys(lp.b), Args: args}), nil)
	return &lp.plan
}

func (lp *loginPlan) next(vals []Value) (*round, error) {
	p, m := lp.p, &lp.plan.m
	now, rest, err := splitReply(vals[0], 4)
	if err != nil {
		return nil, err
	}
	if err := p.found(m, lp.b, rest[3], now); err != nil {
		return nil, err
	}
	code, err := rest[0].asString()
	if err != nil {
		return nil, err
	}
	if err := codeErr(code); err != nil {
		return p.finish(m, err)
	}
	kicked, kickIDs, err := decodeKicks(lp.user, rest[1], now)
	if err != nil {
		return nil, err
	}
	changes, ids, err := decodeChanges(rest[2], now)
	if err != nil {
		return nil, err
	}
	lp.plan.out = LoginResult{Token: lp.token, Kicked: kicked, Changes: changes}
	m.deliver(changes, ids, kicked, kickIDs)
	return p.finish(m, nil)
}

// endPlan is the plan of lua/logout.lua for a Logout or a Disconnect
// (mode names which), then the change log when it decided a change.
type endPlan struct {
	plan plan[Ended]
	p    *planner
	b    uint32
	mode string
}

func (p *planner) end(now, mode, user, device, token string) *plan[Ended] {
	ep := &endPlan{plan: plan[Ended]{m: machine{scripts: &p.scripts, now: now}}, p: p, mode: mode}
	m := &ep.plan.m
	m.body = ep
	if err := checkEnd(user, device, token); err != nil {
		m.fail(err)
		return &ep.plan
	}
	ep.b = p.settings.keys.userBucket(user)
	args := append(p.userArgs(now, ep.b, 4), user, device, mode, token)
	m.settle(m.one(mode, Call{SHA: p.scripts.logout.sha, Keys: p.userKeys(ep.b), Args: args}), nil)
	return &ep.plan
}

func (ep *endPlan) next(vals []Value) (*round, error) {
	p, m := ep.p, &ep.plan.m
	now, rest, err := splitReply(vals[0], 4)
	if err != nil {
		return nil, err
	}
	if err := p.found(m, ep.b, rest[3], now); err != nil {
		return nil, err
	}
	code, err1 := rest[0].asString()
	removed, err2 := rest[1].asInt()
	if err1 != nil || err2 != nil {
		return nil, replyErr("%s: %s", ep.mode, vals[0])
	}
	if err := codeErr(code); err != nil {
		return p.finish(m, err)
	}
	changes, ids, err := decodeChanges(rest[2], now)
	if err != nil {
		return nil, err
	}
	ep.plan.out = Ended{Removed: removed == 1, Changes: changes}
	m.deliver(changes, ids, nil, nil)
	return p.finish(m, nil)
}

// manualPlan is a SetManual's plan: lua/manual.lua, then the change log
// when it decided a change.
type manualPlan struct {
	plan plan[[]Change]
	p    *planner
	b    uint32
}

func (p *planner) setManual(now, user string, md Manual, ttl time.Duration) *plan[[]Change] {
	mp := &manualPlan{plan: plan[[]Change]{m: machine{scripts: &p.scripts, now: now}}, p: p}
	m := &mp.plan.m
	m.body = mp
	if err := checkManual(user, md, ttl); err != nil {
		m.fail(err)
		return &mp.plan
	}
	mp.b = p.settings.keys.userBucket(user)
	args := append(p.userArgs(now, mp.b, 3), user, strconv.Itoa(int(md)), itoa(millis(ttl)))
	m.settle(m.one("manual", Call{SHA: p.scripts.manual.sha, Keys: p.userKeys(mp.b), Args: args}), nil)
	return &mp.plan
}

func (mp *manualPlan) next(vals []Value) (*round, error) {
	p, m := mp.p, &mp.plan.m
	now, rest, err := splitReply(vals[0], 2)
	if err != nil {
		return nil, err
	}
	if err := p.found(m, mp.b, rest[1], now); err != nil {
		return nil, err
	}
	changes, ids, err := decodeChanges(rest[0], now)
	if err != nil {
		return nil, err
	}
	mp.plan.out = changes
	m.deliver(changes, ids, nil, nil)
	return p.finish(m, nil)
}

// statusRead is the round of a status read: read-only calls of at most
// statusChunk users of one user bucket each, sent a few at a time
// (round.costs), and the statuses they return, in the order asked.
type statusRead struct {
	p      *planner
	users  []string
	chunks [][]int // by call: the users it reads, by index in users
}

// round returns the read's round at now.
func (sr *statusRead) round(now string) (*round, error) {
	p, users := sr.p, sr.users
	if err := checkUsers(users); err != nil {
		return nil, err
	}
	// the users by bucket, the buckets in the order they first appear
	bucket := make([]uint32, len(users))
	var order []uint32
	for i, u := range users {
		bucket[i] = p.settings.keys.userBucket(u)
		if !slices.Contains(order, bucket[i]) {
			order = append(order, bucket[i])
		}
	}
	var calls []Call
	var costs []int
	for _, b := range order {
		var group []int
		for i := range users {
			if bucket[i] == b {
				group = append(group, i)
			}
		}
		for _, sp := range spans(len(group), statusChunk) {
			chunk := group[sp[0]:sp[1]:sp[1]]
			args := append(p.userArgs(now, b, 1+len(chunk)), strconv.Itoa(len(chunk)))
			for _, i := range chunk {
				args = append(args, users[i])
			}
			calls = append(calls, Call{SHA: p.scripts.status.sha, Keys: p.userKeys(b), Args: args})
			costs = append(costs, len(chunk)*statusMicros)
			sr.chunks = append(sr.chunks, chunk)
		}
	}
	return &round{op: "status", calls: calls, costs: costs}, nil
}

// decode reads the round's values into out, one status per user.
func (sr *statusRead) decode(vals []Value, out []UserStatus) error {
	for c, chunk := range sr.chunks {
		now, rest, err := splitReply(vals[c], 1)
		if err != nil {
			return err
		}
		items, err := rest[0].asArray(len(chunk))
		if err != nil {
			return err
		}
		for j, i := range chunk {
			if out[i], err = sr.p.decodeStatus(sr.users[i], items[j], now); err != nil {
				return err
			}
		}
	}
	return nil
}

// statusPlan is a ReadStatus's plan: one status read.
type statusPlan struct {
	plan plan[UserStatus]
	read statusRead
	user [1]string
}

func (p *planner) status(now, user string) *plan[UserStatus] {
	sp := &statusPlan{plan: plan[UserStatus]{m: machine{scripts: &p.scripts, now: now}}}
	sp.user[0] = user
	sp.read = statusRead{p: p, users: sp.user[:]}
	if err := checkID("user", user); err != nil {
		sp.plan.m.start(sp, nil, err)
		return &sp.plan
	}
	sp.plan.m.body = sp
	sp.plan.m.settle(sp.read.round(now))
	return &sp.plan
}

func (sp *statusPlan) next(vals []Value) (*round, error) {
	var out [1]UserStatus
	if err := sp.read.decode(vals, out[:]); err != nil {
		return nil, err
	}
	sp.plan.out = out[0]
	return nil, nil
}

// statusesPlan is a ReadStatuses' plan: one status read.
type statusesPlan struct {
	plan plan[[]UserStatus]
	read statusRead
}

func (p *planner) statuses(now string, users []string) *plan[[]UserStatus] {
	sp := &statusesPlan{plan: plan[[]UserStatus]{m: machine{scripts: &p.scripts, now: now}},
		read: statusRead{p: p, users: users}}
	sp.plan.m.body = sp
	sp.plan.m.settle(sp.read.round(now))
	return &sp.plan
}

func (sp *statusesPlan) next(vals []Value) (*round, error) {
	out := make([]UserStatus, len(sp.read.users))
	if err := sp.read.decode(vals, out); err != nil {
		return nil, err
	}
	sp.plan.out = out
	return nil, nil
}

// onlinePlan is a ReadOnline's plan: one call per user bucket (the scripts
// read no clock: now is unused).
type onlinePlan struct {
	plan plan[map[Status]int64]
}

func (p *planner) online(now string) *plan[map[Status]int64] {
	op := &onlinePlan{plan: plan[map[Status]int64]{m: machine{scripts: &p.scripts, now: now}}}
	calls := make([]Call, len(p.settings.users))
	for b := range p.settings.users {
		calls[b] = Call{SHA: p.scripts.counts.sha, Keys: []string{p.settings.users[b].counts}}
	}
	op.plan.m.start(op, &round{op: "online", calls: calls}, nil)
	return &op.plan
}

func (op *onlinePlan) next(vals []Value) (*round, error) {
	out := publishedCounts()
	for _, v := range vals {
		flat, err := v.asArray(-1)
		if err != nil || len(flat)%2 != 0 {
			return nil, replyErr("online counts: %s", v)
		}
		for i := 0; i < len(flat); i += 2 {
			s, err1 := flat[i].asString()
			n, err2 := flat[i+1].asInt()
			code, err3 := strconv.Atoi(s)
			if err1 != nil || err2 != nil || err3 != nil || code <= 0 || !inRange(int64(code), len(statusNames)) {
				return nil, replyErr("online counts: %s", v)
			}
			out[Status(code)] += n
		}
	}
	op.plan.out = out
	return nil, nil
}
