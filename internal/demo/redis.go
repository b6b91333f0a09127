package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// ErrNoRedis is returned by Redis when REDIS_URL is not set and
// redis-server is not on PATH.
var ErrNoRedis = errors.New("demo: redis-server is not on PATH and REDIS_URL is not set; install it (Debian: apt-get install redis-server) or set REDIS_URL")

// RedisServer is a redis-server process of this program's own, on a free
// loopback port, with nothing saved to disk. Kill and Start crash it and
// bring it back (empty) on the same port, as an outage would. Its methods
// are safe for concurrent use; Close is idempotent.
type RedisServer struct {
	bin  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu: nil while down
}

// Redis returns the URL of a Redis for a program that needs one: REDIS_URL
// if set (the server is then nil: someone else's, not to be killed), or a
// redis-server started on a free loopback port (close it when done). It
// returns an error wrapping ErrNoRedis when there is neither.
func Redis() (url string, srv *RedisServer, err error) {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u, nil, nil
	}
	srv, err = StartRedis()
	if err != nil {
		return "", nil, err
	}
	return srv.URL(), srv, nil
}

// RedisOptional reports whether a program that found no Redis may skip
// rather than fail: in a smoke run (short), unless REDISSTORE_REQUIRED is
// set (CI installs redis-server and sets it).
func RedisOptional(short bool) bool {
	return short && os.Getenv("REDISSTORE_REQUIRED") == ""
}

// StartRedis starts a redis-server on a free loopback port and waits until
// it answers. It returns an error wrapping ErrNoRedis when redis-server is
// not on PATH.
func StartRedis() (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: a port for redis-server: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &RedisServer{bin: bin, port: port}
	if err := r.Start(); err != nil {
		return nil, err
	}
	return r, nil
}

// Addr is "127.0.0.1:PORT".
func (r *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL is "redis://127.0.0.1:PORT".
func (r *RedisServer) URL() string { return "redis://" + r.Addr() }

// Pid is the process id of the server running, 0 while it is down.
func (r *RedisServer) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// redisStartWait bounds Start's wait for the server to answer.
const redisStartWait = 5 * time.Second

// Start runs the server (again, on the same port, empty) unless it runs,
// and waits until it answers PING.
func (r *RedisServer) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning")
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("demo: start redis-server: %w", err)
	}
	deadline := time.Now().Add(redisStartWait)
	for {
		err := ping(r.Addr())
		if err == nil {
			r.cmd = cmd
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("demo: redis-server on %s did not answer within %v: %w", r.Addr(), redisStartWait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill crashes the server (SIGKILL: nothing saved) and waits for it to
// end. A server down already is left as it is.
func (r *RedisServer) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Close kills the server; it may be called more than once.
func (r *RedisServer) Close() { r.Kill() }

// ping sends PING to a Redis at addr and reads its answer, a second at
// most.
func ping(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("demo: PING answered %q", line)
	}
	return nil
}

// ParentGone returns a context that ends with ctx, or when standard input
// reaches its end: a child process started with a pipe on its standard
// input (exec.Cmd.StdinPipe) learns so that its parent closed the pipe or
// died, and stops rather than run on as an orphan.
func ParentGone(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		// the read ends with the pipe; the goroutine ends with the process
		var b [512]byte
		for {
			if _, err := os.Stdin.Read(b[:]); err != nil {
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}
