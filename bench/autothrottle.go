package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// autoThrottle is a port, as a Go http.RoundTripper, of Scrapy's
// AutoThrottle extension (scrapy/extensions/throttle.py, _adjust_delay)
// together with the parts of Scrapy's downloader and retry middleware that
// it relies on, with Scrapy's default settings:
//
//   - one download slot per host, with a delay between the starts of two
//     requests: AUTOTHROTTLE_START_DELAY = 5 s at first, never above
//     AUTOTHROTTLE_MAX_DELAY = 60 s nor below DOWNLOAD_DELAY = 0;
//   - RANDOMIZE_DOWNLOAD_DELAY: each gap is the delay times a uniform draw
//     in [0.5, 1.5);
//   - CONCURRENT_REQUESTS_PER_DOMAIN = 8: at most 8 requests per slot
//     from sending until their body has been received;
//   - the downloader sends the slot's queue one request at a time and reads
//     the delay when it sends, so a change applies to the next gap at once
//     (nothing is priced in advance);
//   - on every response, with latency the time from sending to the
//     response headers (Scrapy's download_latency):
//     target = latency / AUTOTHROTTLE_TARGET_CONCURRENCY,
//     new = max(target, (delay + target) / 2), clamped to [min, max];
//     a non-200 response never lowers the delay;
//   - RetryMiddleware: 429, 500, 502, 503, 504, 522, 524 and 408 are
//     retried at most RETRY_TIMES = 2 times, through the slot again.
//     Retry-After is ignored (Scrapy does not read it: scrapy#3849).
//
// Target concurrency 1 is Scrapy's default; 8 matches the per-domain
// concurrency. Safe for concurrent use.
type autoThrottle struct {
	next   http.RoundTripper
	target float64 // AUTOTHROTTLE_TARGET_CONCURRENCY

	mu    sync.Mutex
	slots map[string]*atSlot
	rng   *rand.Rand
}

const (
	atStartDelay  = 5 * time.Second
	atMaxDelay    = 60 * time.Second
	atMinDelay    = 0
	atPerDomain   = 8
	atRetryTimes  = 2
	atRandomizeLo = 0.5
)

var atRetryCodes = map[int]bool{500: true, 502: true, 503: true, 504: true, 522: true, 524: true, 408: true, 429: true}

type atSlot struct {
	delay    time.Duration
	lastSeen time.Time // when the last request was sent
	gap      float64   // the randomisation factor of the next gap, 0: not drawn
	inflight int
	head     chan struct{} // the turn to send next (capacity 1)
	changed  chan struct{} // closed when delay or inflight changes
}

func newAutoThrottle(next http.RoundTripper, target float64, seed uint64) *autoThrottle {
	return &autoThrottle{next: next, target: target, slots: map[string]*atSlot{}, rng: rand.New(rand.NewPCG(seed, 0x5c7))}
}

func (t *autoThrottle) slot(name string) *atSlot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[name]
	if s == nil {
		s = &atSlot{delay: atStartDelay, head: make(chan struct{}, 1), changed: make(chan struct{})}
		t.slots[name] = s
	}
	return s
}

func (s *atSlot) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// acquire waits for the turn at the head of the slot's queue, then until
// the gap since the last send has passed and a transfer slot is free.
func (t *autoThrottle) acquire(ctx context.Context, s *atSlot) error {
	select {
	case s.head <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.head }()
	for {
		t.mu.Lock()
		if s.gap == 0 {
			s.gap = atRandomizeLo + t.rng.Float64()
		}
		now := time.Now()
		wait := s.lastSeen.Add(time.Duration(float64(s.delay) * s.gap)).Sub(now)
		ch := s.changed
		if wait <= 0 && s.inflight < atPerDomain {
			s.lastSeen, s.gap = now, 0
			s.inflight++
			t.mu.Unlock()
			return nil
		}
		t.mu.Unlock()
		if wait <= 0 {
			wait = time.Hour // only a free transfer slot can help
		}
		if err := sleepOrWake(ctx, wait, ch); err != nil {
			return err
		}
	}
}

// RoundTrip implements http.RoundTripper.
func (t *autoThrottle) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	s := t.slot(req.URL.Host)
	for attempt := 0; ; attempt++ {
		if err := t.acquire(ctx, s); err != nil {
			return nil, err
		}
		r := req
		if attempt > 0 {
			r = req.Clone(ctx)
		}
		sent := time.Now()
		resp, err := t.next.RoundTrip(r)
		latency := time.Since(sent)
		release := func() {
			t.mu.Lock()
			s.inflight--
			s.wake()
			t.mu.Unlock()
		}
		if err != nil {
			release()
			return nil, err
		}
		t.mu.Lock()
		s.delay = t.adjust(s.delay, latency, resp.StatusCode)
		s.wake()
		t.mu.Unlock()
		if !atRetryCodes[resp.StatusCode] || attempt >= atRetryTimes {
			resp.Body = onClose(resp.Body, release)
			return resp, nil
		}
		drain(resp)
		release()
	}
}

// adjust is AutoThrottle's _adjust_delay.
func (t *autoThrottle) adjust(delay, latency time.Duration, status int) time.Duration {
	target := time.Duration(float64(latency) / t.target)
	nd := max(target, (delay+target)/2)
	nd = min(max(nd, atMinDelay), atMaxDelay)
	if status != http.StatusOK && nd <= delay {
		return delay
	}
	return nd
}
