package testserver_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/colly-polite/polite/testserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is one response, body read and closed.
type result struct {
	status int
	header http.Header
	body   string
	err    error
}

func fetch(c *http.Client, url string) result {
	resp, err := c.Get(url)
	if err != nil {
		return result{err: err}
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// get fetches url and fails the test on a transport error. Call it from the
// test's goroutine only.
func get(t *testing.T, c *http.Client, url string) result {
	t.Helper()
	r := fetch(c, url)
	require.NoError(t, r.err, "GET %s", url)
	return r
}

// fetchAll sends n requests at once and returns the statuses by count.
func fetchAll(t *testing.T, c *http.Client, url string, n int) map[int]int {
	t.Helper()
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = fetch(c, url) })
	}
	wg.Wait()
	got := map[int]int{}
	for _, r := range results {
		require.NoError(t, r.err)
		got[r.status]++
	}
	return got
}

// hammer sends one request every `every` from now until `until` has passed
// since start, on `workers` goroutines in step, and returns the number sent.
func hammer(t *testing.T, c *http.Client, url string, start time.Time, until, every time.Duration, workers int) int {
	t.Helper()
	sent := 0
	for time.Since(start) < until {
		fetchAll(t, c, url, workers)
		sent += workers
		time.Sleep(every)
	}
	return sent
}

func one(p testserver.Policy) testserver.Config {
	return testserver.Config{Hosts: map[string]testserver.Policy{"a.test": p}}
}

func fixed(n int, w time.Duration) testserver.Limit {
	return testserver.Limit{Kind: testserver.FixedWindow, N: n, Window: w}
}

func gcra(rate float64, burst int) testserver.Limit {
	return testserver.Limit{Kind: testserver.TokenBucket, Rate: rate, Burst: burst}
}

func sliding(n int, w time.Duration) testserver.Limit {
	return testserver.Limit{Kind: testserver.SlidingWindow, N: n, Window: w}
}

// ms is shorthand for a list of millisecond offsets.
func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

// sleepUntil sleeps until d has passed since start.
func sleepUntil(start time.Time, d time.Duration) {
	time.Sleep(d - time.Since(start))
}
