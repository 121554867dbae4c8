package core

import "context"

// Online returns how many users are in each published status (ONLINE,
// AWAY, DND, PUSH_ONLINE; OFFLINE is not counted), across every instance
// sharing the Redis. The counts follow the published changes, in the same
// scripts that publish them, so they move with the debounce of design
// section 7 and never require a scan. One round trip (one read per bucket).
func (e *Engine) Online(ctx context.Context) (map[Status]int64, error) {
	p := e.Planner().Online(e.nowArg())
	e.drive(ctx, p)
	return p.Outcome()
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
