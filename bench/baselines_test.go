package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/colly-polite/polite/testserver"
)

// get sends one GET through rt and reads the body to its end.
func get(t *testing.T, rt http.RoundTripper, u string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// The textbook limiter halves on every 429, even those of one burst, and its
// breaker stops everything for 15 s after six 429s in a row.
func TestTextbookAIMD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			// one request per hour: everything after the first is a 429
			"a.test": {Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 1, Window: time.Hour},
				Latency: testserver.Latency{Base: 10 * time.Millisecond},
				Excess:  testserver.Excess{FixedRetryAfter: 2 * time.Second}},
		}})
		rt := newTextbookAIMD(srv.Transport(), 1)
		if got := get(t, rt, srv.URL+"/page/1"); got != 200 {
			t.Fatalf("first request: %d", got)
		}
		if h := rt.hosts["a.test"]; h.limit != aimdStart+1 {
			t.Errorf("limit after a success = %d, want %d", h.limit, aimdStart+1)
		}
		if got := get(t, rt, srv.URL+"/page/2"); got != 429 {
			t.Fatalf("second request: %d, want 429 after the retries", got)
		}
		st := srv.Stats("a.test")
		if n := len(st.Rejected); n != 1+aimdMaxRetries {
			t.Errorf("%d rejections, want %d (one request and its retries)", n, 1+aimdMaxRetries)
		}
		// 9 → 4 → 2 → 1 → 1
		if h := rt.hosts["a.test"]; h.limit != 1 || h.row != 4 {
			t.Errorf("limit %d, row %d; want 1, 4", h.limit, h.row)
		}
		// two more 429s open the breaker: nothing is sent for 15 s
		start := time.Now()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { get(t, rt, srv.URL+"/page/3") })
		}
		wg.Wait()
		st = srv.Stats("a.test")
		rej := st.Rejected
		sixth := rej[1+aimdMaxRetries+1]
		for _, r := range rej[1+aimdMaxRetries+2:] {
			if r-sixth < aimdBreakFor {
				t.Errorf("a request %v after the breaker opened", r-sixth)
			}
		}
		if time.Since(start) < aimdBreakFor {
			t.Errorf("the retries ended after %v, before the breaker closed", time.Since(start))
		}
		// full jitter: retries come back before the 2 s Retry-After ends
		if st.PauseViolations == 0 {
			t.Error("no pause violations: full jitter should retry before Retry-After ends")
		}
	})
}

func TestAutoThrottleAdjust(t *testing.T) {
	ms := time.Millisecond
	at := newAutoThrottle(nil, 1, 1)
	at8 := newAutoThrottle(nil, 8, 1)
	tests := []struct {
		at             *autoThrottle
		delay, latency time.Duration
		status         int
		want           time.Duration
		name           string
	}{
		{at, 5000 * ms, 100 * ms, 200, 2550 * ms, "the mean of the delay and the target"},
		{at, 100 * ms, 400 * ms, 200, 400 * ms, "never below the target"},
		{at8, 1000 * ms, 800 * ms, 200, 550 * ms, "target is latency / 8"},
		{at, 5000 * ms, 1 * ms, 429, 5000 * ms, "a non-200 never lowers the delay"},
		{at, 100 * ms, 300 * ms, 503, 300 * ms, "a non-200 may raise it"},
		{at, 50 * time.Second, 90 * time.Second, 200, 60 * time.Second, "at most 60 s"},
	}
	for _, tt := range tests {
		if got := tt.at.adjust(tt.delay, tt.latency, tt.status); got != tt.want {
			t.Errorf("%s: adjust(%v, %v, %d) = %v, want %v", tt.name, tt.delay, tt.latency, tt.status, got, tt.want)
		}
	}
}

// AutoThrottle spaces the sends of a slot by the delay in force (randomised
// by [0.5, 1.5)), whatever the number of callers; the delay starts at 5 s and
// halves its distance to the latency with every response.
func TestAutoThrottlePacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Latency: testserver.Latency{Base: 100 * time.Millisecond}},
		}})
		rt := newAutoThrottle(srv.Transport(), 1, 1)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { get(t, rt, srv.URL+"/page/1") })
		}
		wg.Wait()
		acc := srv.Stats("a.test").Accepted
		if len(acc) != 10 {
			t.Fatalf("%d requests, want 10", len(acc))
		}
		// the first answer (at 100 ms) brings the delay to 2.55 s before
		// the second send
		if gap, d := acc[1]-acc[0], 2550*time.Millisecond; gap < d/2 || gap >= d*3/2 {
			t.Errorf("first gap %v, want in [%v, %v)", gap, d/2, d*3/2)
		}
		for i := 2; i < len(acc); i++ {
			if gap := acc[i] - acc[i-1]; gap < 50*time.Millisecond || gap >= acc[1]-acc[0]+time.Second {
				t.Errorf("gap %d = %v", i, gap)
			}
		}
		// 10 answers: 0.1 s + 4.9 s / 2^10
		if d := rt.slots["a.test"].delay; d < 100*time.Millisecond || d > 110*time.Millisecond {
			t.Errorf("delay after 10 answers = %v, want about 105 ms", d)
		}
	})
}
