package core

import (
	"context"
	"sort"
	"strings"
)

// Status returns one user's status and live devices.
func (e *Engine) Status(ctx context.Context, user string) (UserStatus, error) {
	p := e.Planner().Status(e.nowArg(), user)
	e.drive(ctx, p)
	return p.Outcome()
}

// Statuses returns up to MaxBatch users' statuses in one round trip (one
// read-only script call per user bucket), in the order asked.
func (e *Engine) Statuses(ctx context.Context, users []string) ([]UserStatus, error) {
	p := e.Planner().Statuses(e.nowArg(), users)
	e.drive(ctx, p)
	return p.Outcome()
}

// decodeStatus reads one user's entry of a lua/status.lua reply
// {manual, manual until, device hash fields} at now.
func (p *planner) decodeStatus(user string, v Value, now int64) (UserStatus, error) {
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
	return p.settings.userStatus(user, recs, Manual(manual), manualUntil, now), nil
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
