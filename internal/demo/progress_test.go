package demo

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite"
)

// Why names what holds a scope back, the strongest reason first.
func TestWhy(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	busy := polite.Snapshot{Limit: 4, InFlight: 4, Waiting: 3, Phase: "steady"}
	for _, tc := range []struct {
		name string
		s    polite.Snapshot
		want string
	}{
		{"idle", polite.Snapshot{Limit: 4, InFlight: 1}, "-"},
		{"parked", polite.Snapshot{Parked: true, PauseReason: polite.PauseRetryAfter}, "waits: parked after blocks"},
		{"paused", polite.Snapshot{PauseReason: polite.PauseRetryAfter, PausedUntil: now.Add(1500 * time.Millisecond)}, "waits: paused (retry-after), 1.5s left"},
		{"half-open", polite.Snapshot{Limit: 4, Waiting: 2, Breaker: polite.BreakerHalfOpen}, "waits: breaker half-open, one probe at a time"},
		{"limit", busy, "waits: concurrency limit"},
		{"crawl-delay", polite.Snapshot{Limit: 4, Waiting: 3, Ceiling: polite.CeilingCrawlDelay, CeilingRate: 0.99}, "waits: crawl-delay ceiling 0.99/s"},
		{"configured", polite.Snapshot{Limit: 4, Waiting: 3, Ceiling: polite.CeilingConfigured, CeilingRate: 5}, "waits: configured rate 5.00/s"},
		{"pacing", polite.Snapshot{Limit: 4, Waiting: 3, Phase: "slow-start"}, "waits: pacing (slow-start)"},
	} {
		if got := Why(tc.s, now); got != tc.want {
			t.Errorf("%s: Why = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Progress prints a line per host with the counts of its scope; Summary
// the controller's totals.
func TestProgressAndSummary(t *testing.T) {
	synctest.Test(t, testProgressAndSummary) // the pause below lasts in virtual time
}

func testProgressAndSummary(t *testing.T) {
	ctrl, err := polite.New(polite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hosts := []Host{HostOf("a", "http://a.test:80")}
	var b strings.Builder
	Progress(&b, 2*time.Second, ctrl, hosts)
	if got := b.String(); !strings.Contains(got, "a        no requests yet") {
		t.Errorf("before any request: %q", got)
	}
	req, _ := http.NewRequest("GET", "http://a.test/", nil)
	for _, code := range []int{200, 429} {
		p, err := ctrl.Acquire(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		p.Record(&http.Response{StatusCode: code, Header: http.Header{}}, nil)
	}
	b.Reset()
	Progress(&b, 2*time.Second, ctrl, hosts)
	if got := b.String(); !strings.Contains(got, "accepted      1  429s    1  waits: paused (backoff)") {
		t.Errorf("after a 200 and a 429: %q", got)
	}
	b.Reset()
	Summary(&b, ctrl, hosts)
	if got := b.String(); !strings.Contains(got, "a        2 requests (429: 1, 503: 0, 403: 0), 0 retries") {
		t.Errorf("summary: %q", got)
	}
}
