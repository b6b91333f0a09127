package adaptive

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/temoto/robotstxt"
)

// robotsMaxBytes is how much of a robots.txt is read; RFC 9309 asks crawlers
// to parse at least 500 KiB.
const robotsMaxBytes = 512 << 10

// robotsCache holds, per origin, the Crawl-delay read from robots.txt and
// when to ask again. One fetch per origin at a time; the others wait for it.
type robotsCache struct {
	mu        sync.Mutex
	m         map[string]*robotsEntry
	lastSweep time.Time
}

type robotsEntry struct {
	done    chan struct{} // closed when the fetch ends
	expires time.Time
	delay   time.Duration
}

func newRobotsCache() *robotsCache { return &robotsCache{m: make(map[string]*robotsEntry)} }

// ensure makes sure the Crawl-delay of req's origin is known and applied to
// its scope, fetching robots.txt (through the same politeness) when it is
// missing or stale.
func (rc *robotsCache) ensure(ctx context.Context, t *Transport, req *http.Request) error {
	origin := reqScheme(req) + "://" + NormalizeHost(reqScheme(req), reqHost(req))
	now := time.Now()
	rc.mu.Lock()
	e := rc.m[origin]
	if e != nil {
		done := e.done
		fresh := now.Before(e.expires)
		rc.mu.Unlock()
		select {
		case <-done:
			if fresh {
				return nil
			}
		default:
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		rc.mu.Lock()
		if rc.m[origin] != e { // someone else started the refresh
			rc.mu.Unlock()
			return rc.ensure(ctx, t, req)
		}
	}
	rc.sweepLocked(now)
	e = &robotsEntry{done: make(chan struct{})}
	rc.m[origin] = e
	rc.mu.Unlock()

	delay, ttl := t.fetchRobots(ctx, origin, req.Header.Get("User-Agent"))
	t.c.applyCrawlDelay(req, delay)
	rc.mu.Lock()
	e.delay, e.expires = delay, time.Now().Add(ttl)
	close(e.done)
	rc.mu.Unlock()
	return nil
}

func (rc *robotsCache) sweepLocked(now time.Time) {
	if len(rc.m) < 1024 || now.Sub(rc.lastSweep) < time.Minute {
		return
	}
	rc.lastSweep = now
	for k, e := range rc.m {
		select {
		case <-e.done:
			if !now.Before(e.expires) {
				delete(rc.m, k)
			}
		default:
		}
	}
}

// fetchRobots reads origin's robots.txt and returns the Crawl-delay for ua
// and how long to trust it. 2xx: the file's delay (capped), trusted for
// RobotsTTL. 4xx other than 429: no delay (RFC 9309: no restrictions).
// 429, 5xx or unreachable: the conservative RobotsFailDelay until it can be
// read, asked again after RobotsRetry. Redirects are followed up to 5 hops.
func (t *Transport) fetchRobots(ctx context.Context, origin, ua string) (time.Duration, time.Duration) {
	st := t.c.st
	ctx = context.WithoutCancel(ctx) // one caller giving up must not poison the cache
	if st.AttemptTimeout == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	target := origin + "/robots.txt"
	for hop := 0; hop < 6; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return st.RobotsFailDelay, st.RobotsRetry
		}
		if ua != "" {
			req.Header.Set("User-Agent", ua)
		}
		// no retries: a robots.txt that is throttled or failing counts as
		// unavailable at once (conservative delay, asked again after
		// RobotsRetry), so the crawl starts as soon as the pause allows
		resp, err := t.roundTrip(req, 0)
		if err != nil {
			return st.RobotsFailDelay, st.RobotsRetry
		}
		b, readErr := io.ReadAll(io.LimitReader(resp.Body, robotsMaxBytes))
		_ = resp.Body.Close()
		switch code := resp.StatusCode; {
		case code >= 300 && code < 400:
			loc, err := resp.Location()
			if err != nil {
				return 0, st.RobotsTTL
			}
			target = loc.String()
			continue
		case code == http.StatusTooManyRequests || code >= 500:
			return st.RobotsFailDelay, st.RobotsRetry
		case code >= 400:
			return 0, st.RobotsTTL
		case readErr != nil:
			return st.RobotsFailDelay, st.RobotsRetry
		}
		return t.c.capCrawlDelay(origin, CrawlDelay(b, ua)), st.RobotsTTL
	}
	return 0, st.RobotsTTL
}

// capCrawlDelay bounds an absurd Crawl-delay (or one that overflowed to a
// negative duration) at MaxCrawlDelay, and says so in the log.
func (c *Controller) capCrawlDelay(origin string, d time.Duration) time.Duration {
	if d >= 0 && d <= c.st.MaxCrawlDelay {
		return d
	}
	l := c.st.Logger
	if l == nil {
		l = slog.Default()
	}
	l.Warn("adaptive: robots.txt Crawl-delay capped", "origin", origin, "crawl_delay", d, "cap", c.st.MaxCrawlDelay)
	return c.st.MaxCrawlDelay
}

// applyCrawlDelay makes 1/delay the rate ceiling of req's scope.
func (c *Controller) applyCrawlDelay(req *http.Request, d time.Duration) {
	now := time.Now()
	s := c.scope(c.st.Scope(req), reqHost(req), now)
	s.mu.Lock()
	s.robCeil = 0
	if d > 0 {
		// 1 % headroom (at least 5 ms): the gap the server sees is the gap
		// we send at plus the jitter of the way there
		s.robCeil = 1 / (d + max(d/100, 5*time.Millisecond)).Seconds()
	}
	s.syncRate(now)
	s.mu.Unlock()
}

// CrawlDelay returns the Crawl-delay that robots.txt body gives user agent
// ua (temoto/robotstxt's group matching), or 0 when the file cannot be read
// as rules: RFC 9309 crawlers use what they can. A leading UTF-8 BOM is
// ignored. The result is not capped: an absurd value (or one that overflowed
// to a negative duration) comes back as it is, for the caller to bound.
func CrawlDelay(body []byte, ua string) time.Duration {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	data, err := robotstxt.FromBytes(body)
	if err != nil {
		return 0
	}
	return data.FindGroup(ua).CrawlDelay
}
