package adaptive_test

import (
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/testserver"
)

func TestDebugTwo(t *testing.T) {
	if os.Getenv("DEBUG_T") == "" {
		t.Skip()
	}
	for _, both := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			hosts := map[string]testserver.Policy{
				"a.test": {Limit: fixedWindow(20), Latency: testserver.Latency{Base: 50 * time.Millisecond}},
			}
			if both {
				hosts["b.test"] = testserver.Policy{Limit: fixedWindow(1), Excess: testserver.Excess{FixedRetryAfter: 5 * time.Second}}
			}
			srv := testserver.NewTest(t, testserver.Config{Hosts: hosts})
			c, ctrl := newCollector(t, srv, adaptive.WithRobots(false))
			bases := []string{srv.HostURL("a.test")}
			if both {
				bases = append(bases, srv.HostURL("b.test"))
			}
			crawl(t, c, 40, 40*time.Second, bases...)
			st := srv.Stats("a.test")
			t.Log(both, st.PerSecond, len(st.Rejected))
			for _, s := range ctrl.Snapshots() {
				t.Logf("%+v", s)
			}
		})
	}
}
