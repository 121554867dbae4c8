package core

import (
	"context"
	"sort"
)

// status runs a ReadStatus: one user's status and live devices.
func (e *Engine) status(ctx context.Context, user string) (UserStatus, error) {
	if e.groupCommit() && checkID("user", user) == nil {
		j := e.comb.newJob(ctx, jobStatus, "status")
		j.user = user
		if err := e.commit(j); err != nil {
			return UserStatus{}, err
		}
		st, err := j.st, j.err
		e.comb.release(j)
		return st, err
	}
	p := e.plans.status(e.nowArg(), user)
	e.drive(ctx, p)
	return p.Outcome()
}

// decodeStatus reads one user's entry of a lua/status.lua reply
// {manual, manual until, device hash fields} at now.
func (p *planner) decodeStatus(user string, v Value, now int64) (UserStatus, error) {
	f, err := v.asArray(4)
	if err != nil {
		return UserStatus{}, err
	}
	manual, err1 := f[0].asInt()
	manualUntil, err2 := f[1].asInt()
	// the records are strings as stored, never numbers
	static, err3 := f[2].asString()
	dynamic, err4 := f[3].asString()
	strs := f[2].Kind == ValueString && f[3].Kind == ValueString
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !strs || !inRange(manual, len(manualNames)) || manualUntil < 0 {
		return UserStatus{}, replyErr("status of %q: %s", user, v)
	}
	recs, err := decodeDevices(static, dynamic)
	if err != nil {
		return UserStatus{}, err
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
