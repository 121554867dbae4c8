package benchkit

import (
	"context"
	"fmt"

	"github.com/presencekit/presence/adapters/serverclock"
	"github.com/presencekit/presence/core"
)

// How a benchmarked engine reads "now" (docs/design.md §4): the modes of
// Suite.Clock and of the comparison's --clock.
const (
	// ClockServer follows the server's clock from the client
	// (serverclock), so that scripts take "now" as an argument, as
	// Centrifuge's stamps its beats with the client's clock.
	ClockServer = "server"
	// ClockScript has each script read the server's TIME: the engine's
	// default, a nil core.Config.Clock.
	ClockScript = "script"
)

// NewEngine returns an engine on store with cfg, whose clock follows mode
// (ClockServer synced once: a benchmark is short), or an error for an
// unknown mode.
func NewEngine(ctx context.Context, store core.Store, cfg core.Config, mode string) (*core.Engine, error) {
	var clk *serverclock.Clock
	switch mode {
	case ClockScript:
	case ClockServer, "":
		var err error
		if clk, err = serverclock.New(serverclock.Config{}); err != nil {
			return nil, err
		}
		cfg.Clock = clk.Now
	default:
		return nil, fmt.Errorf("benchkit: unknown clock %q (want %s or %s)", mode, ClockServer, ClockScript)
	}
	e, err := core.New(store, cfg)
	if err != nil || clk == nil {
		return e, err
	}
	if err := clk.Sync(ctx, e); err != nil {
		return nil, err
	}
	return e, nil
}
