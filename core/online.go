package core

import "context"

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
