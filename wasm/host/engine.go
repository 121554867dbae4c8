package host

import (
	"context"
	"fmt"
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
// core.Presence (Do); results and errors are those of the native core.Engine
// (errors rebuilt by abi.Error.Err: same messages, same sentinels), or a
// *ModuleError when the module itself fails.
type Engine struct {
	in    *Instance
	clock func() time.Time
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
	return e.clock().UnixMilli()
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

// Do runs op in the module, as core.Engine.Do does natively: the outcome
// is of the type op's doc names, with the same errors. The ABI has no
// AppendLog and no Ping: for them Do returns an error matching
// core.ErrUnsupported.
func (e *Engine) Do(ctx context.Context, op core.Op) (any, error) {
	name, args, err := request(op)
	if err != nil {
		return nil, err
	}
	res, err := e.do(ctx, name, args)
	if err != nil {
		return nil, err
	}
	return outcome(res)
}

// request is op as an ABI operation and its argument.
func request(op core.Op) (string, any, error) {
	switch op := op.(type) {
	case core.Heartbeat:
		w := abi.FromHeartbeat(op)
		return abi.OpHeartbeat, &w, nil
	case core.HeartbeatBatch:
		w := abi.HeartbeatBatch{Beats: make([]abi.Heartbeat, len(op))}
		for i, hb := range op {
			w.Beats[i] = abi.FromHeartbeat(hb)
		}
		return abi.OpHeartbeatBatch, &w, nil
	case core.Login:
		w := abi.FromLogin(op)
		return abi.OpLogin, &w, nil
	case core.Logout:
		return abi.OpLogout, &abi.End{User: op.User, Device: op.Device, Token: op.Token}, nil
	case core.Disconnect:
		return abi.OpDisconnect, &abi.End{User: op.User, Device: op.Device, Token: op.Token}, nil
	case core.SetManual:
		return abi.OpSetManual, &abi.SetManual{User: op.User, Manual: abi.Manual(op.Manual), TTL: abi.Duration(op.TTL)}, nil
	case core.ReadStatus:
		return abi.OpStatus, &abi.StatusArgs{User: op.User}, nil
	case core.ReadStatuses:
		return abi.OpStatuses, &abi.StatusesArgs{Users: op.Users}, nil
	case core.ScopeTouch:
		return abi.OpTouch, &abi.Touch{Scope: scope(op.Scope), Member: op.Member}, nil
	case core.TouchBatch:
		w := abi.TouchBatch{Touches: make([]abi.Touch, len(op))}
		for i, t := range op {
			w.Touches[i] = abi.Touch{Scope: scope(t.Scope), Member: t.Member}
		}
		return abi.OpTouchBatch, &w, nil
	case core.Leave:
		return abi.OpLeave, &abi.Touch{Scope: scope(op.Scope), Member: op.Member}, nil
	case core.ReadCount:
		return abi.OpCount, &abi.ScopeArgs{Scope: scope(op.Scope)}, nil
	case core.ReadMembers:
		return abi.OpMembers, &abi.MembersArgs{Scope: scope(op.Scope), Cursor: op.Cursor, Limit: op.Limit}, nil
	case core.ReadActive:
		return abi.OpActiveWithin, &abi.ActiveWithinArgs{Scope: scope(op.Scope), Within: abi.Duration(op.Within)}, nil
	case core.ReadOnline:
		return abi.OpOnline, &abi.Empty{}, nil
	case core.SweepUsers:
		return abi.OpSweepUsers, &abi.Empty{}, nil
	case core.SweepScopes:
		return abi.OpSweepScopes, &abi.Empty{}, nil
	case core.ReadChangeLog:
		return abi.OpChangeLogAfter, &abi.ChangeLogArgs{After: op.After, Limit: op.Limit}, nil
	case core.AckEvents:
		return abi.OpAck, &abi.AckArgs{IDs: op.IDs}, nil
	}
	return "", nil, fmt.Errorf("presence/host: the ABI has no %T: %w", op, core.ErrUnsupported)
}

// outcome is an ABI result as the core outcome it stands for.
func outcome(res any) (any, error) {
	switch r := res.(type) {
	case *abi.Ack:
		ack := r.Core()
		return ack, ack.Err
	case *abi.Acks:
		out := make([]core.Ack, len(r.Acks))
		for i, a := range r.Acks {
			out[i] = a.Core()
		}
		return out, nil
	case *abi.LoginResult:
		return r.Core(), nil
	case *abi.Ended:
		return r.Core(), nil
	case *abi.Changes:
		return r.Core(), nil
	case *abi.UserStatus:
		return r.Core(), nil
	case *abi.Statuses:
		out := make([]core.UserStatus, len(r.Statuses))
		for i, w := range r.Statuses {
			out[i] = w.Core()
		}
		return out, nil
	case *abi.Removed:
		return r.Removed, nil
	case *abi.Count:
		return r.Core(), nil
	case *abi.MemberPage:
		return r.Core(), nil
	case *abi.N:
		return r.N, nil
	case *abi.SweepReport:
		return r.Core(), nil
	case *abi.ChangeLog:
		entries, gap := r.Core()
		return core.LogPage{Entries: entries, Gap: gap}, nil
	case *abi.Online:
		return r.Core()
	}
	return nil, nil // Empty: the op's outcome is nil
}

func scope(sc core.Scope) abi.Scope { return abi.Scope{Class: sc.Class, ID: sc.ID} }
