package frontier_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/testserver"
)

// robotsCount counts the robots.txt requests in flight, and the most.
type robotsCount struct {
	next      http.RoundTripper
	mu        sync.Mutex
	now, most int
	robots    int
}

func (r *robotsCount) RoundTrip(req *http.Request) (*http.Response, error) {
	isRobots := req.URL.Path == "/robots.txt"
	r.mu.Lock()
	if isRobots {
		r.now++
		r.robots++
		r.most = max(r.most, r.now)
	}
	r.mu.Unlock()
	resp, err := r.next.RoundTrip(req)
	if isRobots {
		r.mu.Lock()
		r.now--
		r.mu.Unlock()
	}
	return resp, err
}

// 40 new hosts, 2 pages each, 4 threads:
// read ahead (at most 6 at once, holding no thread), each host's robots.txt
// is fetched once and the crawl takes about what it takes with robots.txt
// off; with RobotsAhead off, each host's first request reads it on a
// thread, and the crawl takes far longer.
func TestFrontierRobotsAhead(t *testing.T) {
	run := func(robots bool, ahead int) (time.Duration, *robotsCount, map[string]testserver.Stats) {
		var took time.Duration
		var rc *robotsCount
		stats := map[string]testserver.Stats{}
		synctest.Test(t, func(t *testing.T) {
			hosts := map[string]testserver.Policy{}
			for i := range 40 {
				hosts[fmt.Sprintf("h%d.test", i)] = testserver.Policy{Latency: testserver.Latency{Base: 100 * time.Millisecond}}
			}
			srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
			rc = &robotsCount{next: srv.Transport()}
			c := colly.NewCollector(colly.Async())
			c.WithTransport(rc)
			ctrl := adaptive.Attach(c, polite.Config{Robots: new(robots), JitterSeed: 1, Default: polite.Rule{Rate: 20, InitialRate: 20}})
			q, err := frontier.New(ctrl, frontier.Config{Threads: 4, RobotsAhead: ahead})
			require.NoError(t, err)
			for p := range 2 {
				for h := range 40 {
					require.NoError(t, q.AddURL(fmt.Sprintf("%s/page/%d", srv.HostURL(fmt.Sprintf("h%d.test", h)), p)))
				}
			}
			start := time.Now()
			require.NoError(t, q.Run(c))
			took = time.Since(start)
			assert.Equal(t, 80, q.Progress().Done)
			for h := range hosts {
				stats[h] = srv.Stats(h)
			}
		})
		return took, rc, stats
	}
	off, _, _ := run(false, 0)
	ahead, rc, stats := run(true, 6)
	onThread, rcThread, _ := run(true, -1)
	t.Logf("robots.txt off %.2f s; read ahead %.2f s (%d at most at once); on a thread %.2f s", off.Seconds(), ahead.Seconds(), rc.most, onThread.Seconds())
	for h, st := range stats {
		assert.Equal(t, 1, st.Robots, h)
		assert.Equal(t, 2, len(st.Accepted), h)
	}
	assert.Equal(t, 40, rc.robots)
	assert.LessOrEqual(t, rc.most, 6, "the bound")
	assert.Greater(t, rc.most, 1, "read side by side")
	assert.LessOrEqual(t, ahead, off*110/100, "robots.txt read ahead adds at most 10 %")
	assert.Greater(t, onThread, ahead*11/10, "on a thread, it costs")
	assert.Equal(t, 40, rcThread.robots)
}
