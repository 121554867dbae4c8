package core

import (
	"context"
	"sort"
	"strconv"
	"strings"
)

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

// decodeStatus reads one user's entry of a lua/status.lua reply
// {manual, manual until, device hash fields} at now.
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
