package core

import (
	"context"
	"strconv"
)

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

// decodeKicks reads the kicks (device, kind, gateway, ...) of a login at now.
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

// end runs lua/logout.lua for Logout and Disconnect; mode names which.
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
