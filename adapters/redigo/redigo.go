package redigo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/slot"
)

// Interface checks.
var (
	_ core.Store          = (*Store)(nil)
	_ core.Publisher      = (*Store)(nil)
	_ core.BatchPublisher = (*Store)(nil)
	_ core.Subscriber     = (*Store)(nil)
)

// Redirections and TRYAGAIN replies a cluster call follows before it gives up.
const (
	clusterAttempts = 5
	tryAgainDelay   = 50 * time.Millisecond
)

// Store is a core.Store over redigo, on one server (New) or on a Redis
// Cluster (NewCluster). It is safe for concurrent use.
type Store struct {
	pool    *redis.Pool
	cluster *redisc.Cluster
}

// New returns a Store that takes its connections from p, one per Eval. The
// Store does not own p: closing p is the caller's job.
func New(p *redis.Pool) *Store { return &Store{pool: p} }

// NewCluster returns a Store over a Redis Cluster. c should have CreatePool
// set, so that connections are pooled per node, and may have been refreshed
// (c.Refresh) already; otherwise the first calls learn the slot map through
// redirections. Subscribe dials a connection of its own with c.Dial, so
// whatever it needs to connect (timeouts, a password) belongs in
// c.DialOptions as well as in CreatePool. The Store does not own c: closing
// c is the caller's job.
func NewCluster(c *redisc.Cluster) *Store { return &Store{cluster: c} }

// Eval runs the calls and returns one Result per call, in order. A call
// whose keys span cluster slots is not sent and gets an error that matches
// core.ErrCrossSlot; a call that fails on the server (NOSCRIPT, a Lua error)
// fails alone. When the connection fails, the call being read and every later
// call get an error that matches core.ErrUnavailable (unless ctx was
// canceled).
func (s *Store) Eval(ctx context.Context, calls []core.Call) []core.Result {
	results := make([]core.Result, len(calls))
	var send []int
	for i, call := range calls {
		if err := slot.Check(call.Keys); err != nil {
			results[i].Err = err
			continue
		}
		send = append(send, i)
	}
	if len(send) == 0 {
		return results
	}
	if err := ctx.Err(); err != nil {
		fail(results, send, err)
		return results
	}
	if s.cluster != nil {
		s.evalCluster(ctx, calls, results, send)
	} else {
		s.evalPool(ctx, calls, results, send)
	}
	return results
}

// evalPool pipelines the calls in send on one pooled connection.
func (s *Store) evalPool(ctx context.Context, calls []core.Call, results []core.Result, send []int) {
	conn, err := s.pool.GetContext(ctx)
	if err != nil {
		fail(results, send, err)
		return
	}
	defer conn.Close()
	for _, i := range send {
		cmd, args := evalArgs(calls[i])
		if err := conn.Send(cmd, args...); err != nil {
			fail(results, send, err)
			return
		}
	}
	if err := conn.Flush(); err != nil {
		fail(results, send, err)
		return
	}
	for n, i := range send {
		reply, err := receive(ctx, conn)
		if err != nil && !isReplyError(err) {
			fail(results, send[n:], err)
			return
		}
		results[i] = result(reply, err)
	}
}

// evalCluster runs the calls in send one by one, each on a connection bound
// to its keys' node.
func (s *Store) evalCluster(ctx context.Context, calls []core.Call, results []core.Result, send []int) {
	for n, i := range send {
		if err := ctx.Err(); err != nil {
			fail(results, send[n:], err)
			return
		}
		results[i] = s.clusterCall(ctx, calls[i])
	}
}

func (s *Store) clusterCall(ctx context.Context, call core.Call) core.Result {
	conn := s.cluster.Get()
	defer conn.Close()
	// With no keys, Bind picks a random node.
	if err := redisc.BindConn(conn, call.Keys...); err != nil {
		return core.Result{Err: connError(err)}
	}
	cmd, args := evalArgs(call)
	reply, err := doTimeout(ctx, conn, cmd, args...)
	if redisc.ParseRedir(err) != nil || redisc.IsTryAgain(err) {
		// Rare (resharding, failover): follow redirections without a
		// deadline, as RetryConn has none.
		retry, rerr := redisc.RetryConn(conn, clusterAttempts, tryAgainDelay)
		if rerr != nil {
			return core.Result{Err: connError(rerr)}
		}
		reply, err = retry.Do(cmd, args...)
	}
	if err != nil && !isReplyError(err) {
		return core.Result{Err: connError(err)}
	}
	return result(reply, err)
}

// doTimeout runs one command on a redisc connection, bounded by ctx's
// deadline where it has one.
func doTimeout(ctx context.Context, conn redis.Conn, cmd string, args ...any) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		timeout := time.Until(dl)
		if timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
		return redis.DoWithTimeout(conn, timeout, cmd, args...)
	}
	return conn.Do(cmd, args...)
}

// receive reads one reply, bounded by ctx where ctx can end.
func receive(ctx context.Context, conn redis.Conn) (any, error) {
	if ctx.Done() == nil {
		return conn.Receive()
	}
	return redis.ReceiveContext(conn, ctx)
}

// evalArgs returns the command and arguments of a call: EVALSHA SHA when it
// has no source, EVAL SOURCE otherwise.
func evalArgs(call core.Call) (string, []any) {
	args := make([]any, 0, 2+len(call.Keys)+len(call.Args))
	cmd := "EVALSHA"
	if call.Source != "" {
		cmd = "EVAL"
		args = append(args, call.Source)
	} else {
		args = append(args, call.SHA)
	}
	args = append(args, strconv.Itoa(len(call.Keys)))
	for _, k := range call.Keys {
		args = append(args, k)
	}
	for _, a := range call.Args {
		args = append(args, a)
	}
	return cmd, args
}

func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// fail gives every call in idx the connection-level error err.
func fail(results []core.Result, idx []int, err error) {
	err = connError(err)
	for _, i := range idx {
		results[i] = core.Result{Err: err}
	}
}

// connError maps an error that is not a server reply: the connection or the
// pool failed, so the call's fate is unknown and Redis counts as unavailable.
// A canceled ctx is the caller's doing and stays as it is.
func connError(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	err = core.ClassifyError(err)
	if errors.Is(err, core.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: redigo: %w", core.ErrUnavailable, err)
}

// result maps one reply, or a server error reply, to a core.Result.
func result(reply any, err error) core.Result {
	if err != nil {
		return core.Result{Err: core.ClassifyError(err)}
	}
	v, err := toValue(reply)
	if err != nil {
		return core.Result{Err: err}
	}
	return core.Result{Value: v}
}

// toValue maps a RESP2 reply as redigo decodes it. An error nested in an
// array fails the whole call.
func toValue(reply any) (core.Value, error) {
	switch v := reply.(type) {
	case nil:
		return core.Value{}, nil
	case int64:
		return core.Value{Kind: core.ValueInt, Int: v}, nil
	case []byte:
		return core.Value{Kind: core.ValueString, Str: string(v)}, nil
	case string:
		return core.Value{Kind: core.ValueString, Str: v}, nil
	case []any:
		items := make([]core.Value, len(v))
		for i, item := range v {
			iv, err := toValue(item)
			if err != nil {
				return core.Value{}, err
			}
			items[i] = iv
		}
		return core.Value{Kind: core.ValueArray, Array: items}, nil
	case redis.Error:
		return core.Value{}, core.ClassifyError(v)
	}
	return core.Value{}, fmt.Errorf("%w: redigo: reply of type %T", core.ErrReply, reply)
}
