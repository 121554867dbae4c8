package core

import "context"

// Login logs a device in under the policy (docs/design.md §8) and returns a
// new session token. Sessions the policy removes, and an earlier session of
// the same device, are kicked: returned, marked so that their tokens are
// refused, and announced on their gateways' kick channels. A login beyond
// Config.MaxDevices is refused with ErrTooManyDevices and changes nothing.
func (e *Engine) Login(ctx context.Context, l Login) (LoginResult, error) {
	p := e.plans.login(e.nowArg(), l)
	if err := e.exec(ctx, p); err != nil {
		return LoginResult{}, err
	}
	return p.Outcome()
}

// decodeKicks reads the kicks (device, kind, gateway, outbox ID, ...) of a
// login at now.
func decodeKicks(user string, v Value, now int64) ([]Kick, []string, error) {
	items, err := v.AsArray(-1)
	if err != nil || len(items)%4 != 0 {
		return nil, nil, replyErr("kicks: %s", v)
	}
	var out []Kick
	var ids []string
	for i := 0; i < len(items); i += 4 {
		dev, err1 := items[i].AsString()
		kind, err2 := items[i+1].AsInt()
		gw, err3 := items[i+2].AsString()
		id, err4 := items[i+3].AsString()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !inRange(kind, len(kindNames)) {
			return nil, nil, replyErr("kick %d: %s", i/4, v)
		}
		out = append(out, Kick{User: user, Device: dev, Kind: Kind(kind), Gateway: gw, At: msTime(now)})
		ids = append(ids, id)
	}
	return out, ids, nil
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

// end drives the plan of Logout and Disconnect; mode names which.
func (e *Engine) end(ctx context.Context, mode, user, device, token string) (Ended, error) {
	p := e.plans.end(e.nowArg(), mode, user, device, token)
	if err := e.exec(ctx, p); err != nil {
		return Ended{}, err
	}
	return p.Outcome()
}
