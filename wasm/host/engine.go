package host

import (
	"context"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

// EngineOptions are the settings of an engine in a module beyond
// core.Config.
type EngineOptions struct {
	// Seed, when non-empty, makes the module's session and lock tokens the
	// stream abi.SeededRand(Seed), so that runs repeat exactly; a native
	// engine with core.Config.Rand = abi.SeededRand(Seed) issues the same
	// tokens. Empty: the module's crypto/rand.
	Seed string
	// Publish makes the engine publish status changes and kicks through
	// the store (when it implements core.Publisher), as a native engine
	// over that store does.
	Publish bool
}

// Engine is a presence engine running in a module instance. It implements
// core.Presence; results and errors are those of the native core.Engine
// (errors rebuilt by abi.Error.Err: same messages, same sentinels), or a
// *ModuleError when the module itself fails.
type Engine struct {
	in    *Instance
	clock core.Clock
}

var _ core.Presence = (*Engine)(nil)

// Configure (re)configures the instance's engine and returns it. Of
// cfg's fields that cannot cross into the module, Clock is read here, on
// the host, and sent with every operation (nil: the Redis server's
// clock); Rand is replaced by opt.Seed; Metrics and Logger are not used.
// An invalid configuration gives the core's *core.InputError.
func (in *Instance) Configure(ctx context.Context, cfg core.Config, opt EngineOptions) (*Engine, error) {
	w := abi.FromConfig(cfg)
	if opt.Seed != "" {
		w.Seed = &opt.Seed
	}
	// The module always returns its messages, so that their outbox IDs
	// are acknowledged as a native engine acknowledges them, published or
	// (without Publish, or without a Publisher) not.
	w.Publish = true
	if _, err := in.Do(ctx, abi.OpConfigure, 0, &w); err != nil {
		return nil, err
	}
	in.runMu.Lock()
	in.quiet = !opt.Publish
	in.runMu.Unlock()
	return &Engine{in: in, clock: cfg.Clock}, nil
}

// Instance returns the instance the engine runs in.
func (e *Engine) Instance() *Instance { return e.in }

func (e *Engine) now() int64 {
	if e.clock == nil {
		return 0
	}
	return e.clock.Now().UnixMilli()
}

func (e *Engine) do(ctx context.Context, op string, args any) (any, error) {
	o := &Op{Op: op, Args: args}
	if err := e.in.Run(ctx, e.now, o); err != nil {
		return nil, err
	}
	return o.Result, o.Err
}

// Run runs ops together in the engine's instance (Instance.Run), on the
// engine's clock: their plans are in flight at once and the calls of each
// round go to the store in one Eval, as core.Engine.Run does natively.
func (e *Engine) Run(ctx context.Context, ops ...*Op) error {
	return e.in.Run(ctx, e.now, ops...)
}

// Heartbeat is core.Engine.Heartbeat in the module.
func (e *Engine) Heartbeat(ctx context.Context, hb core.Heartbeat) (core.Ack, error) {
	w := abi.FromHeartbeat(hb)
	res, err := e.do(ctx, abi.OpHeartbeat, &w)
	if err != nil {
		return core.Ack{}, err
	}
	ack := res.(*abi.Ack).Core()
	return ack, ack.Err
}

// HeartbeatBatch is core.Engine.HeartbeatBatch in the module.
func (e *Engine) HeartbeatBatch(ctx context.Context, beats []core.Heartbeat) ([]core.Ack, error) {
	w := abi.HeartbeatBatch{Beats: make([]abi.Heartbeat, len(beats))}
	for i, hb := range beats {
		w.Beats[i] = abi.FromHeartbeat(hb)
	}
	res, err := e.do(ctx, abi.OpHeartbeatBatch, &w)
	if err != nil {
		return nil, err
	}
	acks := res.(*abi.Acks).Acks
	out := make([]core.Ack, len(acks))
	for i, a := range acks {
		out[i] = a.Core()
	}
	return out, nil
}

// Login is core.Engine.Login in the module.
func (e *Engine) Login(ctx context.Context, l core.Login) (core.LoginResult, error) {
	w := abi.FromLogin(l)
	res, err := e.do(ctx, abi.OpLogin, &w)
	if err != nil {
		return core.LoginResult{}, err
	}
	return res.(*abi.LoginResult).Core(), nil
}

// Logout is core.Engine.Logout in the module.
func (e *Engine) Logout(ctx context.Context, user, device, token string) (core.Ended, error) {
	return e.end(ctx, abi.OpLogout, user, device, token)
}

// Disconnect is core.Engine.Disconnect in the module.
func (e *Engine) Disconnect(ctx context.Context, user, device, token string) (core.Ended, error) {
	return e.end(ctx, abi.OpDisconnect, user, device, token)
}

func (e *Engine) end(ctx context.Context, op, user, device, token string) (core.Ended, error) {
	res, err := e.do(ctx, op, &abi.End{User: user, Device: device, Token: token})
	if err != nil {
		return core.Ended{}, err
	}
	return res.(*abi.Ended).Core(), nil
}

// SetManual is core.Engine.SetManual in the module.
func (e *Engine) SetManual(ctx context.Context, user string, m core.Manual, ttl time.Duration) ([]core.Change, error) {
	res, err := e.do(ctx, abi.OpSetManual, &abi.SetManual{User: user, Manual: abi.Manual(m), TTL: abi.Duration(ttl)})
	if err != nil {
		return nil, err
	}
	return res.(*abi.Changes).Core(), nil
}

// Status is core.Engine.Status in the module.
func (e *Engine) Status(ctx context.Context, user string) (core.UserStatus, error) {
	res, err := e.do(ctx, abi.OpStatus, &abi.StatusArgs{User: user})
	if err != nil {
		return core.UserStatus{}, err
	}
	return res.(*abi.UserStatus).Core(), nil
}

// Statuses is core.Engine.Statuses in the module.
func (e *Engine) Statuses(ctx context.Context, users []string) ([]core.UserStatus, error) {
	res, err := e.do(ctx, abi.OpStatuses, &abi.StatusesArgs{Users: users})
	if err != nil {
		return nil, err
	}
	ws := res.(*abi.Statuses).Statuses
	out := make([]core.UserStatus, len(ws))
	for i, w := range ws {
		out[i] = w.Core()
	}
	return out, nil
}

func scope(sc core.Scope) abi.Scope { return abi.Scope{Class: sc.Class, ID: sc.ID} }

// Touch is core.Engine.Touch in the module.
func (e *Engine) Touch(ctx context.Context, sc core.Scope, member string) error {
	_, err := e.do(ctx, abi.OpTouch, &abi.Touch{Scope: scope(sc), Member: member})
	return err
}

// TouchBatch is core.Engine.TouchBatch in the module.
func (e *Engine) TouchBatch(ctx context.Context, touches []core.ScopeTouch) error {
	w := abi.TouchBatch{Touches: make([]abi.Touch, len(touches))}
	for i, t := range touches {
		w.Touches[i] = abi.Touch{Scope: scope(t.Scope), Member: t.Member}
	}
	_, err := e.do(ctx, abi.OpTouchBatch, &w)
	return err
}

// Leave is core.Engine.Leave in the module.
func (e *Engine) Leave(ctx context.Context, sc core.Scope, member string) (bool, error) {
	res, err := e.do(ctx, abi.OpLeave, &abi.Touch{Scope: scope(sc), Member: member})
	if err != nil {
		return false, err
	}
	return res.(*abi.Removed).Removed, nil
}

// Count is core.Engine.Count in the module.
func (e *Engine) Count(ctx context.Context, sc core.Scope) (core.Count, error) {
	res, err := e.do(ctx, abi.OpCount, &abi.ScopeArgs{Scope: scope(sc)})
	if err != nil {
		return core.Count{}, err
	}
	return res.(*abi.Count).Core(), nil
}

// Members is core.Engine.Members in the module.
func (e *Engine) Members(ctx context.Context, sc core.Scope, cursor string, limit int) (core.MemberPage, error) {
	res, err := e.do(ctx, abi.OpMembers, &abi.MembersArgs{Scope: scope(sc), Cursor: cursor, Limit: limit})
	if err != nil {
		return core.MemberPage{}, err
	}
	return res.(*abi.MemberPage).Core(), nil
}

// ActiveWithin is core.Engine.ActiveWithin in the module.
func (e *Engine) ActiveWithin(ctx context.Context, sc core.Scope, d time.Duration) (int64, error) {
	res, err := e.do(ctx, abi.OpActiveWithin, &abi.ActiveWithinArgs{Scope: scope(sc), Within: abi.Duration(d)})
	if err != nil {
		return 0, err
	}
	return res.(*abi.N).N, nil
}

// SweepUsers is core.Engine.SweepUsers in the module.
func (e *Engine) SweepUsers(ctx context.Context) (core.SweepReport, error) {
	return e.sweep(ctx, abi.OpSweepUsers)
}

// SweepScopes is core.Engine.SweepScopes in the module.
func (e *Engine) SweepScopes(ctx context.Context) (core.SweepReport, error) {
	return e.sweep(ctx, abi.OpSweepScopes)
}

func (e *Engine) sweep(ctx context.Context, op string) (core.SweepReport, error) {
	res, err := e.do(ctx, op, &abi.Empty{})
	if err != nil {
		return core.SweepReport{}, err
	}
	return res.(*abi.SweepReport).Core(), nil
}

// ChangeLogAfter is core.Engine.ChangeLogAfter in the module.
func (e *Engine) ChangeLogAfter(ctx context.Context, after string, limit int) ([]core.LoggedChange, bool, error) {
	res, err := e.do(ctx, abi.OpChangeLogAfter, &abi.ChangeLogArgs{After: after, Limit: limit})
	if err != nil {
		return nil, false, err
	}
	entries, gap := res.(*abi.ChangeLog).Core()
	return entries, gap, nil
}

// Online is core.Engine.Online in the module.
func (e *Engine) Online(ctx context.Context) (map[core.Status]int64, error) {
	res, err := e.do(ctx, abi.OpOnline, &abi.Empty{})
	if err != nil {
		return nil, err
	}
	return res.(*abi.Online).Core()
}
