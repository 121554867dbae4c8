package core

import (
	"context"
	"strconv"
)

// Online returns how many users are in each published status (ONLINE,
// AWAY, DND, PUSH_ONLINE; OFFLINE is not counted), across every instance
// sharing the Redis. The counts follow the published changes, in the same
// scripts that publish them, so they move with the debounce of design
// section 7 and never require a scan. One round trip (one read per bucket).
func (e *Engine) Online(ctx context.Context) (map[Status]int64, error) {
	calls := make([]Call, len(e.settings.users))
	for b := range e.settings.users {
		calls[b] = Call{SHA: e.scripts.counts.sha, Keys: []string{e.settings.users[b].counts}}
	}
	res, err := e.evalCalls(ctx, "online", calls)
	if err != nil {
		return nil, err
	}
	out := map[Status]int64{StatusOnline: 0, StatusAway: 0, StatusDND: 0, StatusPushOnline: 0}
	for _, r := range res {
		flat, err := r.Value.AsArray(-1)
		if err != nil || len(flat)%2 != 0 {
			return nil, replyErr("online counts: %s", r.Value)
		}
		for i := 0; i < len(flat); i += 2 {
			s, err1 := flat[i].AsString()
			n, err2 := flat[i+1].AsInt()
			code, err3 := strconv.Atoi(s)
			if err1 != nil || err2 != nil || err3 != nil || code <= 0 || !inRange(int64(code), len(statusNames)) {
				return nil, replyErr("online counts: %s", r.Value)
			}
			out[Status(code)] += n
		}
	}
	return out, nil
}

// Online mirrors Engine.Online.
func (m *Model) Online(ctx context.Context) (map[Status]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[Status]int64{StatusOnline: 0, StatusAway: 0, StatusDND: 0, StatusPushOnline: 0}
	for _, u := range m.users {
		if u.state.pub != StatusOffline {
			out[u.state.pub]++
		}
	}
	return out, nil
}
