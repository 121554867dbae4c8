package sweeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/presencekit/presence/core"
)

// Sweeper is what Run needs of an engine; *core.Engine and *core.Model have it.
type Sweeper interface {
	SweepUsers(ctx context.Context) (core.SweepReport, error)
	SweepScopes(ctx context.Context) (core.SweepReport, error)
}

// Options configures Run. Zero values mean the defaults.
type Options struct {
	// UserInterval is the time between user sweeps. Default 1 s: a pass with
	// nothing due costs one cheap call per bucket, and coalesced changes are
	// due one CoalesceWindow after they happen.
	UserInterval time.Duration
	// ScopeInterval is the time between scope sweeps. Default 5 s; each
	// scope is visited only when its class's SweepInterval has passed.
	ScopeInterval time.Duration
	// OnReport, if set, receives every pass's report ("users" or "scopes").
	OnReport func(kind string, r core.SweepReport, err error)
	// Logger, if set, receives failed passes.
	Logger *slog.Logger
}

// Run sweeps users and scopes until ctx ends, and returns ctx's error. A
// failed pass is reported and retried on the next tick.
func Run(ctx context.Context, s Sweeper, opt Options) error {
	users := time.NewTicker(orDefault(opt.UserInterval, time.Second))
	defer users.Stop()
	scopes := time.NewTicker(orDefault(opt.ScopeInterval, 5*time.Second))
	defer scopes.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-users.C:
			r, err := s.SweepUsers(ctx)
			report(ctx, opt, "users", r, err)
		case <-scopes.C:
			r, err := s.SweepScopes(ctx)
			report(ctx, opt, "scopes", r, err)
		}
	}
}

func report(ctx context.Context, opt Options, kind string, r core.SweepReport, err error) {
	if opt.OnReport != nil {
		opt.OnReport(kind, r, err)
	}
	if err != nil && opt.Logger != nil && ctx.Err() == nil {
		opt.Logger.WarnContext(ctx, "presence: sweep failed", "kind", kind, "err", err)
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
