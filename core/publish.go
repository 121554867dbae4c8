package core

import (
	"context"
	"encoding/json"
	"time"
)

// wireChange and wireKick are the JSON payloads published on the channels.
type wireChange struct {
	User string `json:"user"`
	From string `json:"from"`
	To   string `json:"to"`
	At   int64  `json:"at"`
}

type wireKick struct {
	User    string `json:"user"`
	Device  string `json:"device"`
	Kind    string `json:"kind"`
	Gateway string `json:"gateway"`
	At      int64  `json:"at"`
}

// MarshalChange encodes a change as the JSON published on ChangeChannel:
// {"user":…,"from":"ONLINE","to":"AWAY","at":ms}.
func MarshalChange(c Change) []byte {
	b, _ := json.Marshal(wireChange{c.User, c.From.String(), c.To.String(), c.At.UnixMilli()})
	return b
}

// UnmarshalChange decodes a message from ChangeChannel.
func UnmarshalChange(b []byte) (Change, error) {
	var w wireChange
	if err := json.Unmarshal(b, &w); err != nil {
		return Change{}, replyErr("change message: %v", err)
	}
	from, ok1 := ParseStatus(w.From)
	to, ok2 := ParseStatus(w.To)
	if !ok1 || !ok2 || w.User == "" {
		return Change{}, replyErr("change message: %s", b)
	}
	return Change{User: w.User, From: from, To: to, At: time.UnixMilli(w.At)}, nil
}

// MarshalKick encodes a kick as the JSON published on KickChannel(gateway).
func MarshalKick(k Kick) []byte {
	b, _ := json.Marshal(wireKick{k.User, k.Device, k.Kind.String(), k.Gateway, k.At.UnixMilli()})
	return b
}

// UnmarshalKick decodes a message from a kick channel.
func UnmarshalKick(b []byte) (Kick, error) {
	var w wireKick
	if err := json.Unmarshal(b, &w); err != nil {
		return Kick{}, replyErr("kick message: %v", err)
	}
	kind, ok := ParseKind(w.Kind)
	if !ok || w.User == "" || w.Device == "" {
		return Kick{}, replyErr("kick message: %s", b)
	}
	return Kick{User: w.User, Device: w.Device, Kind: kind, Gateway: w.Gateway, At: time.UnixMilli(w.At)}, nil
}

// publish announces changes and kicks through the store's Publisher, if it
// has one. The state change is already committed, so a failed publish is
// logged and counted, not returned.
func (e *Engine) publish(ctx context.Context, changes []Change, kicks []Kick) {
	if e.pub == nil || len(changes)+len(kicks) == 0 {
		return
	}
	for _, c := range changes {
		e.send(ctx, "change", e.ChangeChannel(), MarshalChange(c))
	}
	for _, k := range kicks {
		if k.Gateway != "" {
			e.send(ctx, "kick", e.KickChannel(k.Gateway), MarshalKick(k))
		}
	}
}

func (e *Engine) send(ctx context.Context, kind, channel string, msg []byte) {
	if err := e.pub.Publish(ctx, channel, msg); err != nil {
		e.metrics.Error("publish", err)
		if e.log != nil {
			e.log.WarnContext(ctx, "presence: publish failed", "channel", channel, "err", err)
		}
		return
	}
	e.metrics.Published(kind, 1)
}
