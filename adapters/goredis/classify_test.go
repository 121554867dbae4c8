package goredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/presencekit/presence/core"
)

// replyErr returns the error go-redis makes of the error reply msg, typed as
// go-redis types the replies it knows.
func replyErr(t *testing.T, c *redis.Client, msg string) error {
	t.Helper()
	err := c.Eval(context.Background(), "return redis.error_reply(ARGV[1])", nil, msg).Err()
	if err == nil || err.Error() != msg {
		t.Fatalf("error reply %q came back as %v", msg, err)
	}
	return err
}

func TestClassify(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	single := New(c)
	cc := redis.NewClusterClient(&redis.ClusterOptions{}) // no nodes at all
	t.Cleanup(func() { cc.Close() })
	cluster := New(cc)
	noNodes := cc.Ping(context.Background()).Err()
	if noNodes == nil || !strings.Contains(noNodes.Error(), errClusterNoNodes) {
		t.Fatalf("a cluster client without nodes: %v, want %q", noNodes, errClusterNoNodes)
	}

	moved := replyErr(t, c, "MOVED 3999 127.0.0.1:6381")
	tests := []struct {
		name  string
		s     *Store
		err   error
		retry bool
	}{
		{"clusterdown", cluster, replyErr(t, c, "CLUSTERDOWN The cluster is down"), true},
		{"clusterdown wrapped by a hook", cluster, fmt.Errorf("hook: %w", replyErr(t, c, "CLUSTERDOWN Hash slot not served")), true},
		{"tryagain", cluster, replyErr(t, c, "TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"readonly", cluster, fmt.Errorf("hook: %w", replyErr(t, c, "READONLY You can't write against a read only replica.")), true},
		{"masterdown", single, replyErr(t, c, "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{"loading", single, replyErr(t, c, "LOADING Redis is loading the dataset in memory"), true},
		{"cluster has no nodes", cluster, noNodes, true},
		{"pool timeout", cluster, redis.ErrPoolTimeout, true},
		{"pool exhausted", single, redis.ErrPoolExhausted, true},
		{"moved through a cluster client", cluster, moved, true},
		{"ask through a cluster client", cluster, replyErr(t, c, "ASK 3999 127.0.0.1:6381"), true},
		{"deadline", cluster, context.DeadlineExceeded, true},
		{"moved through a single-node client", single, moved, false},
		{"script error", cluster, replyErr(t, c, "ERR user_script:1: boom"), false},
		{"canceled", cluster, context.Canceled, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error to classify")
			}
			got := tc.s.classify(tc.err)
			if errors.Is(got, core.ErrUnavailable) != tc.retry || errors.Is(got, core.ErrUnavailable) != tc.retry {
				t.Fatalf("classify(%v) = %v: retryable %v, want %v", tc.err, got, errors.Is(got, core.ErrUnavailable), tc.retry)
			}
			if !errors.Is(got, tc.err) {
				t.Fatalf("classify(%v) = %v lost the driver error", tc.err, got)
			}
		})
	}
	if got := single.classify(replyErr(t, c, "NOSCRIPT No matching script. Please use EVAL.")); !errors.Is(got, core.ErrNoScript) {
		t.Fatalf("NOSCRIPT: %v", got)
	}
}
