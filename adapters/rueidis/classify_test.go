package rueidis

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/presencekit/presence/core"
)

func TestClassify(t *testing.T) {
	mr := miniredis.RunT(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// reply returns the error rueidis makes of the error reply msg: a
	// *rueidis.RedisError.
	reply := func(msg string) error {
		t.Helper()
		err := c.Do(context.Background(), c.B().Eval().Script("return redis.error_reply(ARGV[1])").Numkeys(0).Arg(msg).Build()).Error()
		var re *rueidis.RedisError
		if !errors.As(err, &re) || err.Error() != msg {
			t.Fatalf("error reply %q came back as %v", msg, err)
		}
		return err
	}

	tests := []struct {
		name  string
		err   error
		retry bool
	}{
		{"no slot", rueidis.ErrNoSlot, true},
		{"no slot wrapped", fmt.Errorf("hook: %w", rueidis.ErrNoSlot), true},
		{"no alive address", rueidis.ErrNoAddr, true},
		{"closing", rueidis.ErrClosing, true},
		{"cache aborted", rueidis.ErrDoCacheAborted, true},
		{"clusterdown", reply("CLUSTERDOWN The cluster is down"), true},
		{"clusterdown wrapped", fmt.Errorf("hook: %w", reply("CLUSTERDOWN Hash slot not served")), true},
		{"tryagain", reply("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"loading", reply("LOADING Redis is loading the dataset in memory"), true},
		{"readonly", reply("READONLY You can't write against a read only replica."), true},
		{"masterdown", reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{"deadline", context.DeadlineExceeded, true},
		{"script error", reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"no cache", rueidis.ErrNoCache, false},
		{"canceled", context.Canceled, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			if errors.Is(got, core.ErrUnavailable) != tc.retry || errors.Is(got, core.ErrUnavailable) != tc.retry {
				t.Fatalf("classify(%v) = %v: retryable %v, want %v", tc.err, got, errors.Is(got, core.ErrUnavailable), tc.retry)
			}
			if !errors.Is(got, tc.err) {
				t.Fatalf("classify(%v) = %v lost the driver error", tc.err, got)
			}
		})
	}
	if got := classify(reply("NOSCRIPT No matching script. Please use EVAL.")); !errors.Is(got, core.ErrNoScript) {
		t.Fatalf("NOSCRIPT: %v", got)
	}
	if classify(nil) != nil {
		t.Fatal("classify(nil) is not nil")
	}
}
