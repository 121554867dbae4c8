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
// ErrClockSkew, or an *InputError) changes nothing.
func (e *Engine) Heartbeat(ctx context.Context, hb Heartbeat) (Ack, error) {
	if err := e.checkHeartbeat(hb); err != nil {
		e.metrics.Heartbeats(0, 1)
		return Ack{}, err
	}
	b := e.s.keys.userBucket(hb.User)
	seed, err := e.seedFor(hb.Token == "")
	if err != nil {
		return Ack{}, err
	}
	args := append(e.userArgs(b, 12), seed, "1")
	calls := []Call{{SHA: e.scripts.heartbeat.sha, Keys: e.userKeys(b), Args: e.appendBeat(args, hb)}}
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

// HeartbeatBatch records up to MaxBatch heartbeats in one round trip (one
// script call per user bucket), as a gateway merging the beats of one tick
// does. Each beat's refusal is in its Ack.Err; the error is for the batch
// as a whole (invalid batch size, Redis unavailable).
func (e *Engine) HeartbeatBatch(ctx context.Context, beats []Heartbeat) ([]Ack, error) {
	if err := checkBatch("beats", len(beats)); err != nil {
		return nil, err
	}
	acks := make([]Ack, len(beats))
	// Valid beats, ordered by bucket (stable, so a user's beats keep their
	// order), make one call per run of equal buckets.
	order := make([]int, 0, len(beats))
	bucket := make([]uint32, len(beats))
	for i, hb := range beats {
		if acks[i].Err = e.checkHeartbeat(hb); acks[i].Err == nil {
			bucket[i] = e.s.keys.userBucket(hb.User)
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(bucket[x], bucket[y]) })
	var runs [][]int
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && bucket[order[hi]] == bucket[order[lo]] {
			hi++
		}
		runs = append(runs, order[lo:hi])
		lo = hi
	}
	calls := make([]Call, len(runs))
	for r, run := range runs {
		b := bucket[run[0]]
		tokenless := false
		for _, i := range run {
			tokenless = tokenless || beats[i].Token == ""
		}
		seed, err := e.seedFor(tokenless)
		if err != nil {
			return nil, err
		}
		args := append(e.userArgs(b, 2+10*len(run)), seed, strconv.Itoa(len(run)))
		for _, i := range run {
			args = e.appendBeat(args, beats[i])
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

// seedFor returns a fresh token seed when a call has a beat without a
// token (its implicit login gets seed.i), else "".
func (e *Engine) seedFor(needed bool) (string, error) {
	if !needed {
		return "", nil
	}
	return e.newToken()
}

// appendBeat appends one heartbeat's fields (lua/heartbeat.lua) to args.
func (e *Engine) appendBeat(args []string, hb Heartbeat) []string {
	meta, at := "", ""
	if hb.Meta != nil {
		meta = "=" + encodeMeta(hb.Meta)
	}
	if !hb.At.IsZero() {
		at = itoa(hb.At.UnixMilli())
	}
	return append(args, hb.User, hb.Device, kindCodes[hb.Kind], hb.Gateway, hb.Token,
		flag(hb.Active), flag(hb.Background), e.s.intervalS[hb.Kind], meta, at)
}

// kindCodes are the kinds as scripts take them.
var kindCodes = [len(kindNames)]string{"0", "1", "2", "3", "4"}

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
	policy := e.s.cfg.Policy
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
	b := e.s.keys.userBucket(l.User)
	args := append(e.userArgs(b, 9), l.User, l.Device, strconv.Itoa(int(l.Kind)), l.Gateway,
		strconv.Itoa(int(policy)), flag(l.Background), itoa(e.s.interval[l.Kind]), encodeMeta(l.Meta), token)
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
	b := e.s.keys.userBucket(user)
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
	b := e.s.keys.userBucket(user)
	args := append(e.userArgs(b, 3), user, strconv.Itoa(int(m)), itoa(ms(ttl)))
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
		b := e.s.keys.userBucket(u)
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
	mexp, err2 := f[1].AsInt()
	flat, err3 := f[2].AsArray(-1)
	if err1 != nil || err2 != nil || err3 != nil || len(flat)%2 != 0 || !inRange(manual, len(manualNames)) || mexp < 0 {
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
		case strings.HasPrefix(id, fencePrefix):
			// a fence only refuses tokens: it shows no device
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
	return e.s.userStatus(user, recs, Manual(manual), mexp, now), nil
}

// userStatus derives a user's status from stored records by the rules.
func (s *settings) userStatus(user string, recs map[string]record, manual Manual, mexp, now int64) UserStatus {
	if mexp > 0 && now >= mexp {
		manual, mexp = ManualNone, 0
	}
	st := UserStatus{User: user, Manual: manual, ManualUntil: msTime(mexp), At: msTime(now)}
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
