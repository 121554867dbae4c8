package benchkit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/presencekit/presence/cmd/internal/benchkit"
	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/redistest"
)

// TestDialEveryAdapterAndVariant connects each adapter and each client
// variant to a throwaway redis-server and beats through it, and refuses a
// name that is neither.
func TestDialEveryAdapterAndVariant(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	srv := redistest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range append(benchkit.Adapters(), benchkit.Variants()...) {
		t.Run(name, func(t *testing.T) {
			conn, err := benchkit.Dial(ctx, name, "redis://"+srv.Addr, 4)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			e, err := core.New(conn.Store, core.Config{Prefix: "dial-" + name})
			if err != nil {
				t.Fatal(err)
			}
			ack, err := e.Heartbeat(ctx, core.Heartbeat{User: "u", Device: "d", Kind: core.KindWeb, Active: true})
			if err != nil || ack.Token == "" {
				t.Fatalf("heartbeat through %s: %+v, %v", name, ack, err)
			}
		})
	}
	if _, err := benchkit.Dial(ctx, "no-such-driver", "redis://"+srv.Addr, 1); !errors.Is(err, benchkit.ErrUnknownAdapter) {
		t.Errorf("unknown adapter: %v, want ErrUnknownAdapter", err)
	}
}
