package guest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/wasm/abi"
)

// Host is what the module's surroundings provide.
type Host interface {
	// Eval runs a script request (abi.EncodeScriptRequest) and returns the
	// script response (abi.EncodeScriptResponse or abi.EncodeScriptFailure).
	Eval(ctx context.Context, request []byte) []byte
	// Publish publishes message on channel. It is called only when the
	// engine is configured with Publish.
	Publish(ctx context.Context, channel string, message []byte) error
}

// Guest runs ABI requests on an engine over its Host. It is safe for
// concurrent use, though it handles one request at a time.
type Guest struct {
	host Host

	mu    sync.Mutex
	clock opClock
	mode  string
	eng   *core.Engine
}

// New returns a guest over h, not yet configured.
func New(h Host) *Guest {
	return &Guest{host: h}
}

// opClock is the host clock: the "now" of the request being handled.
type opClock struct{ ms int64 }

// Now returns the request's instant.
func (c *opClock) Now() time.Time { return time.UnixMilli(c.ms) }

// Handle runs one request and returns its response. It never panics and
// never fails: malformed input, refusals and failures all come back as
// error responses; a panic inside becomes an error of code "internal".
func (g *Guest) Handle(ctx context.Context, request []byte) (response []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			response = abi.EncodeResponse(abi.Response{Error: &abi.Error{Code: abi.CodeInternal,
				Message: fmt.Sprintf("%v: %v", abi.ErrInternal, p)}})
		}
	}()
	req, err := abi.DecodeRequest(request)
	if err != nil {
		return abi.EncodeErrorResponse(err)
	}
	res, err := g.do(ctx, req)
	if err != nil {
		return abi.EncodeErrorResponse(err)
	}
	return abi.EncodeResponse(abi.Response{Result: res})
}

func (g *Guest) configure(cfg *abi.Config) (any, error) {
	c, err := cfg.Core()
	if err != nil {
		return nil, err
	}
	mode := cfg.Clock
	if mode == "" {
		mode = abi.ClockHost
	}
	if mode == abi.ClockHost {
		c.Clock = &g.clock
	}
	if cfg.Seed != nil {
		c.Rand = abi.SeededRand(*cfg.Seed)
	}
	var st core.Store = store{g.host}
	if cfg.Publish {
		st = publishingStore{store{g.host}}
	}
	eng, err := core.New(st, c)
	if err != nil {
		return nil, err
	}
	g.eng, g.mode = eng, mode
	return &abi.Configured{ABI: abi.Version, Clock: mode}, nil
}

func (g *Guest) do(ctx context.Context, req abi.Request) (any, error) {
	if cfg, ok := req.Args.(*abi.Config); ok {
		return g.configure(cfg)
	}
	if g.eng == nil {
		return nil, abi.ErrUnconfigured
	}
	if g.mode == abi.ClockHost {
		if req.Now <= 0 {
			return nil, &abi.DecodeError{What: "request", Field: "now", Reason: "required: the engine runs on the host's clock"}
		}
		g.clock.ms = req.Now
	}
	e := g.eng
	switch a := req.Args.(type) {
	case *abi.Heartbeat:
		ack, err := e.Heartbeat(ctx, a.Core())
		if err != nil && err != ack.Err {
			return nil, err
		}
		w := abi.FromAck(ack)
		return &w, nil
	case *abi.HeartbeatBatch:
		beats := make([]core.Heartbeat, len(a.Beats))
		for i, b := range a.Beats {
			beats[i] = b.Core()
		}
		acks, err := e.HeartbeatBatch(ctx, beats)
		if err != nil {
			return nil, err
		}
		out := &abi.Acks{Acks: make([]abi.Ack, len(acks))}
		for i, ack := range acks {
			out.Acks[i] = abi.FromAck(ack)
		}
		return out, nil
	case *abi.Login:
		r, err := e.Login(ctx, a.Core())
		if err != nil {
			return nil, err
		}
		w := abi.FromLoginResult(r)
		return &w, nil
	case *abi.End:
		end := e.Logout
		if req.Op == abi.OpDisconnect {
			end = e.Disconnect
		}
		r, err := end(ctx, a.User, a.Device, a.Token)
		if err != nil {
			return nil, err
		}
		w := abi.FromEnded(r)
		return &w, nil
	case *abi.SetManual:
		cs, err := e.SetManual(ctx, a.User, core.Manual(a.Manual), time.Duration(a.TTL))
		if err != nil {
			return nil, err
		}
		w := abi.FromChanges(cs)
		return &w, nil
	case *abi.StatusArgs:
		s, err := e.Status(ctx, a.User)
		if err != nil {
			return nil, err
		}
		w := abi.FromUserStatus(s)
		return &w, nil
	case *abi.StatusesArgs:
		ss, err := e.Statuses(ctx, a.Users)
		if err != nil {
			return nil, err
		}
		out := &abi.Statuses{Statuses: make([]abi.UserStatus, len(ss))}
		for i, s := range ss {
			out.Statuses[i] = abi.FromUserStatus(s)
		}
		return out, nil
	case *abi.Touch:
		sc := core.Scope{Class: a.Scope.Class, ID: a.Scope.ID}
		if req.Op == abi.OpLeave {
			removed, err := e.Leave(ctx, sc, a.Member)
			if err != nil {
				return nil, err
			}
			return &abi.Removed{Removed: removed}, nil
		}
		return &abi.Empty{}, e.Touch(ctx, sc, a.Member)
	case *abi.TouchBatch:
		ts := make([]core.ScopeTouch, len(a.Touches))
		for i, t := range a.Touches {
			ts[i] = core.ScopeTouch{Scope: core.Scope{Class: t.Scope.Class, ID: t.Scope.ID}, Member: t.Member}
		}
		return &abi.Empty{}, e.TouchBatch(ctx, ts)
	case *abi.ScopeArgs:
		c, err := e.Count(ctx, core.Scope{Class: a.Scope.Class, ID: a.Scope.ID})
		if err != nil {
			return nil, err
		}
		w := abi.FromCount(c)
		return &w, nil
	case *abi.MembersArgs:
		p, err := e.Members(ctx, core.Scope{Class: a.Scope.Class, ID: a.Scope.ID}, a.Cursor, a.Limit)
		if err != nil {
			return nil, err
		}
		w := abi.FromMemberPage(p)
		return &w, nil
	case *abi.ActiveWithinArgs:
		n, err := e.ActiveWithin(ctx, core.Scope{Class: a.Scope.Class, ID: a.Scope.ID}, time.Duration(a.Within))
		if err != nil {
			return nil, err
		}
		return &abi.N{N: n}, nil
	case *abi.ChangeLogArgs:
		entries, gap, err := e.ChangeLogAfter(ctx, a.After, a.Limit)
		if err != nil {
			return nil, err
		}
		w := abi.FromChangeLog(entries, gap)
		return &w, nil
	case *abi.Empty:
		if req.Op == abi.OpOnline {
			counts, err := e.Online(ctx)
			if err != nil {
				return nil, err
			}
			w := abi.FromOnline(counts)
			return &w, nil
		}
		sweep := e.SweepUsers
		if req.Op == abi.OpSweepScopes {
			sweep = e.SweepScopes
		}
		r, err := sweep(ctx)
		if err != nil {
			return nil, err
		}
		w := abi.FromSweepReport(r)
		return &w, nil
	}
	return nil, &abi.DecodeError{What: "request", Field: "op", Reason: "unhandled operation " + req.Op}
}

// store is the engine's core.Store: every Eval is one script request to
// the host.
type store struct{ host Host }

// Eval sends calls to the host and decodes its answer; an answer that
// does not decode fails every call with the *abi.DecodeError.
func (s store) Eval(ctx context.Context, calls []core.Call) []core.Result {
	out := s.host.Eval(ctx, abi.EncodeScriptRequest(calls))
	res, err := abi.DecodeScriptResponse(out, len(calls))
	if err != nil {
		res = make([]core.Result, len(calls))
		for i := range res {
			res[i].Err = err
		}
	}
	return res
}

// publishingStore is a store with the core.Publisher capability.
type publishingStore struct{ store }

// Publish hands the message to the host.
func (s publishingStore) Publish(ctx context.Context, channel string, message []byte) error {
	return s.host.Publish(ctx, channel, message)
}

var (
	_ core.Store     = store{}
	_ core.Publisher = publishingStore{}
)
