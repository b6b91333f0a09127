package testserver

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a running origin with one or more virtual hosts, each with its
// own hidden limit. Create it with New or NewTest; the zero value is not
// usable. All methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the first host in sorted order, without a
	// trailing slash, as HostURL returns it.
	URL string

	start   time.Time
	seed    int64
	client  string // Config.ClientHeader
	network Network
	names   []string
	hosts   map[string]*host
	addrs   map[string]string // Loopback: host name → "127.0.0.1:port"
	mem     *memListener      // Memory only
	servers []*http.Server
	tr      *http.Transport
	dialer  net.Dialer
	trMu    sync.Mutex
	trs     []*http.Transport // Transport's copies; guarded by trMu

	closeOnce sync.Once
	closeMu   sync.RWMutex // guards closed against handlers.Add
	closed    bool
	done      chan struct{} // closed by Close: wakes sleeping handlers
	handlers  sync.WaitGroup
	serving   sync.WaitGroup
}

// New validates cfg and starts a Server. With the default network it
// listens on loopback sockets; see Network. An invalid cfg yields an error
// wrapping ErrConfig.
//
// Time zero for the server (Stats, schedules, fixed windows) is the call to
// New. Inside a testing/synctest bubble, create the Server inside the bubble,
// use the Memory network and Close it before the bubble ends (NewTest does
// all three).
func New(cfg Config) (*Server, error) {
	names, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	network := cfg.Network
	if network == DefaultNetwork {
		network = Loopback
	}
	s := &Server{
		start:   time.Now(),
		seed:    cfg.Seed,
		client:  cfg.ClientHeader,
		network: network,
		names:   names,
		hosts:   make(map[string]*host, len(names)),
		done:    make(chan struct{}),
	}
	for _, name := range names {
		s.hosts[name] = newHost(s, name, cfg.Hosts[name])
	}
	dial := s.dialMemory
	if network == Memory {
		s.mem = newMemListener()
		s.serve(s.mem, http.HandlerFunc(s.route))
	} else {
		dial = s.dialLoopback
		s.addrs = make(map[string]string, len(names))
		for _, name := range names {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("testserver: listen for %q: %w", name, err)
			}
			s.addrs[name] = ln.Addr().String()
			s.serve(ln, s.hosts[name])
		}
	}
	s.tr = &http.Transport{
		Proxy:               nil, // never a proxy from the environment
		DialContext:         dial,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	s.URL = s.HostURL(names[0])
	return s, nil
}

// NewTest is New for tests: it uses the Memory network unless cfg.Network
// says otherwise, fails tb at once on an invalid cfg, and closes the server
// when tb's test ends (tb.Cleanup). Inside a testing/synctest bubble, pass
// the bubble's *testing.T: its cleanups run inside the bubble.
func NewTest(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	if cfg.Network == DefaultNetwork {
		cfg.Network = Memory
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
		return nil
	}
	tb.Cleanup(s.Close)
	return s
}

func (s *Server) serve(ln net.Listener, h http.Handler) {
	srv := &http.Server{
		Handler:  h,
		ErrorLog: log.New(io.Discard, "", 0),
	}
	s.servers = append(s.servers, srv)
	s.serving.Go(func() { srv.Serve(ln) })
}

// route finds the virtual host of a request on the Memory network by its
// Host header (port and trailing dot stripped, case folded). A name that is
// not configured gets 421 Misdirected Request.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if h := s.hosts[hostOf(r.Host)]; h != nil {
		h.ServeHTTP(w, r)
		return
	}
	http.Error(w, "testserver: unknown host "+r.Host, http.StatusMisdirectedRequest)
}

// hostOf normalises "Name:port" to "name".
func hostOf(hostport string) string {
	name := hostport
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.Contains(name[i:], "]") {
		name = name[:i]
	}
	name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"), ".")
	return strings.ToLower(name)
}

func (s *Server) dialMemory(ctx context.Context, network, addr string) (net.Conn, error) {
	name := hostOf(addr)
	if _, ok := s.hosts[name]; !ok {
		return nil, &net.OpError{Op: "dial", Net: network,
			Err: &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}}
	}
	return s.mem.dial(ctx)
}

func (s *Server) dialLoopback(ctx context.Context, network, addr string) (net.Conn, error) {
	if a, ok := s.addrs[hostOf(addr)]; ok {
		addr = a
	}
	return s.dialer.DialContext(ctx, network, addr)
}

// HostURL returns the base URL of a virtual host, without a trailing slash,
// or "" if the host is not configured. On the Memory network it is
// "http://a.test"; on Loopback, "http://127.0.0.1:PORT" (one listener per
// host). Either way Client reaches it; on Loopback, Client also maps
// "http://a.test" to the host's listener.
func (s *Server) HostURL(host string) string {
	if _, ok := s.hosts[host]; !ok {
		return ""
	}
	if s.network == Memory {
		return "http://" + host
	}
	return "http://" + s.addrs[host]
}

// Hosts returns the host names in sorted order.
func (s *Server) Hosts() []string {
	return append([]string(nil), s.names...)
}

// Client returns a new *http.Client that uses Transport, with no Timeout.
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: s.tr}
}

// Transport returns a transport that reaches the server's hosts: in
// memory over pipes, or over loopback sockets. Each call returns one of
// its own, with its own connections: Colly's setters change the transport
// they are given (SetProxyFunc sets its Proxy), and one shared by two
// collectors would change for both. Close closes the idle connections of
// every one. Use it with Colly as c.WithTransport(srv.Transport()).
func (s *Server) Transport() *http.Transport {
	t := s.tr.Clone()
	s.trMu.Lock()
	s.trs = append(s.trs, t)
	s.trMu.Unlock()
	return t
}

// Stats returns a copy of what host has seen so far (the zero Stats for a
// host that is not configured).
func (s *Server) Stats(host string) Stats {
	h := s.hosts[host]
	if h == nil {
		return Stats{}
	}
	return h.stats(time.Since(s.start))
}

// Elapsed returns the time since the server started: the clock of Stats,
// schedules and fixed windows.
func (s *Server) Elapsed() time.Duration { return time.Since(s.start) }

// Close stops the server: it closes the listeners and connections, wakes
// handlers waiting (for latency, for the network's round trip, or queued
// for a worker), waits for every handler to return and closes the idle
// connections of Transport. It is idempotent and does not
// hang with requests in flight (they fail on the client side).
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		s.closeMu.Unlock()
		// Connections first, so that a handler woken below cannot answer.
		for _, srv := range s.servers {
			srv.Close()
		}
		close(s.done)
		s.serving.Wait()
		s.handlers.Wait()
		if s.tr != nil {
			s.tr.CloseIdleConnections()
		}
		s.trMu.Lock()
		for _, t := range s.trs {
			t.CloseIdleConnections()
		}
		s.trMu.Unlock()
	})
}

// enter registers a handler, unless the server is closing.
func (s *Server) enter() bool {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

func (s *Server) leave() { s.handlers.Done() }

// transit waits d, the time a request spends on the network, and reports
// false if the server closed first. A client that gives up does not cut
// it short: a request on the wire arrives all the same.
func (s *Server) transit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// deliver waits d, the time an answer to r spends on the network, before
// its headers are written. If the server closes or the client goes away
// first, it drops the connection.
func (s *Server) deliver(r *http.Request, d time.Duration) {
	if d > 0 && !s.sleep(r, d) {
		abort()
	}
}

// sleep waits d for r, and reports false if the server closed or the
// client went away first.
func (s *Server) sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	case <-r.Context().Done():
		return false
	}
}
