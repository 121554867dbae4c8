package redigo

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/presencekit/presence/core"
)

// Publish sends message on channel with PUBLISH. In a cluster it goes
// through the node that serves the channel name's slot (redisc routes by the
// first argument), so that the messages of one channel keep their order; that
// node relays them to subscribers on every node.
func (s *Store) Publish(ctx context.Context, channel string, message []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var err error
	if s.cluster != nil {
		conn := s.cluster.Get()
		defer conn.Close()
		_, err = doTimeout(ctx, conn, "PUBLISH", channel, message)
	} else {
		var conn redis.Conn
		if conn, err = s.pool.GetContext(ctx); err != nil {
			return connError(err)
		}
		defer conn.Close()
		_, err = redis.DoContext(conn, ctx, "PUBLISH", channel, message)
	}
	if err != nil && !isReplyError(err) {
		return connError(err)
	}
	return core.ClassifyError(err)
}

// PublishBatch sends msgs with PUBLISH in one pipeline on one pooled
// connection. In a cluster it publishes them one at a time, as Publish
// does: redisc routes a connection by its first command, and the messages'
// channels may live on different nodes.
func (s *Store) PublishBatch(ctx context.Context, msgs []core.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if s.cluster != nil {
		for _, m := range msgs {
			if err := s.Publish(ctx, m.Channel, m.Payload); err != nil {
				return err
			}
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	conn, err := s.pool.GetContext(ctx)
	if err != nil {
		return connError(err)
	}
	defer conn.Close()
	for _, m := range msgs {
		if err := conn.Send("PUBLISH", m.Channel, m.Payload); err != nil {
			return connError(err)
		}
	}
	// an empty command flushes and reads every pending reply
	replies, err := redis.Values(redis.DoContext(conn, ctx, ""))
	if err != nil {
		return connError(err)
	}
	for _, r := range replies {
		if rerr, ok := r.(redis.Error); ok {
			return core.ClassifyError(rerr)
		}
	}
	return nil
}

// Subscribe subscribes to channels on a connection of its own and returns
// once the server has confirmed every subscription, so that a message
// published after Subscribe returns is received. Messages arrive on the
// returned channel until ctx ends, stop is called or the connection fails;
// the channel is then closed (there is no automatic resubscription). A
// consumer that stops reading holds up only this connection.
func (s *Store) Subscribe(ctx context.Context, channels ...string) (<-chan core.Message, func() error, error) {
	if len(channels) == 0 {
		return nil, nil, errors.New("redigo: subscribe: no channels")
	}
	conn, err := s.dialSubscriber(ctx)
	if err != nil {
		return nil, nil, connError(err)
	}
	psc := redis.PubSubConn{Conn: conn}
	args := make([]any, len(channels))
	for i, c := range channels {
		args[i] = c
	}
	if err := psc.Subscribe(args...); err != nil {
		psc.Close()
		return nil, nil, connError(err)
	}
	// A message on a channel already confirmed can arrive before the
	// confirmation of the next one: keep it.
	var early []core.Message
	for confirmed := 0; confirmed < len(channels); {
		switch m := receiveSub(ctx, psc).(type) {
		case redis.Subscription:
			if m.Kind == "subscribe" {
				confirmed++
			}
		case redis.Message:
			early = append(early, core.Message{Channel: m.Channel, Payload: m.Data})
		case error:
			psc.Close()
			if isReplyError(m) {
				return nil, nil, core.ClassifyError(m)
			}
			return nil, nil, connError(m)
		}
	}

	out := make(chan core.Message)
	quit := make(chan struct{})
	readerDone := make(chan struct{})
	allDone := make(chan struct{})
	var closeErr error

	// The reader owns out; it stops when the last subscription ends or the
	// connection fails.
	go func() {
		defer close(readerDone)
		defer close(out)
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
			// No read timeout: a subscriber can wait for ever.
			switch m := psc.ReceiveWithTimeout(0).(type) {
			case redis.Message:
				if !send(core.Message{Channel: m.Channel, Payload: m.Data}) {
					return
				}
			case redis.Subscription:
				if m.Count == 0 {
					return
				}
			case error:
				return
			}
		}
	}()

	// The closer owns the writes: it unsubscribes when asked, then closes
	// the connection once the reader has let go of it.
	go func() {
		defer close(allDone)
		select {
		case <-ctx.Done():
		case <-quit:
		case <-readerDone:
		}
		select {
		case <-readerDone:
		default:
			// The reader sees the last unsubscription confirmed, or, where
			// the connection is gone, an error.
			_ = psc.Unsubscribe()
			<-readerDone
		}
		closeErr = psc.Close()
	}()

	var once sync.Once
	stop := func() error {
		once.Do(func() { close(quit) })
		<-allDone
		return closeErr
	}
	return out, stop, nil
}

// dialSubscriber opens a connection of its own for a subscription, with
// the pool's dial function or, in a cluster, with Cluster.Dial (the
// Cluster's DialOptions) to any node, as pub/sub messages reach every node.
// A connection that was subscribed never goes back to a pool: the replies
// left over from leaving pub/sub mode could answer another caller's command,
// and redigo's pooled connection, which does not notice the UNSUBSCRIBE sent
// on it, unsubscribes again when closed, which servers that refuse
// UNSUBSCRIBE outside pub/sub mode (Valkey 8: NOSUB) answer with an error.
// A pool without a dial function lends one of its connections.
func (s *Store) dialSubscriber(ctx context.Context) (redis.Conn, error) {
	if s.cluster != nil {
		conn, err := s.cluster.Dial()
		if err != nil {
			return nil, err
		}
		// With no keys, Bind picks a random node.
		if err := redisc.BindConn(conn); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
	switch {
	case s.pool.DialContext != nil:
		return s.pool.DialContext(ctx)
	case s.pool.Dial != nil:
		return s.pool.Dial()
	}
	return s.pool.GetContext(ctx)
}

// receiveSub reads one pub/sub reply bounded by ctx: with ReceiveContext
// where the connection supports it, else with ctx's deadline as the timeout.
func receiveSub(ctx context.Context, psc redis.PubSubConn) any {
	if _, ok := psc.Conn.(redis.ConnWithContext); ok {
		return psc.ReceiveContext(ctx)
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout := time.Until(dl)
		if timeout <= 0 {
			return context.DeadlineExceeded
		}
		return psc.ReceiveWithTimeout(timeout)
	}
	return psc.Receive()
}
