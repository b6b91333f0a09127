package polite

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pacer's rate is the law's under the lowest ceiling in force, and it
// names the ceiling that binds (none when the law's own rate is lower): a
// configured Rate, a Crawl-delay (a strict minimum gap), a quota ceiling
// until it lapses; a fleet's share divides the rate, never a ceiling's
// choice.
func TestPacerCeilings(t *testing.T) {
	r, errs := Rule{Rate: 5, InitialRate: 20}.resolve("Default")
	require.Empty(t, errs)
	var c core
	c.init("a.test", &r, 0, 1)
	now := time.Duration(0)
	assert.Equal(t, 5.0, c.pace.rate(), "the configured rate caps the law's 20/s")
	k, v := c.binding()
	assert.Equal(t, ceilConfigured, k)
	assert.Equal(t, 5.0, v)
	assert.Equal(t, 5.0, c.law.Ceiling(), "the law is told the lowest ceiling")

	c.crawlDelays(now, 0, false, time.Second)
	k, v = c.binding()
	assert.Equal(t, ceilCrawlDelay, k)
	assert.Less(t, c.pace.rate(), 1.0, "a second's Crawl-delay, with headroom")
	assert.Equal(t, v, c.pace.rate())

	c.setQuota(now, 0.1, now+time.Minute)
	k, v = c.binding()
	assert.Equal(t, ceilQuota, k)
	assert.Equal(t, 0.1, v)
	c.pace.sync(2*time.Minute, &c) // the quota window ended
	k, _ = c.binding()
	assert.Equal(t, ceilCrawlDelay, k, "the quota ceiling lapsed")

	var low core
	lr, _ := Rule{Rate: 50, InitialRate: 2}.resolve("Default")
	low.init("b.test", &lr, 0, 1)
	k, v = low.binding()
	assert.Equal(t, ceilNone, k, "the law's 2/s is under the configured 50/s")
	assert.Zero(t, v)
	low.setShare(now, 0.5)
	assert.Equal(t, 1.0, low.pace.rate(), "a fleet's share halves the law's rate")
	assert.Equal(t, 2.0, low.fleetRate(), "the fleet's rate is the whole")
}

// A Crawl-delay ceiling that does not bind (the configured rate, or the
// law's own, a hair under it) still keeps its gap: the credit a schedule
// gives a late send (10 ms) is not allowed to bring two sends closer than
// the Crawl-delay. Before, with Crawl-delay 0.1 s and a rate of 9.3/s,
// sends went 97.5 ms apart.
func TestCrawlDelayGapUnderALowerRate(t *testing.T) {
	for i, rl := range []Rule{{Rate: 9.3, InitialRate: 9.3}, {InitialRate: 9.3}} {
		t.Run([]string{"configured rate", "law's rate"}[i], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := New(Config{Robots: new(false), Default: rl})
				require.NoError(t, err)
				req, _ := http.NewRequest(http.MethodGet, "http://a.test/", nil)
				cl := c.resolve(req)
				cl.crawlDelay = 100 * time.Millisecond // robots.txt: Crawl-delay: 0.1
				var last time.Time
				for i := range 4 {
					p, err := c.acquire(context.Background(), cl)
					require.NoError(t, err)
					if i > 0 {
						assert.GreaterOrEqual(t, time.Since(last), 100*time.Millisecond, "send %d", i)
					}
					last = time.Now()
					time.Sleep(3 * time.Millisecond) // a late timer's worth before the next ask
					p.Record(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}}, nil)
				}
			})
		})
	}
}
