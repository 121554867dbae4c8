package core

import "context"

// Call is one script invocation: EVALSHA SHA when Source is empty, otherwise
// EVAL Source. Keys and Args stay apart so that cluster drivers can route by
// the keys; every key of one call shares one hash slot.
type Call struct {
	SHA    string
	Source string
	Keys   []string
	Args   []string
}

// Result is the outcome of one Call: a normalised reply, or an error.
type Result struct {
	Value Value
	Err   error
}

// Store is the one interface an adapter implements. Eval sends the calls in
// order, in one round trip where the driver can pipeline them, and returns one
// Result per call. A server reply of NOSCRIPT must come back as an error that
// matches ErrNoScript, a nil reply as a Value of kind ValueNil, and a failure
// to reach the server as an error that matches ErrUnavailable; ClassifyError
// does that mapping for any driver. The EVALSHA→EVAL fallback is the core's
// job, not the adapter's.
//
// The calls and their slices are lent for the length of Eval: the engine
// reuses them once it returns, so a Store that keeps a call (a recorder)
// copies it.
//
// An error reply nested inside an array fails the whole call (Value has no
// error kind). A driver that resends a call after a network error may run a
// script twice: every script is written so that a repeat changes nothing
// more (a repeated login, with the same token, kicks nobody again).
type Store interface {
	Eval(ctx context.Context, calls []Call) []Result
}

// CachedReader is an optional capability of a Store: reading string keys
// through a client-side cache that the server invalidates when the key
// changes. The engine reads hot scope counts through it when present. A
// missing key reads as a Value of kind ValueNil.
//
// FenceCache returns once CachedGet can no longer serve a value that a
// write made by an Eval call of this Store, returned before FenceCache was
// called, to a key in the Redis Cluster slot of one of keys has replaced.
// An invalidation travels apart from the reply of the write that caused it
// and may arrive after it; the engine fences at the end of a scope sweep,
// so that a count read after SweepScopes returns sees what the sweep wrote.
type CachedReader interface {
	CachedGet(ctx context.Context, key string) (Value, error)
	FenceCache(ctx context.Context, keys []string) error
}

// Publisher is an optional capability of a Store: publishing a message on a
// channel. The engine's own messages go out from the script that
// acknowledges them (docs/design.md §7); it publishes through a Publisher
// only a message that no outbox holds, and a Subscriber's tests use it.
type Publisher interface {
	Publish(ctx context.Context, channel string, message []byte) error
}

// BatchPublisher is an optional capability of a Publisher: publishing
// several messages in one round trip (per node, in a cluster), each on its
// channel, the messages of one channel in order. The engine publishes the
// messages no outbox holds through it, and one at a time through Publish
// without it. An error means some messages may not have
// gone out; the engine leaves them all to the outbox, which delivers them
// again (readers drop repeats by ID). A type that embeds a Store and wraps
// its Publish must wrap PublishBatch too, or the engine bypasses the
// wrapper.
type BatchPublisher interface {
	PublishBatch(ctx context.Context, msgs []Message) error
}

// Subscriber is an optional capability of a Store: receiving messages
// published on channels until ctx ends or the returned stop is called.
// Subscribe returns once the server confirmed every channel; messages of
// one channel arrive in the order they were published. When the connection
// is lost the adapter either resubscribes or closes the channel (the
// adapters' docs say which); Feed.Next reports a closed channel as
// ErrUnavailable.
type Subscriber interface {
	Subscribe(ctx context.Context, channels ...string) (<-chan Message, func() error, error)
}

// Message is one message received by a Subscriber.
type Message struct {
	Channel string
	Payload []byte
}
