package polite_test

import (
	"bytes"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/testserver"
	"github.com/stretchr/testify/assert"
)

// Nobody reads the event stream; the crawl does not stall.
func TestUnreadEventsDoNotStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// a.test throttles everything after its first request of the hour
		// (a stream of events nobody reads); b.test is open
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: time.Hour}, Excess: testserver.Excess{RetryAfter: testserver.RetryAfterZero}},
			"b.test": {Latency: testserver.Latency{Base: 10 * time.Millisecond}},
		}})
		c, ctrl := newCollector(t, srv, polite.Config{EventBuffer: 1, Robots: new(bool), BreakerThreshold: -1})
		_ = ctrl.Events() // asked for, never read
		crawl(t, c, 20, 30*time.Second, srv.HostURL("a.test"), srv.HostURL("b.test"))
		thr := srv.Stats("a.test").ByStatus[429]
		t.Logf("a: %d 429s, %d events dropped; b: %d accepted", thr, ctrl.Report().DroppedEvents, len(srv.Stats("b.test").Accepted))
		assert.Greater(t, thr, 10, "the scenario throttles a lot")
		assert.Equal(t, uint64(thr-1), ctrl.Report().DroppedEvents, "one event buffered, every other one dropped and counted")
		assert.Greater(t, len(srv.Stats("b.test").Accepted), 1000, "the crawl of b.test goes on")
		assertIdle(t, ctrl)
	})
}

var _ = bytes.NewReader
var _ = os.Getenv
