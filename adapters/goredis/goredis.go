package goredis

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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

// Store is a core.Store over a go-redis client. It is safe for concurrent use
// as long as the client is.
type Store struct {
	c redis.UniversalClient
	// pipes holds pipelines to reuse: Exec leaves a pipeline empty, and a
	// new one costs a handful of allocations (itself and its method
	// values) on every round trip.
	pipes sync.Pool
	// lastReload is when a cluster client was last told to reload its slot
	// map (unix ns), so that a failover is followed within a second.
	lastReload atomic.Int64
}

// New returns a Store that sends commands through c. The Store does not own
// c: closing c is the caller's job.
func New(c redis.UniversalClient) *Store {
	s := &Store{c: c}
	s.pipes.New = func() any { return c.Pipeline() }
	return s
}

// Eval sends every call in one pipeline and returns one Result per call, in
// order. A call whose keys span cluster slots is not sent and gets an error
// that matches core.ErrCrossSlot; a call that fails on the server (NOSCRIPT,
// a Lua error) fails alone, the others still get their replies.
func (s *Store) Eval(ctx context.Context, calls []core.Call) []core.Result {
	results := make([]core.Result, len(calls))
	if len(calls) == 0 {
		return results
	}
	var (
		one    [1]*redis.Cmd
		cmds   = one[:]
		queued int
	)
	if len(calls) > 1 {
		cmds = make([]*redis.Cmd, len(calls))
	}
	// every command's arguments in one allocation
	n := 0
	for i := range calls {
		n += evalArgs(&calls[i])
	}
	slab := make([]any, n)
	for i := range calls {
		if err := slot.Check(calls[i].Keys); err != nil {
			results[i].Err = err
			continue
		}
		k := evalArgs(&calls[i])
		cmds[i] = evalCmd(ctx, &calls[i], slab[:k:k])
		slab = slab[k:]
		queued++
	}
	if queued == 0 {
		return results
	}
	// a lone call too, so that pipeline hooks see every round trip
	pipe := s.pipes.Get().(redis.Pipeliner)
	for _, cmd := range cmds {
		if cmd != nil {
			_ = pipe.Process(ctx, cmd)
		}
	}
	_, execErr := pipe.Exec(ctx)
	s.pipes.Put(pipe)
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		val, err := cmd.Result()
		if err == nil && val == nil && execErr != nil {
			// Never answered: go-redis stamps transport errors on every
			// command, but do not read a missing reply as a nil one.
			err = execErr
		}
		results[i] = s.result(val, err)
		if errors.Is(results[i].Err, core.ErrUnavailable) {
			s.reloadSlots(ctx)
		}
	}
	return results
}

// evalArgs returns the length of call's command.
func evalArgs(call *core.Call) int { return 3 + len(call.Keys) + len(call.Args) }

// evalCmd returns call as an EVALSHA (or EVAL, with its Source) command,
// built in args (evalArgs(call) long). Its keys and arguments go in as
// pointers into call, which go-redis writes as the strings they point to:
// a string put in an interface is copied to the heap, a pointer is not,
// and a beat has a dozen of them. call must not change until the command
// has run.
func evalCmd(ctx context.Context, call *core.Call, args []any) *redis.Cmd {
	args[0], args[1] = "evalsha", &call.SHA
	if call.Source != "" {
		args[0], args[1] = "eval", &call.Source
	}
	args[2] = len(call.Keys)
	for j := range call.Keys {
		args[3+j] = &call.Keys[j]
	}
	for j := range call.Args {
		args[3+len(call.Keys)+j] = &call.Args[j]
	}
	cmd := redis.NewCmd(ctx, args...)
	if len(call.Keys) > 0 {
		// where a cluster client finds the key that routes the command
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// reloadSlots makes a cluster client reload its slot map after a node could
// not be reached, at most once a second: go-redis reloads at once only on
// MOVED or ASK, which a dead master never sends, so without this it would
// keep sending a failed-over master's slots to the dead node until its
// periodic reload (ClusterOptions.ClusterStateReloadInterval, 60 s).
func (s *Store) reloadSlots(ctx context.Context) {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return
	}
	now, last := time.Now().UnixNano(), s.lastReload.Load()
	if now-last > int64(time.Second) && s.lastReload.CompareAndSwap(last, now) {
		cc.ReloadState(ctx)
	}
}

// result maps one go-redis reply to a core.Result.
func (s *Store) result(val any, err error) core.Result {
	if errors.Is(err, redis.Nil) {
		return core.Result{Value: core.Value{}}
	}
	if err != nil {
		return core.Result{Err: s.classify(err)}
	}
	v, err := toValue(val)
	if err != nil {
		return core.Result{Err: err}
	}
	return core.Result{Value: v}
}

// errClusterNoNodes is the text of go-redis' unexported error for a cluster
// client whose slot map has no node left, which it reports while no node it
// knows answers (during a failover, until the map is reloaded).
const errClusterNoNodes = "redis: cluster has no nodes"

// classify is core.ClassifyError, plus go-redis' own errors for a pool or a
// cluster that cannot serve a call just now, matched by type where go-redis
// exports one (its helpers see through errors that hooks wrap, which core's
// match of a reply's first word does not). Through a cluster client a MOVED
// or ASK reply means the slot moved more often than
// ClusterOptions.MaxRedirects follows, as a failover or a resharding does:
// the call did not run, and a later one finds the new owner. Through a
// single-node client it means the client points at a cluster node, which no
// retry mends.
func (s *Store) classify(err error) error {
	if err == nil || errors.Is(err, core.ErrUnavailable) {
		return err
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	_, cluster := s.c.(*redis.ClusterClient)
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsLoadingError(err) ||
		redis.IsReadOnlyError(err) || redis.IsMasterDownError(err) ||
		strings.Contains(err.Error(), errClusterNoNodes) || (cluster && (moved || ask)) {
		return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
	return core.ClassifyError(err)
}

// toValue maps a reply as go-redis decodes it. RESP3-only types only appear
// when a script opts in with redis.setresp(3); they map as a RESP2 client
// would see them: true as 1, false as nil, doubles and big numbers as
// strings, maps as flat key-value arrays (sorted by key). An error nested in
// an array fails the whole call.
func toValue(val any) (core.Value, error) {
	switch v := val.(type) {
	case nil:
		return core.Value{}, nil
	case int64:
		return core.Value{Kind: core.ValueInt, Int: v}, nil
	case string:
		return core.Value{Kind: core.ValueString, Str: v}, nil
	case []byte:
		return core.Value{Kind: core.ValueString, Str: string(v)}, nil
	case bool:
		if v {
			return core.Value{Kind: core.ValueInt, Int: 1}, nil
		}
		return core.Value{}, nil
	case float64:
		return core.Value{Kind: core.ValueString, Str: strconv.FormatFloat(v, 'f', -1, 64)}, nil
	case *big.Int:
		return core.Value{Kind: core.ValueString, Str: v.String()}, nil
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
	case map[any]any:
		keys := make([]any, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		items := make([]core.Value, 0, 2*len(v))
		for _, k := range keys {
			kv, err := toValue(k)
			if err != nil {
				return core.Value{}, err
			}
			vv, err := toValue(v[k])
			if err != nil {
				return core.Value{}, err
			}
			items = append(items, kv, vv)
		}
		return core.Value{Kind: core.ValueArray, Array: items}, nil
	case error:
		return core.Value{}, core.ClassifyError(v)
	}
	return core.Value{}, fmt.Errorf("%w: goredis: reply of type %T", core.ErrReply, val)
}

// Publish sends message on channel with PUBLISH. On a *redis.ClusterClient
// it goes through the master that serves the channel name's slot, as if the
// name were a key, so that the messages of one channel keep their order
// (PUBLISH has no key, and go-redis would otherwise pick a random node).
func (s *Store) Publish(ctx context.Context, channel string, message []byte) error {
	var c redis.Cmdable = s.c
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			return s.classify(err)
		}
		c = node
	}
	return s.classify(c.Publish(ctx, channel, message).Err())
}

// PublishBatch sends msgs with PUBLISH in one pipeline: on a
// *redis.ClusterClient one pipeline per master, each message through the
// master that serves its channel's slot, as Publish does.
func (s *Store) PublishBatch(ctx context.Context, msgs []core.Message) error {
	pipes := map[string]redis.Pipeliner{} // by node address
	var order []redis.Pipeliner
	cc, cluster := s.c.(*redis.ClusterClient)
	for _, m := range msgs {
		var c redis.UniversalClient = s.c
		addr := ""
		if cluster {
			node, err := cc.MasterForKey(ctx, m.Channel)
			if err != nil {
				return s.classify(err)
			}
			c, addr = node, node.Options().Addr
		}
		p := pipes[addr]
		if p == nil {
			p = c.Pipeline()
			pipes[addr] = p
			order = append(order, p)
		}
		p.Publish(ctx, m.Channel, m.Payload)
	}
	for _, p := range order {
		if _, err := p.Exec(ctx); err != nil {
			return s.classify(err)
		}
	}
	return nil
}

// Subscribe subscribes to channels and returns once the server has confirmed
// every subscription, so that a message published after Subscribe returns is
// received. Messages arrive on the returned channel until ctx ends or stop is
// called; the channel is then closed. go-redis reconnects and resubscribes
// after a lost connection on its own; messages published meanwhile are lost.
// A consumer that falls behind by more than go-redis' buffer (100 messages)
// for over a minute loses messages too.
func (s *Store) Subscribe(ctx context.Context, channels ...string) (<-chan core.Message, func() error, error) {
	if len(channels) == 0 {
		return nil, nil, errors.New("goredis: subscribe: no channels")
	}
	ps := s.c.Subscribe(ctx, channels...)
	// A message on a channel already confirmed can arrive before the
	// confirmation of the next one: keep it.
	var early []core.Message
	for confirmed := 0; confirmed < len(channels); {
		msg, err := ps.Receive(ctx)
		if err != nil {
			ps.Close()
			return nil, nil, s.classify(err)
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			confirmed++
		case *redis.Message:
			early = append(early, message(m))
		}
	}
	in := ps.Channel()
	out := make(chan core.Message)
	quit := make(chan struct{})
	done := make(chan struct{})
	var closeErr error
	go func() {
		defer close(done)
		defer close(out)
		defer func() { closeErr = ps.Close() }()
		send := func(m core.Message) bool {
			select {
			case out <- m:
				return true
			case <-quit:
			case <-ctx.Done():
			}
			return false
		}
		for _, m := range early {
			if !send(m) {
				return
			}
		}
		for {
			select {
			case m, ok := <-in:
				if !ok || !send(message(m)) {
					return
				}
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	stop := sync.OnceValue(func() error {
		close(quit)
		<-done
		return closeErr
	})
	return out, stop, nil
}

func message(m *redis.Message) core.Message {
	return core.Message{Channel: m.Channel, Payload: []byte(m.Payload)}
}
