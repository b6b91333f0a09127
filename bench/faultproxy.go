package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// storeFault is what a faultProxy does to the traffic it carries.
type storeFault int

const (
	faultNone    storeFault = iota // pass every byte at once
	faultGarbage                   // answer every command with bytes that are not RESP
	faultSlow                      // hold every reply for slowReply
)

func (f storeFault) String() string {
	switch f {
	case faultGarbage:
		return "garbage"
	case faultSlow:
		return "slow"
	}
	return "none"
}

// slowReply is how long a slow proxy holds each reply: longer than the
// bound a controller puts on each store call (a second), so that every
// call fails by its deadline, not by an error.
const slowReply = 1500 * time.Millisecond

// garbageReply is what a garbage proxy answers to whatever a client
// writes: its first byte is no RESP type, so a client fails on it at once
// rather than wait for more.
var garbageReply = []byte("?this is not RESP\r\n")

// faultProxy stands between a fleet's processes and Redis on loopback, and
// can be told to misbehave for a while (Set): a store that fails without
// crashing. Healthy, it relays both directions as they come. faultGarbage
// keeps what clients write from Redis and answers each read of it with
// garbageReply; faultSlow holds what Redis answers for slowReply before
// passing it on, in order. Back to faultNone, the replies still held are
// passed on at once and new ones are not held.
//
// Each direction of each connection holds at most proxyChunks reads of up
// to proxyChunk bytes in flight, as delayProxy does.
//
// Safe for concurrent use; Close is idempotent.
type faultProxy struct {
	relays
	fault  storeFault    // guarded by mu
	healed chan struct{} // guarded by mu: closed when the fault in force ends
}

// startFaultProxy listens on a free loopback port and relays to target
// ("127.0.0.1:PORT"), healthy until Set says otherwise.
func startFaultProxy(target string) (*faultProxy, error) {
	p := newFaultProxy(target)
	if err := p.listen(p.relay); err != nil {
		return nil, err
	}
	return p, nil
}

func newFaultProxy(target string) *faultProxy {
	return &faultProxy{relays: newRelays(target, time.Second), healed: make(chan struct{})}
}

// Set puts f in force on every connection, open or to come.
func (p *faultProxy) Set(f storeFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f == p.fault {
		return
	}
	close(p.healed) // what the fault before held goes now
	p.healed = make(chan struct{})
	p.fault = f
}

// now is the fault in force and the channel closed when it ends.
func (p *faultProxy) now() (storeFault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault, p.healed
}

// faultChunk is bytes for the client: a reply of Redis, or garbage, due at
// at unless held is closed first.
type faultChunk struct {
	b    []byte
	at   time.Time
	held <-chan struct{} // nil: not held
	eof  bool
}

// relay carries one connection, client c to Redis s, until either side
// ends, then closes both. Everything for the client goes through one
// writer, in order: Redis's replies and the proxy's garbage.
func (p *faultProxy) relay(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	if !p.track(c, s) {
		return
	}
	defer p.untrack(c, s)
	toClient := make(chan faultChunk, proxyChunks)
	stop := make(chan struct{})
	var once sync.Once
	fail := func() {
		once.Do(func() {
			close(stop)
			c.Close()
			s.Close()
		})
	}
	send := func(k faultChunk) bool {
		select {
		case toClient <- k:
			return true
		case <-stop:
			return false
		}
	}
	var wg sync.WaitGroup
	// client to Redis: passed on, or answered with garbage
	wg.Go(func() {
		defer fail()
		for {
			buf := make([]byte, proxyChunk)
			n, err := c.Read(buf)
			if n > 0 {
				if f, _ := p.now(); f == faultGarbage {
					if !send(faultChunk{b: garbageReply}) {
						return
					}
				} else if _, err := s.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	// Redis to the writer: held while slow
	wg.Go(func() {
		for {
			buf := make([]byte, proxyChunk)
			n, err := s.Read(buf)
			if n > 0 {
				k := faultChunk{b: buf[:n]}
				if f, healed := p.now(); f == faultSlow {
					k.at, k.held = time.Now().Add(slowReply), healed
				}
				if !send(k) {
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					send(faultChunk{eof: true})
				} else {
					fail()
				}
				return
			}
		}
	})
	// the writer
	wg.Go(func() {
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		for {
			var k faultChunk
			select {
			case k = <-toClient:
			case <-stop:
				return
			case <-p.done:
				fail()
				return
			}
			if d := time.Until(k.at); k.held != nil && d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-k.held:
					timer.Stop()
				case <-p.done:
					fail()
					return
				}
			}
			if k.eof {
				fail()
				return
			}
			if _, err := c.Write(k.b); err != nil {
				fail()
				return
			}
		}
	})
	wg.Wait()
}
