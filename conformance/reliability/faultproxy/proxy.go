package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// chunk is the largest piece the proxy reads and forwards in one go.
const chunk = 32 << 10

// dialTimeout bounds the proxy's own connection to the target.
const dialTimeout = 2 * time.Second

// Proxy forwards TCP connections from Addr to a target, with faults switched
// on and off by the test. It is safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change of the faults
	delay     time.Duration
	hole      bool
	loseReply int      // replies still to lose
	loseTo    [][]byte // requests whose replies are to be lost
	pairs     map[*pair]struct{}
	accepted  int
	lost      int
	held      int // chunks waiting in the black hole
	closed    bool

	wg sync.WaitGroup
}

// pair is one client connection and its upstream connection.
type pair struct {
	client, upstream *net.TCPConn
	once             sync.Once
	done             chan struct{}

	mu       sync.Mutex
	loseNext bool // the next reply on this pair is to be lost
}

// Start listens on a free 127.0.0.1 port and forwards every connection to
// target. The proxy is closed when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, changed: make(chan struct{}), pairs: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the address clients dial: "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many client connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open returns how many connections are open through the proxy now.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Lost returns how many replies LoseNextReply and LoseReplyTo have dropped
// (or, for LoseReplyTo, are about to drop) so far.
func (p *Proxy) Lost() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// Held returns how many chunks the black hole holds now: a test waits for
// it to know that a call is in flight.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// SetDelay makes every chunk wait d before it is forwarded, in both
// directions; 0 forwards at once.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
	p.notify()
}

// Blackhole holds all traffic, of open and of new connections, while on is
// set: nothing reaches the other side, so calls hang until their deadlines.
// Turning it off delivers what was held, in order.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole = on
	p.notify()
}

// LoseNextReply arms a one-shot fault: the next data the server sends back,
// on any connection, is dropped and that connection is reset on both sides.
// The server has by then acted on the request, so the client sees a
// failure for a command that was applied, as it would when a network dies
// just after the server answered.
func (p *Proxy) LoseNextReply() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseReply++
}

// LoseReplyTo arms a one-shot fault like LoseNextReply, aimed at one
// request: the first data a client sends that contains pattern (a
// command name, a script's SHA1) is delivered, and the server's reply to
// it is dropped and its connection reset. Replies to other requests, such
// as a driver's health checks, pass untouched.
func (p *Proxy) LoseReplyTo(pattern []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseTo = append(p.loseTo, bytes.Clone(pattern))
}

// Cut resets every open connection on both sides (RST, not FIN), as a
// network failure or a restarted middlebox would. New connections are
// accepted as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	pairs := make([]*pair, 0, len(p.pairs))
	for c := range p.pairs {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	for _, c := range pairs {
		c.reset()
	}
}

// Close stops accepting, resets every open connection and waits for the
// proxy's goroutines to end. The test's cleanup calls it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.hole = false
	p.notify()
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// notify wakes every pump waiting for a change of the faults. p.mu is held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c.(*net.TCPConn))
	}
}

// serve connects c to the target and pumps both ways until either side ends.
func (p *Proxy) serve(c *net.TCPConn) {
	defer p.wg.Done()
	p.mu.Lock()
	p.accepted++
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		// As a dead server would: the client sees its connection reset.
		c.SetLinger(0)
		c.Close()
		return
	}
	pr := &pair{client: c, upstream: up.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pr.reset()
		return
	}
	p.pairs[pr] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(pr, pr.client, pr.upstream, false) }()
	go func() { defer wg.Done(); p.pump(pr, pr.upstream, pr.client, true) }()
	wg.Wait()
	pr.reset()
	p.mu.Lock()
	delete(p.pairs, pr)
	p.mu.Unlock()
}

// pump copies from src to dst, one chunk at a time, passing each chunk
// through the faults in force. reply marks the server-to-client direction.
func (p *Proxy) pump(pr *pair, src, dst *net.TCPConn, reply bool) {
	buf := make([]byte, chunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(pr) {
				return
			}
			if reply && (pr.takeMark() || p.takeLoss()) {
				pr.reset()
				return
			}
			if !reply {
				p.markRequest(pr, buf[:n])
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				pr.reset()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// Half-close: pass the FIN on and let the other pump finish.
				dst.CloseWrite()
				return
			}
			pr.reset()
			return
		}
	}
}

// gate waits while the black hole is on and for the delay in force; it
// returns false when the pair was reset meanwhile.
func (p *Proxy) gate(pr *pair) bool {
	for {
		p.mu.Lock()
		hole, delay, changed := p.hole, p.delay, p.changed
		p.mu.Unlock()
		if !hole {
			if delay <= 0 {
				return true
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
				return true
			case <-pr.done:
				t.Stop()
				return false
			}
		}
		p.mu.Lock()
		p.held++
		p.mu.Unlock()
		select {
		case <-changed:
		case <-pr.done:
		}
		p.mu.Lock()
		p.held--
		p.mu.Unlock()
		select {
		case <-pr.done:
			return false
		default:
		}
	}
}

// takeLoss consumes one armed reply loss, if any.
func (p *Proxy) takeLoss() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loseReply == 0 {
		return false
	}
	p.loseReply--
	p.lost++
	return true
}

// markRequest arms pr to lose its next reply when chunk matches a pattern
// of LoseReplyTo, consuming the pattern.
func (p *Proxy) markRequest(pr *pair, chunk []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, pat := range p.loseTo {
		if bytes.Contains(chunk, pat) {
			p.loseTo = append(p.loseTo[:i], p.loseTo[i+1:]...)
			p.lost++
			pr.mu.Lock()
			pr.loseNext = true
			pr.mu.Unlock()
			return
		}
	}
}

// takeMark consumes pr's mark to lose its next reply, if set.
func (pr *pair) takeMark() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.loseNext {
		return false
	}
	pr.loseNext = false
	return true
}

// reset closes both connections with RST, once.
func (pr *pair) reset() {
	pr.once.Do(func() {
		close(pr.done)
		pr.client.SetLinger(0)
		pr.upstream.SetLinger(0)
		pr.client.Close()
		pr.upstream.Close()
	})
}
