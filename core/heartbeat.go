package core

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
)

// Heartbeat records one heartbeat (design section 5): the device is seen
// now, active now if hb.Active, backgrounded if hb.Background. Under
// PolicyMulti a device without a session is logged in implicitly. A
// refused heartbeat (ErrSessionReplaced, ErrNoSession, ErrTooManyDevices,
// ErrClockSkew, or an *InputError) changes nothing. A steady beat, one that
// only extends a live session, takes one round trip; any other takes two.
func (e *Engine) Heartbeat(ctx context.Context, hb Heartbeat) (Ack, error) {
	if err := e.checkHeartbeat(hb); err != nil {
		e.metrics.Heartbeats(0, 1)
		return Ack{}, err
	}
	b := e.settings.keys.userBucket(hb.User)
	// drawn before the steady beat, so that a beat draws one seed whichever
	// script applies it, as the model's does
	seed, err := e.seedFor(hb.Token == "")
	if err != nil {
		return Ack{}, err
	}
	if e.mayBeSteady(hb) {
		token, err := e.steadyBeat(ctx, b, hb)
		if err != nil {
			return Ack{}, err
		}
		if token != "" {
			e.metrics.Heartbeats(1, 0)
			return Ack{Token: token}, nil
		}
	}
	args := append(e.userArgs(b, 12), "1")
	calls := []Call{{SHA: e.scripts.heartbeat.sha, Keys: e.userKeys(b), Args: e.appendBeat(args, hb, seed, 0)}}
	res, err := e.evalCalls(ctx, "heartbeat", calls)
	if err != nil {
		return Ack{}, err
	}
	var acks [1]Ack
	if err := e.decodeBeats(res[0].Value, []Heartbeat{hb}, []int{0}, acks[:]); err != nil {
		return Ack{}, err
	}
	e.countBeats(acks[:])
	e.publish(ctx, acks[0].Changes, nil)
	return acks[0], acks[0].Err
}

// steadyBeat offers hb to lua/heartbeat_steady.lua, and returns the token in force if
// the beat was steady and applied, or "" if heartbeat_full.lua must decide it.
func (e *Engine) steadyBeat(ctx context.Context, b uint32, hb Heartbeat) (string, error) {
	args := e.appendSteady(e.steadyArgs(b, 1), hb)
	calls := []Call{{SHA: e.scripts.beat.sha, Keys: e.settings.users[b].keys, Args: args}}
	res, err := e.evalCalls(ctx, "heartbeat", calls)
	if err != nil {
		return "", err
	}
	var token [1]string
	if err := decodeSteady(res[0].Value, token[:]); err != nil {
		return "", err
	}
	return token[0], nil
}

// HeartbeatBatch records up to MaxBatch heartbeats, as a gateway merging
// the beats of one tick does: one script call per user bucket in one round
// trip for the steady beats (lua/heartbeat_steady.lua), and a second round trip for the
// beats that change something or are refused (lua/heartbeat_full.lua). Each
// beat's refusal is in its Ack.Err; the error is for the batch as a whole
// (invalid batch size, Redis unavailable).
func (e *Engine) HeartbeatBatch(ctx context.Context, beats []Heartbeat) ([]Ack, error) {
	if err := checkBatch("beats", len(beats)); err != nil {
		return nil, err
	}
	acks := make([]Ack, len(beats))
	// Valid beats, ordered by bucket and user (stable, so a user's beats
	// keep their order), make one call per run of equal buckets.
	order := make([]int, 0, len(beats))
	bucket := make([]uint32, len(beats))
	for i, hb := range beats {
		if acks[i].Err = e.checkHeartbeat(hb); acks[i].Err == nil {
			bucket[i] = e.settings.keys.userBucket(hb.User)
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
		s, err := e.seedFor(tokenless)
		if err != nil {
			return nil, err
		}
		for j, i := range run {
			seed[i], pos[i] = s, j
		}
	}
	runs, err := e.steadyBeats(ctx, beats, bucket, runs, acks)
	if err != nil {
		return nil, err
	}
	calls := make([]Call, len(runs))
	for r, run := range runs {
		b := bucket[run[0]]
		args := append(e.userArgs(b, 1+11*len(run)), strconv.Itoa(len(run)))
		for _, i := range run {
			args = e.appendBeat(args, beats[i], seed[i], pos[i])
		}
		calls[r] = Call{SHA: e.scripts.heartbeat.sha, Keys: e.userKeys(b), Args: args}
	}
	var changes []Change
	if len(calls) > 0 {
		res, err := e.evalCalls(ctx, "heartbeat", calls)
		if err != nil {
			return nil, err
		}
		for r, run := range runs {
			if err := e.decodeBeats(res[r].Value, beats, run, acks); err != nil {
				return nil, err
			}
		}
		for _, a := range acks {
			changes = append(changes, a.Changes...)
		}
	}
	e.countBeats(acks)
	e.publish(ctx, changes, nil)
	return acks, nil
}

// steadyBeats offers the beats of each run (one bucket's valid beats, in
// order) that may be steady to lua/heartbeat_steady.lua, one call per run in one round
// trip, and sets the acks of those it applied. It returns the runs of the
// beats left for heartbeat_full.lua, in their order. A user with several beats
// in the batch has them all left there, so that one script applies them
// together and in order: split between the two scripts, they could be
// applied out of order or apart.
func (e *Engine) steadyBeats(ctx context.Context, beats []Heartbeat, bucket []uint32, runs [][]int, acks []Ack) ([][]int, error) {
	var calls []Call
	var offered [][]int
	for _, run := range runs {
		var these []int
		for k, i := range run {
			// a run holds a user's beats next to each other
			repeated := (k > 0 && beats[run[k-1]].User == beats[i].User) ||
				(k+1 < len(run) && beats[run[k+1]].User == beats[i].User)
			if !repeated && e.mayBeSteady(beats[i]) {
				these = append(these, i)
			}
		}
		if len(these) == 0 {
			continue
		}
		b := bucket[run[0]]
		args := e.steadyArgs(b, len(these))
		for _, i := range these {
			args = e.appendSteady(args, beats[i])
		}
		calls = append(calls, Call{SHA: e.scripts.beat.sha, Keys: e.settings.users[b].keys, Args: args})
		offered = append(offered, these)
	}
	if len(calls) == 0 {
		return runs, nil
	}
	res, err := e.evalCalls(ctx, "heartbeat", calls)
	if err != nil {
		return nil, err
	}
	applied := make([]bool, len(beats))
	for c, these := range offered {
		tokens := make([]string, len(these))
		if err := decodeSteady(res[c].Value, tokens); err != nil {
			return nil, err
		}
		for j, i := range these {
			if tokens[j] != "" {
				acks[i].Token, applied[i] = tokens[j], true
			}
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
	return left, nil
}

// seedFor returns a fresh token seed when a run of beats has one without a
// token (its implicit login gets seed.j), else "".
func (e *Engine) seedFor(needed bool) (string, error) {
	if !needed {
		return "", nil
	}
	return e.newToken()
}

// mayBeSteady reports whether lua/heartbeat_steady.lua may apply hb. Every beat may,
// but one without a token under an exclusive policy: heartbeat_full.lua refuses
// it whatever is stored, so it changes nothing and can go there at once,
// out of its place among the user's other beats.
func (e *Engine) mayBeSteady(hb Heartbeat) bool {
	return hb.Token != "" || e.settings.cfg.Policy == PolicyMulti
}

// countBeats reports accepted and refused beats to the metrics.
func (e *Engine) countBeats(acks []Ack) {
	accepted := 0
	for _, a := range acks {
		if a.Err == nil {
			accepted++
		}
	}
	e.metrics.Heartbeats(accepted, len(acks)-accepted)
}
