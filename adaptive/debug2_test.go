package adaptive_test

import (
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/testserver"
)

func TestDebugRobots(t *testing.T) {
	if os.Getenv("DEBUG_R") == "" {
		t.Skip()
	}
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"c.test": {Robots: testserver.Robots{Status: 503}},
		}})
		c, ctrl := newCollector(t, srv)
		go func() {
			for i := 0; i < 20; i++ {
				time.Sleep(time.Second)
				for _, s := range ctrl.Snapshots() {
					t.Logf("%d %+v", i, s)
				}
			}
		}()
		ok, _ := crawl(t, c, 8, 20*time.Second, srv.HostURL("c.test"))
		st := srv.Stats("c.test")
		t.Log(ok, st.Accepted, st.Robots, st.ByStatus)
	})
}
