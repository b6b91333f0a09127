package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// A store that answers garbage, or every reply 1.5 s late, for two
// seconds: each process runs on its share meanwhile, every request ends
// with an answer (none lost, none past its deadline), and within seconds of
// the store healing both processes share it again (the fault does not
// outlive the store by the leases' life) and the fleet sends at its rate.
func TestFleetStoreFaultEnds(t *testing.T) {
	for _, mode := range []int32{redistest.Garbage, redistest.Slow} {
		t.Run(map[int32]string{redistest.Garbage: "garbage", redistest.Slow: "slow"}[mode], func(t *testing.T) {
			rs := redistest.Start(t)
			px := redistest.StartProxy(t, rs.Addr(), 1500*time.Millisecond)
			site := testserver.NewTest(t, testserver.Config{Network: testserver.Loopback, Hosts: map[string]testserver.Policy{
				"a.test": {Latency: testserver.Latency{Base: 20 * time.Millisecond}},
			}})
			store := redisstore.New(redistest.NewClient(t, px.Addr()), redisstore.Options{})
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
			px.Set(mode)
			var apart bool // some process saw the store fail during the fault
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				for _, ctrl := range ctrls {
					if s, ok := ctrl.Snapshot("a.test"); ok && !s.FleetShared {
						apart = true
					}
				}
			}
			px.Set(redistest.Pass)
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
