package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// delayProxy puts a network round trip on the wire between the crawler and
// one of testserver's loopback hosts: a TCP proxy on 127.0.0.1 that hands
// every byte from the client to the server half the round trip after it
// read it, and every byte back half a round trip after that, in order, as
// a real network does. The server knows nothing of it: a request reaches
// the limiter half a round trip after it was sent, and a rejection takes
// the whole round trip like any answer. A new connection's first bytes
// wait one round trip more, for the handshake a real network costs.
//
// Each direction of each connection holds at most proxyChunks reads of up
// to proxyChunk bytes in flight; beyond that the proxy stops reading and
// TCP's flow control holds the sender back. An end of stream is passed on
// (a half close) once the bytes before it have been delivered.
//
// Safe for concurrent use; Close is idempotent.
type delayProxy struct {
	relays
	up, down time.Duration
	rtt      time.Duration
}

// relays is what a loopback TCP proxy of the bench keeps of its
// connections: the listener, the target each accepted connection is
// relayed to, the connections open, and the relays under way. A proxy
// embeds it and says how one connection is relayed.
type relays struct {
	ln     net.Listener
	target string
	dialer net.Dialer

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu
	done   chan struct{}         // closed by Close
	wg     sync.WaitGroup
}

func newRelays(target string, dialTimeout time.Duration) relays {
	return relays{target: target, conns: map[net.Conn]struct{}{}, done: make(chan struct{}),
		dialer: net.Dialer{Timeout: dialTimeout}}
}

// listen listens on a free loopback port and relays each connection
// accepted there to the target with relay.
func (p *relays) listen(relay func(c, s net.Conn)) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.ln = ln
	p.wg.Go(func() { p.accept(relay) })
	return nil
}

const (
	proxyChunk  = 16 << 10
	proxyChunks = 64 // 1 MiB per direction and connection
)

// startProxy listens on a free loopback port and relays to target
// ("127.0.0.1:PORT") over a round trip of rtt.
func startProxy(target string, rtt time.Duration) (*delayProxy, error) {
	p := newDelayProxy(target, rtt)
	if err := p.listen(p.relay); err != nil {
		return nil, err
	}
	return p, nil
}

func newDelayProxy(target string, rtt time.Duration) *delayProxy {
	up := rtt / 2
	return &delayProxy{relays: newRelays(target, 10*time.Second), up: up, down: rtt - up, rtt: rtt}
}

// Addr is the proxy's "127.0.0.1:PORT".
func (p *relays) Addr() string { return p.ln.Addr().String() }

func (p *relays) accept(relay func(c, s net.Conn)) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() {
			s, err := p.dialer.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			relay(c, s)
		})
	}
}

// track registers c until untrack, unless the proxy is closing.
func (p *relays) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *relays) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// relay carries one connection, client c to server s, until both
// directions have ended, then closes both.
func (p *delayProxy) relay(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	if !p.track(c, s) {
		return
	}
	defer p.untrack(c, s)
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(s, c, p.up, start.Add(p.rtt+p.up)) })
	wg.Go(func() { p.pipe(c, s, p.down, time.Time{}) })
	wg.Wait()
}

type proxyPacket struct {
	at  time.Time
	b   []byte
	eof bool // the end of the stream: pass it on
}

// pipe delivers what it reads from src to dst delay later, and nothing
// before notBefore. It returns when src has ended and everything read
// from it is delivered, or when either side fails (then both are closed).
func (p *delayProxy) pipe(dst, src net.Conn, delay time.Duration, notBefore time.Time) {
	ch := make(chan proxyPacket, proxyChunks)
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		defer close(ch)
		for {
			buf := make([]byte, proxyChunk)
			n, err := src.Read(buf)
			at := time.Now().Add(delay)
			if n > 0 {
				select {
				case ch <- proxyPacket{at: at, b: buf[:n]}:
				case <-stop:
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					select {
					case ch <- proxyPacket{at: at, eof: true}:
					case <-stop:
					}
				}
				return
			}
		}
	})
	defer reader.Wait()
	fail := func() {
		close(stop)
		src.Close()
		dst.Close()
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for pk := range ch {
		at := pk.at
		if at.Before(notBefore) {
			at = notBefore
		}
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-p.done:
				fail()
				return
			}
		}
		if pk.eof {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
			fail()
			return
		}
		if _, err := dst.Write(pk.b); err != nil {
			fail()
			return
		}
	}
	// src failed without an end of stream: so does the connection
	fail()
}

// Close stops accepting, drops every connection and waits for the relays.
func (p *relays) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
	}
	p.wg.Wait()
}
