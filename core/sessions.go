package core

// decodeKicks reads the kicks (device, kind, gateway, outbox ID, ...) of a
// login at now.
func decodeKicks(user string, v Value, now int64) ([]Kick, []string, error) {
	items, err := v.asArray(-1)
	if err != nil || len(items)%4 != 0 {
		return nil, nil, replyErr("kicks: %s", v)
	}
	var out []Kick
	var ids []string
	for i := 0; i < len(items); i += 4 {
		dev, err1 := items[i].asString()
		kind, err2 := items[i+1].asInt()
		gw, err3 := items[i+2].asString()
		id, err4 := items[i+3].asString()
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !inRange(kind, len(kindNames)) {
			return nil, nil, replyErr("kick %d: %s", i/4, v)
		}
		out = append(out, Kick{User: user, Device: dev, Kind: Kind(kind), Gateway: gw, At: msTime(now)})
		ids = append(ids, id)
	}
	return out, ids, nil
}
