package adaptive_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/testserver"
)

// oneHost is a server of one host, a.test, under policy p.
func oneHost(p testserver.Policy) testserver.Config {
	return testserver.Config{Hosts: map[string]testserver.Policy{"a.test": p}}
}

func fixedWindow(n int) testserver.Limit {
	return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: time.Second}
}

// assertIdle checks that no scope of ctrl holds a slot.
func assertIdle(t *testing.T, ctrl *polite.Controller) {
	t.Helper()
	for _, s := range ctrl.Report().Scopes {
		if s.InFlight != 0 || s.Waiting != 0 {
			t.Errorf("scope %s: %d in flight, %d waiting after the crawl", s.Scope, s.InFlight, s.Waiting)
		}
	}
}

// lockedWriter is a writer shared by a logger's goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
