package redigo

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/presencekit/presence/core"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		retry bool
	}{
		{"clusterdown", result(nil, redis.Error("CLUSTERDOWN The cluster is down")).Err, true},
		{"tryagain", result(nil, redis.Error("TRYAGAIN Multiple keys request during rehashing of slot")).Err, true},
		{"readonly", result(nil, redis.Error("READONLY You can't write against a read only replica.")).Err, true},
		{"masterdown", result(nil, redis.Error("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.")).Err, true},
		{"loading", result(nil, redis.Error("LOADING Redis is loading the dataset in memory")).Err, true},
		{"script error", result(nil, redis.Error("ERR user_script:1: boom")).Err, false},
		// redisc's own errors are unexported; any error that is not a
		// reply means the call's node could not be used.
		{"too many redirections", connError(errors.New("redisc: too many attempts")), true},
		{"all nodes failed", connError(errors.New("redisc: all nodes failed\ndial tcp 127.0.0.1:1: connect: connection refused")), true},
		{"pool exhausted", connError(redis.ErrPoolExhausted), true},
		{"eof", connError(io.EOF), true},
		{"canceled", connError(context.Canceled), false},
	}
	// The errors a cluster without a slot map gives, as after every node
	// of a slot failed.
	empty := &redisc.Cluster{}
	t.Cleanup(func() { empty.Close() })
	s := NewCluster(empty)
	for name, keys := range map[string][]string{"keyed call": {"{u}:k"}, "keyless call": nil} {
		call := core.Call{SHA: "0123456789012345678901234567890123456789", Keys: keys}
		err := s.Eval(context.Background(), []core.Call{call})[0].Err
		tests = append(tests, struct {
			name  string
			err   error
			retry bool
		}{"empty cluster, " + name, err, true})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error to classify")
			}
			if errors.Is(tc.err, core.ErrUnavailable) != tc.retry || errors.Is(tc.err, core.ErrUnavailable) != tc.retry {
				t.Fatalf("%v: retryable %v, want %v", tc.err, errors.Is(tc.err, core.ErrUnavailable), tc.retry)
			}
		})
	}
}
