package core

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
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
// together and in order, as the batch did before it had two scripts.
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

// steadyArgs returns the arguments of lua/heartbeat_steady.lua for bucket b before its
// beats, with room for n beats.
func (e *Engine) steadyArgs(b uint32, n int) []string {
	args := make([]string, 0, 2+len(e.settings.beatParams)+8*n)
	args = append(args, e.nowArg(), e.settings.users[b].devPrefix)
	return append(args, e.settings.beatParams[:]...)
}

// appendSteady appends one heartbeat's fields (lua/heartbeat_steady.lua) to args.
func (e *Engine) appendSteady(args []string, hb Heartbeat) []string {
	meta, at := beatExtras(hb)
	return append(args, hb.User, hb.Device, hb.Token, hb.Gateway, meta,
		flag(hb.Active), flag(hb.Background), at)
}

// appendBeat appends one heartbeat's fields (lua/heartbeat_full.lua) to args:
// a beat without a token, at position j of its run, carries seed.j, the
// token its implicit login issues. It is formatted here, for the beats the
// steady script left, and not for those it applied.
func (e *Engine) appendBeat(args []string, hb Heartbeat, seed string, j int) []string {
	meta, at := beatExtras(hb)
	issue := ""
	if hb.Token == "" {
		issue = seed + "." + strconv.Itoa(j)
	}
	return append(args, hb.User, hb.Device, kindCodes[hb.Kind], hb.Gateway, hb.Token,
		flag(hb.Active), flag(hb.Background), e.settings.intervalArgs[hb.Kind], meta, at, issue)
}

// beatExtras returns a beat's metadata ("" keep, "=" .. encoded to set) and
// client time ("" none) as the scripts take them.
func beatExtras(hb Heartbeat) (meta, at string) {
	if hb.Meta != nil {
		meta = "=" + encodeMeta(hb.Meta)
	}
	if !hb.At.IsZero() {
		at = itoa(hb.At.UnixMilli())
	}
	return meta, at
}

// kindCodes are the kinds as scripts take them.
var kindCodes = [len(kindNames)]string{"0", "1", "2", "3", "4"}

// decodeSteady reads a reply of lua/heartbeat_steady.lua into tokens, one for each beat
// offered: the token in force, or "" for a beat heartbeat_full.lua must decide.
// The reply is one string, the tokens joined by unitSep.
func decodeSteady(v Value, tokens []string) error {
	s, err := v.AsString()
	if err != nil {
		return replyErr("steady heartbeat: %v", err)
	}
	if len(tokens) == 0 {
		return nil
	}
	last := len(tokens) - 1
	for j := range last {
		i := strings.IndexByte(s, unitSep[0])
		if i < 0 {
			return replyErr("steady heartbeat: %d tokens for %d beats", j+1, len(tokens))
		}
		tokens[j], s = s[:i], s[i+1:]
	}
	if strings.IndexByte(s, unitSep[0]) >= 0 {
		return replyErr("steady heartbeat: more tokens than the %d beats", len(tokens))
	}
	tokens[last] = s
	return nil
}

// decodeBeats reads a heartbeat reply {now, results} for the beats at
// positions run into acks.
func (e *Engine) decodeBeats(v Value, beats []Heartbeat, run []int, acks []Ack) error {
	now, rest, err := splitReply(v, 1)
	if err != nil {
		return err
	}
	results, err := rest[0].AsArray(4 * len(run))
	if err != nil {
		return err
	}
	for j, i := range run {
		r := results[4*j : 4*j+4]
		code, err1 := r[0].AsString()
		token, err2 := r[1].AsString()
		from, err3 := r[2].AsInt()
		to, err4 := r[3].AsInt()
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return replyErr("heartbeat result %d: %v", j, err)
		}
		if acks[i].Err = codeErr(code); acks[i].Err != nil {
			continue
		}
		acks[i].Token = token
		if from >= 0 {
			if !inRange(from, len(statusNames)) || !inRange(to, len(statusNames)) {
				return replyErr("heartbeat result %d: status %d→%d", j, from, to)
			}
			acks[i].Changes = []Change{{User: beats[i].User, From: Status(from), To: Status(to), At: msTime(now)}}
		}
	}
	return nil
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

func (e *Engine) checkHeartbeat(hb Heartbeat) error {
	if err := checkID("Heartbeat.User", hb.User); err != nil {
		return err
	}
	if err := checkID("Heartbeat.Device", hb.Device); err != nil {
		return err
	}
	if !hb.Kind.valid() {
		return invalid("Heartbeat.Kind", "unknown kind %d", hb.Kind)
	}
	if err := checkGateway("Heartbeat.Gateway", hb.Gateway); err != nil {
		return err
	}
	if hb.Token != "" {
		if err := checkID("Heartbeat.Token", hb.Token); err != nil {
			return err
		}
	}
	if y := hb.At.Year(); !hb.At.IsZero() && (y < -290_000_000 || y > 290_000_000) {
		// milliseconds since the epoch wrap past ±292 million years, so an
		// instant that far away could land near now: refuse it as skewed
		return ErrClockSkew
	}
	return checkMeta("Heartbeat.Meta", hb.Meta)
}

// Login logs a device in under the policy (design section 8) and returns a
// new session token. Sessions the policy removes, and an earlier session of
// the same device, are kicked: returned, marked so that their tokens are
// refused, and announced on their gateways' kick channels. A login beyond
// Config.MaxDevices is refused with ErrTooManyDevices and changes nothing.
func (e *Engine) Login(ctx context.Context, l Login) (LoginResult, error) {
	policy := e.settings.cfg.Policy
	if l.Policy != nil {
		policy = *l.Policy
	}
	if err := e.checkLogin(l, policy); err != nil {
		return LoginResult{}, err
	}
	token := l.Token
	if token == "" {
		var err error
		if token, err = e.newToken(); err != nil {
			return LoginResult{}, err
		}
	}
	b := e.settings.keys.userBucket(l.User)
	args := append(e.userArgs(b, 9), l.User, l.Device, strconv.Itoa(int(l.Kind)), l.Gateway,
		strconv.Itoa(int(policy)), flag(l.Background), itoa(e.settings.interval[l.Kind]), encodeMeta(l.Meta), token)
	vals, err := e.eval(ctx, "login", []scriptCall{{e.scripts.login, e.userKeys(b), args}})
	if err != nil {
		return LoginResult{}, err
	}
	now, rest, err := splitReply(vals[0], 3)
	if err != nil {
		return LoginResult{}, err
	}
	code, err := rest[0].AsString()
	if err != nil {
		return LoginResult{}, err
	}
	if err := codeErr(code); err != nil {
		return LoginResult{}, err
	}
	kicked, err := decodeKicks(l.User, rest[1], now)
	if err != nil {
		return LoginResult{}, err
	}
	changes, err := decodeChanges(rest[2], now)
	if err != nil {
		return LoginResult{}, err
	}
	e.publish(ctx, changes, kicked)
	return LoginResult{Token: token, Kicked: kicked, Changes: changes}, nil
}

func (e *Engine) checkLogin(l Login, p Policy) error {
	if err := checkID("Login.User", l.User); err != nil {
		return err
	}
	if err := checkID("Login.Device", l.Device); err != nil {
		return err
	}
	if !l.Kind.valid() {
		return invalid("Login.Kind", "unknown kind %d", l.Kind)
	}
	if !p.valid() {
		return invalid("Login.Policy", "unknown policy %d", p)
	}
	if err := checkGateway("Login.Gateway", l.Gateway); err != nil {
		return err
	}
	if l.Token != "" {
		if err := checkID("Login.Token", l.Token); err != nil {
			return err
		}
	}
	return checkMeta("Login.Meta", l.Meta)
}

func decodeKicks(user string, v Value, now int64) ([]Kick, error) {
	items, err := v.AsArray(-1)
	if err != nil || len(items)%3 != 0 {
		return nil, replyErr("kicks: %s", v)
	}
	var out []Kick
	for i := 0; i < len(items); i += 3 {
		dev, err1 := items[i].AsString()
		kind, err2 := items[i+1].AsInt()
		gw, err3 := items[i+2].AsString()
		if err1 != nil || err2 != nil || err3 != nil || !inRange(kind, len(kindNames)) {
			return nil, replyErr("kick %d: %s", i/3, v)
		}
		out = append(out, Kick{User: user, Device: dev, Kind: Kind(kind), Gateway: gw, At: msTime(now)})
	}
	return out, nil
}

// Logout ends a device's session because the user logged out. If it was
// the user's last live device, OFFLINE is published at once. A non-empty
// token must be the session's (else ErrSessionReplaced: a stale client
// cannot end a newer session); the token then stays refused.
func (e *Engine) Logout(ctx context.Context, user, device, token string) (Ended, error) {
	return e.end(ctx, "logout", user, device, token)
}

// Disconnect ends a device's session because its transport closed. If it
// was the user's last live device, OFFLINE is published only after the user
// stays offline for LeaveDelay, so a quick reconnect publishes nothing.
func (e *Engine) Disconnect(ctx context.Context, user, device, token string) (Ended, error) {
	return e.end(ctx, "disconnect", user, device, token)
}

func (e *Engine) end(ctx context.Context, mode, user, device, token string) (Ended, error) {
	if err := checkEnd(user, device, token); err != nil {
		return Ended{}, err
	}
	b := e.settings.keys.userBucket(user)
	args := append(e.userArgs(b, 4), user, device, mode, token)
	vals, err := e.eval(ctx, mode, []scriptCall{{e.scripts.logout, e.userKeys(b), args}})
	if err != nil {
		return Ended{}, err
	}
	now, rest, err := splitReply(vals[0], 3)
	if err != nil {
		return Ended{}, err
	}
	code, err1 := rest[0].AsString()
	removed, err2 := rest[1].AsInt()
	if err1 != nil || err2 != nil {
		return Ended{}, replyErr("%s: %s", mode, vals[0])
	}
	if err := codeErr(code); err != nil {
		return Ended{}, err
	}
	changes, err := decodeChanges(rest[2], now)
	if err != nil {
		return Ended{}, err
	}
	e.publish(ctx, changes, nil)
	return Ended{Removed: removed == 1, Changes: changes}, nil
}

// SetManual sets the user's manual status (ManualNone clears it) for ttl,
// or until cleared when ttl is 0 (design section 6). A manual status never
// makes anyone online.
func (e *Engine) SetManual(ctx context.Context, user string, m Manual, ttl time.Duration) ([]Change, error) {
	if err := checkManual(user, m, ttl); err != nil {
		return nil, err
	}
	b := e.settings.keys.userBucket(user)
	args := append(e.userArgs(b, 3), user, strconv.Itoa(int(m)), itoa(millis(ttl)))
	vals, err := e.eval(ctx, "manual", []scriptCall{{e.scripts.manual, e.userKeys(b), args}})
	if err != nil {
		return nil, err
	}
	now, rest, err := splitReply(vals[0], 1)
	if err != nil {
		return nil, err
	}
	changes, err := decodeChanges(rest[0], now)
	if err != nil {
		return nil, err
	}
	e.publish(ctx, changes, nil)
	return changes, nil
}

// Status returns one user's status and live devices.
func (e *Engine) Status(ctx context.Context, user string) (UserStatus, error) {
	out, err := e.Statuses(ctx, []string{user})
	if err != nil {
		return UserStatus{}, err
	}
	return out[0], nil
}

// Statuses returns up to MaxBatch users' statuses in one round trip (one
// read-only script call per user bucket), in the order asked.
func (e *Engine) Statuses(ctx context.Context, users []string) ([]UserStatus, error) {
	if err := checkUsers(users); err != nil {
		return nil, err
	}
	groups := map[uint32][]int{}
	var order []uint32
	for i, u := range users {
		b := e.settings.keys.userBucket(u)
		if _, ok := groups[b]; !ok {
			order = append(order, b)
		}
		groups[b] = append(groups[b], i)
	}
	calls := make([]scriptCall, len(order))
	for g, b := range order {
		args := append(e.userArgs(b, 1+len(groups[b])), strconv.Itoa(len(groups[b])))
		for _, i := range groups[b] {
			args = append(args, users[i])
		}
		calls[g] = scriptCall{e.scripts.status, e.userKeys(b)[:1], args}
	}
	vals, err := e.eval(ctx, "status", calls)
	if err != nil {
		return nil, err
	}
	out := make([]UserStatus, len(users))
	for g, b := range order {
		now, rest, err := splitReply(vals[g], 1)
		if err != nil {
			return nil, err
		}
		items, err := rest[0].AsArray(len(groups[b]))
		if err != nil {
			return nil, err
		}
		for j, i := range groups[b] {
			if out[i], err = e.decodeStatus(users[i], items[j], now); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (e *Engine) decodeStatus(user string, v Value, now int64) (UserStatus, error) {
	f, err := v.AsArray(3)
	if err != nil {
		return UserStatus{}, err
	}
	manual, err1 := f[0].AsInt()
	manualUntil, err2 := f[1].AsInt()
	flat, err3 := f[2].AsArray(-1)
	if err1 != nil || err2 != nil || err3 != nil || len(flat)%2 != 0 || !inRange(manual, len(manualNames)) || manualUntil < 0 {
		return UserStatus{}, replyErr("status of %q: %s", user, v)
	}
	static := make(map[string]string, len(flat)/4)
	dynamic := make(map[string]string, len(flat)/4)
	for i := 0; i < len(flat); i += 2 {
		id, err1 := flat[i].AsString()
		raw, err2 := flat[i+1].AsString()
		if err1 != nil || err2 != nil {
			return UserStatus{}, replyErr("status of %q: %s", user, v)
		}
		switch {
		case strings.HasPrefix(id, dynamicPrefix):
			dynamic[id[len(dynamicPrefix):]] = raw
		case strings.HasPrefix(id, fencePrefix), id == steadyField:
			// a fence only refuses tokens, and the copy of the due score
			// serves the steady beat: neither shows a device
		default:
			static[id] = raw
		}
	}
	recs := make(map[string]record, len(static))
	for id, s := range static {
		d, ok := dynamic[id]
		if !ok {
			continue // half a record cannot come from the scripts; skip it
		}
		r, err := decodeRecord(s, d)
		if err != nil {
			return UserStatus{}, err
		}
		recs[id] = r
	}
	return e.settings.userStatus(user, recs, Manual(manual), manualUntil, now), nil
}

// userStatus derives a user's status from stored records by the rules.
func (s *settings) userStatus(user string, recs map[string]record, manual Manual, manualUntil, now int64) UserStatus {
	if manualUntil > 0 && now >= manualUntil {
		manual, manualUntil = ManualNone, 0
	}
	st := UserStatus{User: user, Manual: manual, ManualUntil: msTime(manualUntil), At: msTime(now)}
	states := make([]Status, 0, len(recs))
	for id, r := range recs {
		state := s.state(r, now)
		if state == StatusOffline {
			continue
		}
		states = append(states, state)
		st.Devices = append(st.Devices, Device{
			ID: id, Kind: r.kind, Gateway: r.gateway, State: state, Background: r.background,
			LoginAt: msTime(r.loginAt), LastSeen: msTime(r.seen), LastActive: msTime(r.active),
			Meta: decodeMeta(r.meta),
		})
	}
	sort.Slice(st.Devices, func(i, j int) bool { return st.Devices[i].ID < st.Devices[j].ID })
	st.Status = aggregate(states, manual)
	return st
}
