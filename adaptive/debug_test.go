package adaptive_test

import (
	"log/slog"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/testserver"
)

func TestDebugS1(t *testing.T) {
	if os.Getenv("DEBUG_S1") == "" {
		t.Skip()
	}
	synctest.Test(t, func(t *testing.T) {
		pol := testserver.Policy{
			Limit:   fixedWindow(30),
			Latency: testserver.Latency{Base: 350 * time.Millisecond},
		}
		switch os.Getenv("DEBUG_S1") {
		case "s2":
			pol = testserver.Policy{Limit: testserver.Limit{Kind: testserver.TokenBucket, Rate: 5, Burst: 2}, Latency: testserver.Latency{Base: 10 * time.Millisecond}}
		case "a20":
			pol = testserver.Policy{Limit: fixedWindow(20), Latency: testserver.Latency{Base: 50 * time.Millisecond}}
		case "b":
			pol = testserver.Policy{Limit: fixedWindow(20)}
		case "drop":
			pol = testserver.Policy{Limit: fixedWindow(40), Schedule: []testserver.Step{{At: 30 * time.Second, Limit: fixedWindow(10)}}, Latency: testserver.Latency{Base: 50 * time.Millisecond}}
		case "cap":
			pol = testserver.Policy{Limit: testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 8}, Latency: testserver.Latency{Base: 100 * time.Millisecond}}
		}
		srv := testserver.NewTest(t, oneHost(pol))
		c, ctrl := newCollector(t, srv, adaptive.WithRobots(false), adaptive.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
		start := time.Now()
		go func() {
			for time.Since(start) < 40*time.Second {
				time.Sleep(time.Second)
				for _, s := range ctrl.Snapshots() {
					t.Logf("t=%v limit=%.1f inflight=%d wait=%d rate=%.2f est=%.2f", time.Since(start), s.Limit, s.InFlight, s.Waiting, s.Rate, s.Estimate)
				}
			}
		}()
		crawl(t, c, 40, 40*time.Second, srv.HostURL("a.test"))
		t.Log(srv.Stats("a.test").PerSecond)
	})
}
