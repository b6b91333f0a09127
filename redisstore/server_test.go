package redisstore_test

import (
	"sync"

	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redis/go-redis/v9"
)

// server is a real redis-server on a free loopback port, started by a test
// and stopped when it ends. Tests that need one skip, with one line saying
// how to enable them, when redis-server is not on PATH; CI installs it.
type server struct {
	t    testing.TB
	bin  string
	port int
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu
}

func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("REDISSTORE_REQUIRED") != "" {
			t.Fatal("redisstore: redis-server is not on PATH and REDISSTORE_REQUIRED is set")
		}
		t.Skip("redisstore: redis-server is not on PATH; install it (Debian: apt-get install redis-server) to run these tests")
	}
	s := &server{t: t, bin: bin, port: freePort(t), args: args}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the server (again, on the same port: an empty one, as after a
// restart) and waits until it answers. It may be called from any goroutine.
func (s *server) start() {
	if err := s.run(); err != nil {
		s.t.Error(err)
	}
}

func (s *server) run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--loglevel", "warning"}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
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
			return fmt.Errorf("redis-server on %s did not answer: %w", s.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server (a crash: nothing saved).
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *server) client(t testing.TB) *redis.Client {
	t.Helper()
	return newClient(t, s.addr())
}

// newClient is a client set as the package recommends (every call bounded
// by its context, no retries, one dial per connection), with short dial and
// I/O timeouts.
func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1, DialerRetries: 1,
		Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// do runs a command on the server; its error is returned (it may be
// called from any goroutine).
func (s *server) do(args ...any) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), ReadTimeout: 10 * time.Second})
	defer c.Close()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		return fmt.Errorf("%v: %w", args, err)
	}
	return nil
}

// fakeServer is a loopback server that answers anything with answer: not
// Redis.
func fakeServer(t testing.TB, answer string) *redis.Client {
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
	return newClient(t, l.Addr().String())
}
