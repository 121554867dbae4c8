package batcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/presencekit/presence/core"
)

// Beater is what a Batcher needs of an engine; *core.Engine, *core.Model
// and the WebAssembly host's engine have it.
type Beater interface {
	HeartbeatBatch(ctx context.Context, beats []core.Heartbeat) ([]core.Ack, error)
}

// Config configures a Batcher. Zero values mean the defaults.
type Config struct {
	// MaxBatch is the most beats one batch call carries. Default and
	// maximum core.MaxBatch.
	MaxBatch int
	// Inflight is how many batch calls may be on the wire at once. Default
	// 2: one fills while the other is out.
	Inflight int
	// Linger is how long a batch waits for more beats after its first one
	// when the sender is free. Default 0: it leaves at once, and beats that
	// arrive while it is out make the next batch.
	Linger time.Duration
	// Timeout bounds each batch call. Default 5 s.
	Timeout time.Duration
}

// ErrClosed is returned by Heartbeat after Close.
var ErrClosed = errors.New("batcher: closed")

// Batcher sends the heartbeats given to it from many goroutines in batch
// calls. It is safe for concurrent use.
type Batcher struct {
	beater Beater
	cfg    Config
	queue  chan *pending
	free   sync.Pool
	wg     sync.WaitGroup

	mu     sync.RWMutex // held for reading while enqueueing, for writing to close
	closed bool
}

// pending is one caller's beat and where its outcome goes.
type pending struct {
	hb   core.Heartbeat
	done chan outcome
}

type outcome struct {
	ack core.Ack
	err error
}

// New returns a Batcher over b and starts its senders; Close stops them.
func New(b Beater, cfg Config) (*Batcher, error) {
	if b == nil {
		return nil, &core.InputError{Field: "Beater", Reason: "is nil"}
	}
	if err := fill(&cfg); err != nil {
		return nil, err
	}
	bt := &Batcher{beater: b, cfg: cfg, queue: make(chan *pending, cfg.MaxBatch*cfg.Inflight)}
	bt.free.New = func() any { return &pending{done: make(chan outcome, 1)} }
	bt.wg.Add(cfg.Inflight)
	for range cfg.Inflight {
		go bt.send()
	}
	return bt, nil
}

func fill(cfg *Config) error {
	switch {
	case cfg.MaxBatch < 0 || cfg.MaxBatch > core.MaxBatch:
		return &core.InputError{Field: "Config.MaxBatch", Reason: fmt.Sprintf("%d is outside 0..%d", cfg.MaxBatch, core.MaxBatch)}
	case cfg.Inflight < 0 || cfg.Inflight > 64:
		return &core.InputError{Field: "Config.Inflight", Reason: fmt.Sprintf("%d is outside 0..64", cfg.Inflight)}
	case cfg.Linger < 0:
		return &core.InputError{Field: "Config.Linger", Reason: "is negative"}
	case cfg.Timeout < 0:
		return &core.InputError{Field: "Config.Timeout", Reason: "is negative"}
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = core.MaxBatch
	}
	if cfg.Inflight == 0 {
		cfg.Inflight = 2
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return nil
}

// Heartbeat records hb in the next batch and returns its outcome, as
// core.Engine.Heartbeat does: the Ack, and its refusal as the error. If ctx
// ends first it returns ctx's error; the beat may still be recorded, as a
// request whose reply was lost may be.
func (b *Batcher) Heartbeat(ctx context.Context, hb core.Heartbeat) (core.Ack, error) {
	p := b.free.Get().(*pending)
	p.hb = hb
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		b.free.Put(p)
		return core.Ack{}, ErrClosed
	}
	select {
	case b.queue <- p:
		b.mu.RUnlock()
	case <-ctx.Done():
		b.mu.RUnlock()
		b.free.Put(p)
		return core.Ack{}, ctx.Err()
	}
	select {
	case o := <-p.done:
		p.hb = core.Heartbeat{}
		b.free.Put(p)
		return o.ack, o.err
	case <-ctx.Done():
		// p is abandoned to its sender, whose reply lands in p.done's buffer
		return core.Ack{}, ctx.Err()
	}
}

// Close sends the beats already given, waits for every batch call to end,
// and makes later Heartbeat calls return ErrClosed.
func (b *Batcher) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.queue)
	}
	b.mu.Unlock()
	b.wg.Wait()
	return nil
}

// send is one sender: it takes the first waiting beat, as many more as are
// waiting (or arrive within Linger), and sends them as one batch.
func (b *Batcher) send() {
	defer b.wg.Done()
	batch := make([]*pending, 0, b.cfg.MaxBatch)
	beats := make([]core.Heartbeat, 0, b.cfg.MaxBatch)
	var linger *time.Timer
	for {
		p, ok := <-b.queue
		if !ok {
			return
		}
		batch = append(batch[:0], p)
		if b.cfg.Linger > 0 {
			if linger == nil {
				linger = time.NewTimer(b.cfg.Linger)
			} else {
				linger.Reset(b.cfg.Linger)
			}
			batch = b.gather(batch, linger.C)
			linger.Stop()
		} else {
			batch = b.gather(batch, nil)
		}
		beats = beats[:0]
		for _, p := range batch {
			beats = append(beats, p.hb)
		}
		b.flush(batch, beats)
	}
}

// gather adds waiting beats to batch until it is full, and then, until
// linger fires (never when nil), beats as they arrive.
func (b *Batcher) gather(batch []*pending, linger <-chan time.Time) []*pending {
	for len(batch) < b.cfg.MaxBatch {
		select {
		case p, ok := <-b.queue:
			if !ok {
				return batch
			}
			batch = append(batch, p)
			continue
		default:
		}
		if linger == nil {
			return batch
		}
		select {
		case p, ok := <-b.queue:
			if !ok {
				return batch
			}
			batch = append(batch, p)
		case <-linger:
			return batch
		}
	}
	return batch
}

func (b *Batcher) flush(batch []*pending, beats []core.Heartbeat) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	acks, err := b.beater.HeartbeatBatch(ctx, beats)
	cancel()
	if err == nil && len(acks) != len(beats) {
		err = fmt.Errorf("batcher: %d acks for %d beats", len(acks), len(beats))
	}
	for i, p := range batch {
		if err != nil {
			p.done <- outcome{err: err}
		} else {
			p.done <- outcome{ack: acks[i], err: acks[i].Err}
		}
	}
}
