package rueidis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/presencekit/presence/core"
)

// unsubscribeTimeout bounds the UNSUBSCRIBE sent when a subscription ends.
const unsubscribeTimeout = 5 * time.Second

// Subscribe subscribes to channels with rueidis' Receive, in a goroutine,
// and returns once the server has confirmed every subscription, so that a
// message published after Subscribe returns is received. Messages arrive on
// the returned channel until ctx ends or stop is called; the channel is then
// closed, and also when Receive gives up on a lost connection (rueidis
// resubscribes after reconnecting where it can).
//
// rueidis delivers messages on the connection's own reader, so a consumer
// that stopped reading would stall every command on that connection;
// Subscribe queues messages without bound instead. On a cluster the
// subscription lives on one node, which relays messages published anywhere.
func (s *Store) Subscribe(ctx context.Context, channels ...string) (<-chan core.Message, func() error, error) {
	if len(channels) == 0 {
		return nil, nil, errors.New("rueidis: subscribe: no channels")
	}
	want := map[string]bool{}
	for _, c := range channels {
		want[c] = true
	}
	s.hold(channels)

	subCtx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	var readyOnce sync.Once
	var mu sync.Mutex
	confirmed := map[string]bool{}
	// Hooks run on the connection's reader: they must not block.
	recvCtx := rueidis.WithOnSubscriptionHook(subCtx, func(sub rueidis.PubSubSubscription) {
		if sub.Kind != "subscribe" || !want[sub.Channel] {
			return
		}
		mu.Lock()
		confirmed[sub.Channel] = true
		n := len(confirmed)
		mu.Unlock()
		if n == len(want) {
			readyOnce.Do(func() { close(ready) })
		}
	})
	var releaseOnce sync.Once
	release := func() (drop []string) {
		releaseOnce.Do(func() { drop = s.release(channels) })
		return drop
	}
	recvCtx = rueidis.WithOnReceiveReturnHook(recvCtx, func(err error, cc rueidis.CommandClient) error {
		if subCtx.Err() == nil {
			// A lost connection, not the end: rueidis may subscribe again.
			return err
		}
		// Only channels no other subscription of this Store still needs:
		// an UNSUBSCRIBE ends every listener of the channel on the
		// connection.
		if drop := release(); len(drop) > 0 {
			uctx, ucancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer ucancel()
			_ = cc.Do(uctx, cc.B().Unsubscribe().Channel(drop...).Build()).Error()
		}
		return err
	})

	q := newQueue()
	recvDone := make(chan struct{})
	var recvErr error
	go func() {
		defer close(recvDone)
		defer q.close()
		defer release()
		recvErr = s.c.Receive(recvCtx, s.c.B().Subscribe().Channel(channels...).Build(), func(m rueidis.PubSubMessage) {
			q.push(core.Message{Channel: m.Channel, Payload: []byte(m.Message)})
		})
	}()

	select {
	case <-ready:
	case <-recvDone:
		cancel()
		if recvErr == nil {
			recvErr = errors.New("rueidis: subscription ended before it was confirmed")
		}
		return nil, nil, classify(recvErr)
	case <-ctx.Done():
		cancel()
		<-recvDone
		return nil, nil, ctx.Err()
	}

	out := make(chan core.Message)
	quit := make(chan struct{})
	fwdDone := make(chan struct{})
	go func() {
		defer close(fwdDone)
		defer close(out)
		for {
			m, ok := q.pop(quit, ctx.Done())
			if !ok {
				return
			}
			select {
			case out <- m:
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()

	var once sync.Once
	stop := func() error {
		once.Do(func() {
			close(quit)
			cancel()
		})
		<-fwdDone
		<-recvDone
		return nil
	}
	return out, stop, nil
}

// hold counts a subscription to channels.
func (s *Store) hold(channels []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range dedup(channels) {
		s.subs[c]++
	}
}

// release drops a subscription to channels and returns those that no other
// subscription holds.
func (s *Store) release(channels []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var drop []string
	for _, c := range dedup(channels) {
		if s.subs[c]--; s.subs[c] <= 0 {
			delete(s.subs, c)
			drop = append(drop, c)
		}
	}
	return drop
}

func dedup(channels []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range channels {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// queue is an unbounded FIFO of messages between rueidis' reader, which
// must never block, and the consumer.
type queue struct {
	mu     sync.Mutex
	items  []core.Message
	closed bool
	notify chan struct{} // holds a token while there may be news
}

func newQueue() *queue { return &queue{notify: make(chan struct{}, 1)} }

func (q *queue) push(m core.Message) {
	q.mu.Lock()
	q.items = append(q.items, m)
	q.mu.Unlock()
	q.wake()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *queue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// pop returns the oldest message, waiting for one; false once the queue is
// closed and drained, or quit or done is closed.
func (q *queue) pop(quit, done <-chan struct{}) (core.Message, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			m := q.items[0]
			q.items[0] = core.Message{}
			q.items = q.items[1:]
			q.mu.Unlock()
			return m, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return core.Message{}, false
		}
		select {
		case <-q.notify:
		case <-quit:
			return core.Message{}, false
		case <-done:
			return core.Message{}, false
		}
	}
}
