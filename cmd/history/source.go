package history

import (
	"context"
	"fmt"

	"github.com/presencekit/presence/core"
)

// EngineSource takes snapshots from a presence engine, for any Go service
// that runs one. The online counts come from Engine.Online (across every
// instance sharing the Redis, without a scan); the engine cannot list
// scopes or users without scanning, so the service names them.
type EngineSource struct {
	// Engine is the presence engine.
	Engine *core.Engine
	// Scopes, if set, returns the scopes to count (the Snapshotter keeps
	// the busiest TopN of each class).
	Scopes func() []core.Scope
	// Users, if set, returns the users whose status the snapshot lists
	// when the Snapshotter records users; those found OFFLINE are left
	// out.
	Users func() []string
}

// Collect reads the figures from the engine.
func (e EngineSource) Collect(ctx context.Context, users bool) (Snapshot, error) {
	on, err := e.Engine.Online(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("online counts: %w", err)
	}
	snap := Snapshot{Online: map[string]int64{}}
	for st, n := range on {
		snap.Online[st.String()] = n
	}
	if e.Scopes != nil {
		for _, sc := range e.Scopes() {
			c, err := e.Engine.Count(ctx, sc)
			if err != nil {
				return Snapshot{}, fmt.Errorf("counting %s: %w", sc, err)
			}
			snap.Scopes = append(snap.Scopes, ScopeCount{Class: sc.Class, Scope: sc.ID, Members: c.N})
		}
	}
	if users && e.Users != nil {
		all := e.Users()
		for len(all) > 0 {
			batch := all[:min(1000, len(all))]
			all = all[len(batch):]
			sts, err := e.Engine.Statuses(ctx, batch)
			if err != nil {
				return Snapshot{}, fmt.Errorf("statuses: %w", err)
			}
			for _, st := range sts {
				if st.Status != core.StatusOffline {
					snap.Users = append(snap.Users, UserStatus{User: st.User, Status: st.Status.String()})
				}
			}
		}
	}
	return snap, nil
}
