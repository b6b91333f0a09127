package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/internal/redistest"
	"github.com/colly-polite/polite/redisstore"
	"github.com/colly-polite/polite/testserver"
)

// A proxy's modes: pass everything, answer every read with bytes that are
// not RESP, or deliver every reply late.
const (
	pass int32 = iota
	garbage
	slow
)

// proxy is a loopback TCP proxy in front of a Redis server that can turn
// faulty without crashing: what a broken network, a half-dead server or a
// load balancer in trouble look like to a client.
type proxy struct {
	l    net.Listener
	to   string
	mode atomic.Int32
	late time.Duration
	wg   sync.WaitGroup
}

func startProxy(t *testing.T, to string, late time.Duration) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{l: l, to: to, late: late}
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

func (p *proxy) addr() string { return p.l.Addr().String() }

// up carries the client's commands to the server, or answers them with
// garbage.
func (p *proxy) up(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if p.mode.Load() == garbage {
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
func (p *proxy) down(s, c net.Conn) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if err != nil {
			return
		}
		if p.mode.Load() == slow {
			time.Sleep(p.late)
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

// A store that answers garbage, or every reply 1.5 s late, for two
// seconds: each process runs on its share meanwhile, every request ends
// with an answer (none lost, none past its deadline), and within seconds of
// the store healing both processes share it again (the fault does not
// outlive the store by the leases' life) and the fleet sends at its rate.
func TestFleetStoreFaultEnds(t *testing.T) {
	for _, mode := range []int32{garbage, slow} {
		t.Run(map[int32]string{garbage: "garbage", slow: "slow"}[mode], func(t *testing.T) {
			rs := redistest.Start(t)
			px := startProxy(t, rs.Addr(), 1500*time.Millisecond)
			site := testserver.NewTest(t, testserver.Config{Network: testserver.Loopback, Hosts: map[string]testserver.Policy{
				"a.test": {Latency: testserver.Latency{Base: 20 * time.Millisecond}},
			}})
			store := redisstore.New(redistest.NewClient(t, px.addr()), redisstore.Options{})
			var ctrls []*polite.Controller
			for i := range 2 {
				ctrl, err := polite.New(polite.Config{Robots: new(false), JitterSeed: uint64(i + 1), Store: store,
					Default: polite.Rule{Rate: 10, InitialRate: 10, MaxConcurrency: 2}})
				require.NoError(t, err)
				t.Cleanup(func() { _ = ctrl.Close() })
				ctrls = append(ctrls, ctrl)
			}
			const d = 8 * time.Second
			start := time.Now()
			var lost, ended atomic.Int64
			var wg sync.WaitGroup
			for _, ctrl := range ctrls {
				hc := &http.Client{Transport: ctrl.Transport(site.Transport()), Timeout: 5 * time.Second}
				for w := range 4 {
					wg.Go(func() {
						for n := 0; time.Since(start) < d; n++ {
							resp, err := hc.Get(fmt.Sprintf("http://a.test/page/%d", w*1000+n))
							if err != nil {
								if errors.Is(err, context.DeadlineExceeded) {
									lost.Add(1)
								}
								t.Logf("%v: %v", time.Since(start), err)
								continue
							}
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							ended.Add(1)
						}
					})
				}
			}
			// the fault from 2 s to 4 s; then, every 100 ms, whether both
			// processes share the store again
			time.Sleep(2 * time.Second)
			px.mode.Store(mode)
			var apart bool // some process saw the store fail during the fault
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				for _, ctrl := range ctrls {
					if s, ok := ctrl.Snapshot("a.test"); ok && !s.FleetShared {
						apart = true
					}
				}
			}
			px.mode.Store(pass)
			assert.True(t, apart, "the fault was seen: a process ran on its own share")
			healed, healedAt := time.Now(), site.Elapsed()
			var sharedAfter time.Duration
			for time.Since(healed) < 3500*time.Millisecond {
				both := true
				for _, ctrl := range ctrls {
					s, ok := ctrl.Snapshot("a.test")
					both = both && ok && s.FleetShared
				}
				if both {
					sharedAfter = time.Since(healed)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			wg.Wait()
			st := site.Stats("a.test")
			t.Logf("%d answers; shared again %v after the store healed; %d requests lost", ended.Load(), sharedAfter, lost.Load())
			assert.Positive(t, sharedAfter, "both processes share the store again within 3.5 s of it healing")
			assert.Zero(t, lost.Load(), "no request waits out its deadline")
			// from the heal on, the fleet keeps to its ceiling: no second
			// with more than 10 % over it (11 sends) from the heal to the
			// last send
			n, last := 0, healedAt
			var perSecond []int
			for _, at := range st.Accepted {
				if at < healedAt {
					continue
				}
				n++
				last = max(last, at)
				i := int((at - healedAt) / time.Second)
				for len(perSecond) <= i {
					perSecond = append(perSecond, 0)
				}
				perSecond[i]++
			}
			t.Logf("after healing: %d sends in %v, per second %v (the fleet's ceiling: 10/s)", n, last-healedAt, perSecond)
			assert.Positive(t, n, "the fleet sends again after the store heals")
			for i, k := range perSecond {
				assert.LessOrEqual(t, k, 11, "second %d after the heal: %d sends against a ceiling of 10/s", i, k)
			}
		})
	}
}
