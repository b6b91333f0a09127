package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// textbookAIMD is a port, as a Go http.RoundTripper, of the AIMD limiter
// that is widely published for Python scrapers (blog posts, answers and
// tutorials that wrap an asyncio.Semaphore-like counter around aiohttp or
// httpx). It follows the specification in DESIGN.md, which
// describes that limiter, not any one repository:
//
//   - a concurrency limit per host, starting at 8, never above 32 nor
//     below 1;
//   - +1 for every successful (2xx) response: "additive increase", per
//     response, not per window;
//   - halve on every 429: "multiplicative decrease", for every 429, so a
//     burst of 20 rejections halves 20 times (the collapse DESIGN.md
//     measured against nginx);
//   - a circuit breaker: 6 consecutive 429s open it for 15 s, during which
//     nothing is sent to the host; it closes after that with the counter
//     reset;
//   - a 429 is retried (at most 3 times, like the retry decorators these
//     scrapers use) after a "full jitter" sleep, uniform in [0, Retry-After]
//     (the AWS "Exponential Backoff And Jitter" recipe with the server's
//     Retry-After as the cap; 1 s when the header is missing or
//     unparseable). The sleep is the caller's own: other callers keep
//     sending, which is how those limiters behave.
//
// Everything but 2xx and 429 (503 included) neither raises nor lowers the
// limit and is not retried. A slot is held from sending until the body is
// read or closed, as "async with semaphore:" around the fetch does. Safe for
// concurrent use.
type textbookAIMD struct {
	next http.RoundTripper

	mu    sync.Mutex
	hosts map[string]*aimdHost
	rng   *rand.Rand
}

const (
	aimdStart       = 8
	aimdCeiling     = 32
	aimdFloor       = 1
	aimdBreakAfter  = 6
	aimdBreakFor    = 15 * time.Second
	aimdMaxRetries  = 3
	aimdDefaultWait = time.Second
)

type aimdHost struct {
	limit     int
	inflight  int
	row       int       // consecutive 429s
	openUntil time.Time // breaker
	changed   chan struct{}
}

func newTextbookAIMD(next http.RoundTripper, seed uint64) *textbookAIMD {
	return &textbookAIMD{next: next, hosts: map[string]*aimdHost{}, rng: rand.New(rand.NewPCG(seed, 0xa1d))}
}

func (t *textbookAIMD) host(name string) *aimdHost {
	h := t.hosts[name]
	if h == nil {
		h = &aimdHost{limit: aimdStart, changed: make(chan struct{})}
		t.hosts[name] = h
	}
	return h
}

// wake tells the waiters of h that something changed. t.mu must be held.
func (h *aimdHost) wake() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// acquire waits for a slot of host name: the breaker closed and fewer than
// limit in flight.
func (t *textbookAIMD) acquire(ctx context.Context, name string) (*aimdHost, error) {
	for {
		t.mu.Lock()
		h := t.host(name)
		now := time.Now()
		if now.Before(h.openUntil) {
			wait, ch := h.openUntil.Sub(now), h.changed
			t.mu.Unlock()
			if err := sleepOrWake(ctx, wait, ch); err != nil {
				return nil, err
			}
			continue
		}
		if h.inflight < h.limit {
			h.inflight++
			t.mu.Unlock()
			return h, nil
		}
		ch := h.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// RoundTrip implements http.RoundTripper.
func (t *textbookAIMD) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		h, err := t.acquire(ctx, req.URL.Host)
		if err != nil {
			return nil, err
		}
		release := func() {
			t.mu.Lock()
			h.inflight--
			h.wake()
			t.mu.Unlock()
		}
		r := req
		if attempt > 0 {
			r = req.Clone(ctx)
		}
		resp, err := t.next.RoundTrip(r)
		if err != nil {
			release()
			return nil, err
		}
		t.mu.Lock()
		var jitter time.Duration
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			h.limit = min(h.limit+1, aimdCeiling)
			h.row = 0
		case resp.StatusCode == http.StatusTooManyRequests:
			h.limit = max(h.limit/2, aimdFloor)
			h.row++
			if h.row >= aimdBreakAfter {
				h.openUntil = time.Now().Add(aimdBreakFor)
				h.row = 0
			}
			ra := retryAfter(resp.Header, time.Now())
			jitter = time.Duration(t.rng.Int64N(int64(ra) + 1))
		}
		h.wake()
		t.mu.Unlock()
		if resp.StatusCode != http.StatusTooManyRequests || attempt >= aimdMaxRetries {
			resp.Body = onClose(resp.Body, release)
			return resp, nil
		}
		drain(resp)
		release()
		if err := sleepOrWake(ctx, jitter, nil); err != nil {
			return nil, err
		}
	}
}

// retryAfter reads Retry-After as these scrapers do: seconds or an
// HTTP-date, aimdDefaultWait when missing or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return aimdDefaultWait
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return aimdDefaultWait
}

// drain reads a little of a body that will not be used and closes it, so
// that the connection can be reused.
func drain(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
}

// onClose calls release once, when body is read to its end or closed.
func onClose(body io.ReadCloser, release func()) io.ReadCloser {
	return &releaseBody{ReadCloser: body, release: release}
}

type releaseBody struct {
	io.ReadCloser
	release func()
	once    sync.Once
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// sleepOrWake waits d, until wake is closed (nil: never) or until ctx is
// done, which it reports.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
