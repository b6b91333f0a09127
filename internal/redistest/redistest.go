// Package redistest runs a real redis-server for tests: on a free loopback
// port, started by the test and killed when it ends. A test that needs one
// skips, with one line saying how to enable it, when redis-server is not
// on PATH, unless REDISSTORE_REQUIRED is set (CI sets it): then it fails.
package redistest

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// Server is a real redis-server on a free loopback port, started by a test
// and stopped when it ends.
type Server struct {
	t    testing.TB
	bin  string
	port int
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu
}

// Start runs a redis-server with args added to its command line (no
// persistence: a restart is an empty server).
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("REDISSTORE_REQUIRED") != "" {
			t.Fatal("redisstore: redis-server is not on PATH and REDISSTORE_REQUIRED is set")
		}
		t.Skip("redisstore: redis-server is not on PATH; install it (Debian: apt-get install redis-server) to run these tests")
	}
	s := &Server{t: t, bin: bin, port: FreePort(t), args: args}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// FreePort is a loopback port free now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is the server's address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Restart runs the server again, on the same port (an empty one, as after
// a restart), and waits until it answers. It may be called from any
// goroutine.
func (s *Server) Restart() {
	if err := s.run(); err != nil {
		s.t.Error(err)
	}
}

func (s *Server) run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--loglevel", "warning"}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer: %w", s.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (a crash: nothing saved).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Client is a client of the server (NewClient).
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	return NewClient(t, s.Addr())
}

// NewClient is a client set as redisstore recommends (every call bounded
// by its context, no retries, one dial per connection), with short dial and
// I/O timeouts.
func NewClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1, DialerRetries: 1,
		Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Do runs a command on the server; its error is returned (it may be
// called from any goroutine).
func (s *Server) Do(args ...any) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: 10 * time.Second})
	defer c.Close()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		return fmt.Errorf("%v: %w", args, err)
	}
	return nil
}

// FakeServer is a loopback server that answers anything with answer: not
// Redis. It returns a client of it.
func FakeServer(t testing.TB, answer string) *redis.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for first := true; ; first = false {
					_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
					if _, err := conn.Read(buf); err != nil {
						return
					}
					a := answer
					if first {
						a = "-ERR unknown command 'HELLO'\r\n" // go-redis falls back to RESP2
					}
					if _, err := conn.Write([]byte(a)); err != nil {
						return
					}
				}
			})
		}
	})
	return NewClient(t, l.Addr().String())
}

// Values decodes fuzz bytes into a script reply as go-redis hands it over:
// int64s, strings, nils and nested lists (three deep at most).
func Values(b []byte) []any {
	v, _ := values(b, 0)
	return v
}

func values(b []byte, depth int) ([]any, []byte) {
	var out []any
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		switch tag % 5 {
		case 0:
			var n int64
			if len(b) >= 8 {
				n, b = int64(binary.LittleEndian.Uint64(b)), b[8:]
			}
			out = append(out, n)
		case 1:
			n := min(int(tag>>3), len(b))
			out, b = append(out, string(b[:n])), b[n:]
		case 2:
			out = append(out, nil)
		case 3:
			if depth < 3 {
				var sub []any
				sub, b = values(b, depth+1)
				out = append(out, sub)
			}
		case 4:
			return out, b
		}
	}
	return out, b
}

// A Proxy's modes: pass everything, answer every read with bytes that are
// not RESP, or deliver every reply late.
const (
	Pass int32 = iota
	Garbage
	Slow
)

// Proxy is a loopback TCP proxy in front of a Redis server that can turn
// faulty without crashing: what a broken network, a half-dead server or a
// load balancer in trouble look like to a client.
type Proxy struct {
	l    net.Listener
	to   string
	mode atomic.Int32
	late time.Duration
	wg   sync.WaitGroup
}

// StartProxy runs a Proxy to the server at to, passing everything; late is
// how late a reply comes in the Slow mode. It stops when the test ends.
func StartProxy(t testing.TB, to string, late time.Duration) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{l: l, to: to, late: late}
	var conns sync.Map
	t.Cleanup(func() {
		l.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			conns.Store(c, nil)
			conns.Store(s, nil)
			p.wg.Go(func() { p.up(c, s) })
			p.wg.Go(func() { p.down(s, c) })
		}
	})
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Set puts the proxy in mode (Pass, Garbage, Slow).
func (p *Proxy) Set(mode int32) { p.mode.Store(mode) }

// up carries the client's commands to the server, or answers them with
// garbage.
func (p *Proxy) up(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if p.mode.Load() == Garbage {
			if _, err := c.Write([]byte("%%not resp%%\r\n")); err != nil {
				return
			}
			continue
		}
		if _, err := s.Write(buf[:n]); err != nil {
			return
		}
	}
}

// down carries the server's replies to the client, late when slow.
func (p *Proxy) down(s, c net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if err != nil {
			return
		}
		if p.mode.Load() == Slow {
			time.Sleep(p.late)
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}
