package core

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The plans of the user operations: heartbeats, sessions, manual status,
// statuses, online counts. Engine's methods of the same names drive them.

// Heartbeat plans Engine.Heartbeat at now: the steady beat, whose script
// runs the full path itself for a beat it cannot apply. An implicit
// login's token seed is drawn when the plan is made.
func (pl *Planner) heartbeat(now string, hb Heartbeat) *plan[Ack] { return pl.p.heartbeat(now, hb) }

func (p *planner) heartbeat(now string, hb Heartbeat) *plan[Ack] { return p.beat(now, hb, false) }

// beat is heartbeat's plan; checked says the caller has already applied
// checkHeartbeat (the engine's group commit does, before it merges a beat
// with others), so that a beat is validated once.
func (p *planner) beat(now string, hb Heartbeat, checked bool) *plan[Ack] {
	sp := &steadyPlan{plan: plan[Ack]{m: machine{scripts: &p.scripts, now: now}}, p: p, hb: hb}
	pl, m := &sp.plan, &sp.plan.m
	if !checked {
		if err := p.checkHeartbeat(hb); err != nil {
			m.note(note{kind: noteHeartbeats, refused: 1})
			m.fail(err)
			return pl
		}
	}
	b := p.settings.keys.userBucket(hb.User)
	// drawn before the steady beat, so that a beat draws one seed whichever
	// script applies it, as the model's does
	seed, err := p.seedFor(hb.Token == "")
	if err != nil {
		m.fail(err)
		return pl
	}
	if !p.mayBeSteady(hb) {
		m.settle(p.heartbeatFull(pl, b, hb, seed))
		return pl
	}
	sp.b, sp.seed = b, seed
	r := &m.r0
	args := append(append(sp.args[:0], m.now, p.settings.users[b].pagePrefix), p.settings.beatParams[:]...)
	args = append(args, p.leftArg(b, seed, nil))
	m.call0[0] = Call{SHA: p.scripts.beat.sha, Keys: p.settings.users[b].steady, Args: p.appendSteady(args, b, hb)}
	r.op, r.calls, r.then = "heartbeat", m.call0[:], sp
	m.settle(r, nil)
	return pl
}

// steadyPlan is a heartbeat's plan while it waits for the steady beat: the
// plan and what its continuation needs, in one allocation.
type steadyPlan struct {
	plan[Ack]
	p    *planner
	b    uint32
	hb   Heartbeat
	seed string
	// the steady call's arguments: now, the page prefix, the settings,
	// ARG_LEFT and one beat's fields (appendSteady, lua/heartbeat_steady.lua)
	args [3 + len(settings{}.beatParams) + steadyFields]string
}

// next takes the steady beat's reply: the beat applied, or decided by the
// full path in the same call, or left to heartbeat_full.lua.
func (sp *steadyPlan) next(vals []Value) (*round, error) {
	var token [1]string
	decided, err := sp.p.decodeSteady(vals[0], sp.b, token[:])
	if err != nil {
		return nil, err
	}
	if decided.Kind != ValueNil {
		return sp.p.heartbeatDecided(&sp.plan, sp.b, decided, sp.hb)
	}
	if token[0] == "" {
		return sp.p.heartbeatFull(&sp.plan, sp.b, sp.hb, sp.seed)
	}
	sp.m.note(note{kind: noteHeartbeats, accepted: 1})
	sp.out = Ack{Token: token[0]}
	return nil, nil
}

// heartbeatFull is the round of a heartbeat's full path
// (lua/heartbeat_full.lua) in bucket b.
func (p *planner) heartbeatFull(pl *plan[Ack], b uint32, hb Heartbeat, seed string) (*round, error) {
	m := &pl.m
	args := append(p.userArgs(m.now, b, 12), "1")
	calls := []Call{{SHA: p.scripts.heartbeat.sha, Keys: p.userKeys(b), Args: p.appendBeat(args, hb, seed, 0)}}
	return &round{op: "heartbeat", calls: calls, next: func(vals []Value) (*round, error) {
		return p.heartbeatDecided(pl, b, vals[0], hb)
	}}, nil
}

// heartbeatDecided ends a heartbeat's plan with the full path's reply v
// (decodeBeats) for it, in bucket b.
func (p *planner) heartbeatDecided(pl *plan[Ack], b uint32, v Value, hb Heartbeat) (*round, error) {
	m := &pl.m
	var acks [1]Ack
	var ids [1]string
	if err := p.decodeBeats(m, b, v, []Heartbeat{hb}, []int{0}, acks[:], ids[:]); err != nil {
		return nil, err
	}
	m.note(beatNote(acks[:]))
	pl.out = acks[0]
	m.deliver(acks[0].Changes, ids[:], nil, nil)
	return p.finish(m, acks[0].Err)
}

// HeartbeatBatch plans Engine.HeartbeatBatch at now: one round of steady
// beats, one of the beats they left, each in bounded calls (a user's
// beats in one call). The token seeds are drawn when the
// plan is made.
func (pl *Planner) heartbeatBatch(now string, beats []Heartbeat) *plan[[]Ack] {
	return pl.p.heartbeatBatch(now, beats)
}

func (p *planner) heartbeatBatch(now string, beats []Heartbeat) *plan[[]Ack] {
	return p.beats(now, beats, false)
}

// beats is heartbeatBatch's plan; checked says the caller has already
// applied checkHeartbeat to every beat (see beat).
func (p *planner) beats(now string, beats []Heartbeat, checked bool) *plan[[]Ack] {
	pl := newPlan[[]Ack](p, now)
	m := &pl.m
	if err := checkBatch("beats", len(beats)); err != nil {
		m.fail(err)
		return pl
	}
	acks := make([]Ack, len(beats))
	var ids []string // by beat: the outbox ID of its change, once a full path runs
	// Valid beats, ordered by bucket and user (stable, so a user's beats
	// keep their order), make one call per run of equal buckets.
	order := make([]int, 0, len(beats))
	bucket := make([]uint32, len(beats))
	for i, hb := range beats {
		if !checked {
			acks[i].Err = p.checkHeartbeat(hb)
		}
		if acks[i].Err == nil {
			bucket[i] = p.settings.keys.userBucket(hb.User)
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(x, y int) int {
		return cmp.Or(cmp.Compare(bucket[x], bucket[y]), strings.Compare(beats[x].User, beats[y].User))
	})
	var runs [][]int
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && bucket[order[hi]] == bucket[order[lo]] {
			hi++
		}
		runs = append(runs, order[lo:hi])
		lo = hi
	}
	// An implicit login's token is seed.j for the j-th beat of its run,
	// one seed per run that has a beat without a token: drawn before the
	// steady beats, so that a beat's token does not depend on which script
	// applies it.
	seed := make([]string, len(beats)) // by beat: its run's seed
	pos := make([]int, len(beats))     // by beat: its position in its run
	for _, run := range runs {
		tokenless := false
		for _, i := range run {
			tokenless = tokenless || beats[i].Token == ""
		}
		s, err := p.seedFor(tokenless)
		if err != nil {
			m.fail(err)
			return pl
		}
		for j, i := range run {
			seed[i], pos[i] = s, j
		}
	}
	full := func(runs [][]int) (*round, error) {
		if len(runs) > 0 && ids == nil {
			ids = make([]string, len(beats)) // steady beats publish nothing: no IDs to keep
		}
		// calls of at most fullChunk beats (more for a user with more),
		// a user's beats in one, sent a few at a time
		var calls []Call
		var costs []int
		var parts [][]int
		for _, run := range runs {
			for _, part := range chunkUsers(beats, run, fullChunk) {
				b := bucket[part[0]]
				args := append(p.userArgs(m.now, b, 1+11*len(part)), strconv.Itoa(len(part)))
				for _, i := range part {
					args = p.appendBeat(args, beats[i], seed[i], pos[i])
				}
				calls = append(calls, Call{SHA: p.scripts.heartbeat.sha, Keys: p.userKeys(b), Args: args})
				costs = append(costs, len(part)*fullMicros)
				parts = append(parts, part)
			}
		}
		end := func() (*round, error) {
			for i, a := range acks {
				if len(a.Changes) > 0 {
					m.deliver(a.Changes, ids[i:i+1], nil, nil)
				}
			}
			m.note(beatNote(acks))
			pl.out = acks
			return p.finish(m, nil)
		}
		if len(calls) == 0 {
			return end()
		}
		return &round{op: "heartbeat", calls: calls, costs: costs, next: func(vals []Value) (*round, error) {
			for r, part := range parts {
				if err := p.decodeBeats(m, bucket[part[0]], vals[r], beats, part, acks, ids); err != nil {
					return nil, err
				}
			}
			return end()
		}}, nil
	}
	m.settle(p.steadyBeats(m, beats, bucket, runs, seed, pos, acks, &ids, full))
	return pl
}

// steadyBeats offers the beats of each run (one bucket's valid beats, in
// order) that may be steady to lua/heartbeat_steady.lua, in calls of at
// most steadyChunk beats of one run, sent a few at a time, and sets the
// acks of those it applied, and of those the script decided on the full
// path (at most leftChunk of a call), whose outbox IDs go to *ids, made
// for every beat. It goes on with then and the runs of the beats left for
// heartbeat_full.lua, in their order. A user with several beats in the
// batch has them all left there, so that one script applies them together
// and in order: split between the two scripts, they could be applied out
// of order or apart. Seed and pos are by beat, as appendBeat takes them.
func (p *planner) steadyBeats(m *machine, beats []Heartbeat, bucket []uint32, runs [][]int, seed []string, pos []int,
	acks []Ack, ids *[]string, then func(runs [][]int) (*round, error)) (*round, error) {
	var calls []Call
	var costs []int
	var offered [][]int
	var offeredIn []uint32
	for _, run := range runs {
		var these []int
		for k, i := range run {
			// a run holds a user's beats next to each other
			repeated := (k > 0 && beats[run[k-1]].User == beats[i].User) ||
				(k+1 < len(run) && beats[run[k+1]].User == beats[i].User)
			if !repeated && p.mayBeSteady(beats[i]) {
				these = append(these, i)
			}
		}
		b := bucket[run[0]]
		for _, sp := range spans(len(these), steadyChunk) {
			part := these[sp[0]:sp[1]:sp[1]]
			var places []int
			if seed[run[0]] != "" {
				places = make([]int, len(part))
				for k, i := range part {
					places[k] = pos[i]
				}
			}
			args := p.steadyArgs(m.now, b, seed[run[0]], places, len(part))
			for _, i := range part {
				args = p.appendSteady(args, b, beats[i])
			}
			calls = append(calls, Call{SHA: p.scripts.beat.sha, Keys: p.settings.users[b].steady, Args: args})
			costs = append(costs, len(part)*steadyMicros)
			offered = append(offered, part)
			offeredIn = append(offeredIn, b)
		}
	}
	if len(calls) == 0 {
		return then(runs)
	}
	return &round{op: "heartbeat", calls: calls, costs: costs, next: func(vals []Value) (*round, error) {
		applied := make([]bool, len(beats)) // or decided
		for c, these := range offered {
			tokens := make([]string, len(these))
			decided, err := p.decodeSteady(vals[c], offeredIn[c], tokens)
			if err != nil {
				return nil, err
			}
			var left []int
			for j, i := range these {
				if tokens[j] != "" {
					acks[i].Token, applied[i] = tokens[j], true
				} else {
					left = append(left, i)
				}
			}
			if decided.Kind == ValueNil {
				continue
			}
			left = left[:min(len(left), leftChunk)]
			if *ids == nil {
				*ids = make([]string, len(beats))
			}
			if err := p.decodeBeats(m, offeredIn[c], decided, beats, left, acks, *ids); err != nil {
				return nil, err
			}
			for _, i := range left {
				applied[i] = true
			}
		}
		left := runs[:0:0]
		for _, run := range runs {
			var rest []int
			for _, i := range run {
				if !applied[i] {
					rest = append(rest, i)
				}
			}
			if len(rest) > 0 {
				left = append(left, rest)
			}
		}
		return then(left)
	}}, nil
}

// chunkUsers splits run (beat indexes, a user's beats next to each other)
// into parts of at most n beats, but for a user with more, without
// splitting any user's beats.
func chunkUsers(beats []Heartbeat, run []int, n int) [][]int {
	var out [][]int
	for lo := 0; lo < len(run); {
		hi := min(lo+n, len(run))
		for hi < len(run) && hi > lo && beats[run[hi]].User == beats[run[hi-1]].User {
			hi-- // the cut would split a user's beats: cut before them
		}
		if hi == lo { // one user with more than n beats: theirs alone
			for hi = lo + 1; hi < len(run) && beats[run[hi]].User == beats[run[lo]].User; hi++ {
			}
		}
		out = append(out, run[lo:hi:hi])
		lo = hi
	}
	return out
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

// Login plans Engine.Login at now; a new token is drawn when the plan is
// made.
func (pl *Planner) login(now string, l Login) *plan[LoginResult] { return pl.p.login(now, l) }

func (p *planner) login(now string, l Login) *plan[LoginResult] {
	pl := newPlan[LoginResult](p, now)
	m := &pl.m
	policy := p.settings.cfg.Policy
	if l.Policy != nil {
		policy = *l.Policy
	}
	if err := p.checkLogin(l, policy); err != nil {
		m.fail(err)
		return pl
	}
	token := l.Token
	if token == "" {
		var err error
		if token, err = p.newToken(); err != nil {
			m.fail(err)
			return pl
		}
	}
	b := p.settings.keys.userBucket(l.User)
	args := append(p.userArgs(now, b, 9), l.User, l.Device, strconv.Itoa(int(l.Kind)), l.Gateway,
		strconv.Itoa(int(policy)), flag(l.Background), itoa(p.settings.interval[l.Kind]), encodeMeta(l.Meta), token)
	m.settle(&round{op: "login", calls: []Call{{SHA: p.scripts.login.sha, Keys: p.userKeys(b), Args: args}},
		next: func(vals []Value) (*round, error) {
			now, rest, err := splitReply(vals[0], 4)
			if err != nil {
				return nil, err
			}
			if err := p.found(m, b, rest[3], now); err != nil {
				return nil, err
			}
			code, err := rest[0].asString()
			if err != nil {
				return nil, err
			}
			if err := codeErr(code); err != nil {
				return p.finish(m, err)
			}
			kicked, kickIDs, err := decodeKicks(l.User, rest[1], now)
			if err != nil {
				return nil, err
			}
			changes, ids, err := decodeChanges(rest[2], now)
			if err != nil {
				return nil, err
			}
			pl.out = LoginResult{Token: token, Kicked: kicked, Changes: changes}
			m.deliver(changes, ids, kicked, kickIDs)
			return p.finish(m, nil)
		}}, nil)
	return pl
}

// Logout plans Engine.Logout at now.
func (pl *Planner) logout(now, user, device, token string) *plan[Ended] {
	return pl.p.end(now, "logout", user, device, token)
}

// Disconnect plans Engine.Disconnect at now.
func (pl *Planner) disconnect(now, user, device, token string) *plan[Ended] {
	return pl.p.end(now, "disconnect", user, device, token)
}

// end plans lua/logout.lua for Logout and Disconnect; mode names which.
func (p *planner) end(now, mode, user, device, token string) *plan[Ended] {
	pl := newPlan[Ended](p, now)
	m := &pl.m
	if err := checkEnd(user, device, token); err != nil {
		m.fail(err)
		return pl
	}
	b := p.settings.keys.userBucket(user)
	args := append(p.userArgs(now, b, 4), user, device, mode, token)
	m.settle(&round{op: mode, calls: []Call{{SHA: p.scripts.logout.sha, Keys: p.userKeys(b), Args: args}},
		next: func(vals []Value) (*round, error) {
			now, rest, err := splitReply(vals[0], 4)
			if err != nil {
				return nil, err
			}
			if err := p.found(m, b, rest[3], now); err != nil {
				return nil, err
			}
			code, err1 := rest[0].asString()
			removed, err2 := rest[1].asInt()
			if err1 != nil || err2 != nil {
				return nil, replyErr("%s: %s", mode, vals[0])
			}
			if err := codeErr(code); err != nil {
				return p.finish(m, err)
			}
			changes, ids, err := decodeChanges(rest[2], now)
			if err != nil {
				return nil, err
			}
			pl.out = Ended{Removed: removed == 1, Changes: changes}
			m.deliver(changes, ids, nil, nil)
			return p.finish(m, nil)
		}}, nil)
	return pl
}

// SetManual plans Engine.SetManual at now.
func (pl *Planner) setManual(now, user string, md Manual, ttl time.Duration) *plan[[]Change] {
	return pl.p.setManual(now, user, md, ttl)
}

func (p *planner) setManual(now, user string, md Manual, ttl time.Duration) *plan[[]Change] {
	pl := newPlan[[]Change](p, now)
	m := &pl.m
	if err := checkManual(user, md, ttl); err != nil {
		m.fail(err)
		return pl
	}
	b := p.settings.keys.userBucket(user)
	args := append(p.userArgs(now, b, 3), user, strconv.Itoa(int(md)), itoa(millis(ttl)))
	m.settle(&round{op: "manual", calls: []Call{{SHA: p.scripts.manual.sha, Keys: p.userKeys(b), Args: args}},
		next: func(vals []Value) (*round, error) {
			now, rest, err := splitReply(vals[0], 2)
			if err != nil {
				return nil, err
			}
			if err := p.found(m, b, rest[1], now); err != nil {
				return nil, err
			}
			changes, ids, err := decodeChanges(rest[0], now)
			if err != nil {
				return nil, err
			}
			pl.out = changes
			m.deliver(changes, ids, nil, nil)
			return p.finish(m, nil)
		}}, nil)
	return pl
}

// Status plans Engine.Status at now.
func (pl *Planner) status(now, user string) *plan[UserStatus] {
	p := pl.p
	plan := newPlan[UserStatus](p, now)
	if err := checkID("user", user); err != nil {
		plan.m.fail(err)
		return plan
	}
	plan.m.settle(p.statuses(&plan.m, []string{user}, func(out []UserStatus) { plan.out = out[0] }))
	return plan
}

// Statuses plans Engine.Statuses at now.
func (pl *Planner) statuses(now string, users []string) *plan[[]UserStatus] {
	p := pl.p
	plan := newPlan[[]UserStatus](p, now)
	plan.m.settle(p.statuses(&plan.m, users, func(out []UserStatus) { plan.out = out }))
	return plan
}

// statuses is the round of Statuses: read-only calls of at most
// statusChunk users of one user bucket each, sent a few at a time
// (round.costs); the statuses, in the order asked, go to set.
func (p *planner) statuses(m *machine, users []string, set func([]UserStatus)) (*round, error) {
	if err := checkUsers(users); err != nil {
		return nil, err
	}
	groups := map[uint32][]int{}
	var order []uint32
	for i, u := range users {
		b := p.settings.keys.userBucket(u)
		if _, ok := groups[b]; !ok {
			order = append(order, b)
		}
		groups[b] = append(groups[b], i)
	}
	var calls []Call
	var costs []int
	var chunks [][]int // by call: the users it reads, by index in users
	for _, b := range order {
		for _, sp := range spans(len(groups[b]), statusChunk) {
			chunk := groups[b][sp[0]:sp[1]:sp[1]]
			args := append(p.userArgs(m.now, b, 1+len(chunk)), strconv.Itoa(len(chunk)))
			for _, i := range chunk {
				args = append(args, users[i])
			}
			calls = append(calls, Call{SHA: p.scripts.status.sha, Keys: p.userKeys(b), Args: args})
			costs = append(costs, len(chunk)*statusMicros)
			chunks = append(chunks, chunk)
		}
	}
	return &round{op: "status", calls: calls, costs: costs, next: func(vals []Value) (*round, error) {
		out := make([]UserStatus, len(users))
		for c, chunk := range chunks {
			now, rest, err := splitReply(vals[c], 1)
			if err != nil {
				return nil, err
			}
			items, err := rest[0].asArray(len(chunk))
			if err != nil {
				return nil, err
			}
			for j, i := range chunk {
				if out[i], err = p.decodeStatus(users[i], items[j], now); err != nil {
					return nil, err
				}
			}
		}
		set(out)
		return nil, nil
	}}, nil
}

// Online plans Engine.Online at now (the scripts read no clock: now is
// unused).
func (pl *Planner) online(now string) *plan[map[Status]int64] {
	p := pl.p
	plan := newPlan[map[Status]int64](p, now)
	calls := make([]Call, len(p.settings.users))
	for b := range p.settings.users {
		calls[b] = Call{SHA: p.scripts.counts.sha, Keys: []string{p.settings.users[b].counts}}
	}
	plan.m.settle(&round{op: "online", calls: calls, next: func(vals []Value) (*round, error) {
		out := map[Status]int64{StatusOnline: 0, StatusAway: 0, StatusDND: 0, StatusPushOnline: 0}
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
		plan.out = out
		return nil, nil
	}}, nil)
	return plan
}
