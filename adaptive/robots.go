package adaptive

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/temoto/robotstxt"
)

// robotsMaxBytes is how much of a robots.txt is read; RFC 9309 asks crawlers
// to parse at least 500 KiB.
const robotsMaxBytes = 512 << 10

// robotsFor makes sure the robots.txt of req's origin has been read, and
// returns its Crawl-delay (0 when it has none, or robots.txt is off). A
// missing or stale entry is fetched, through the same politeness, by the
// first caller; the others wait for it. The fetch ends with its caller's
// context: then it is abandoned, not cached, and the next caller asks again.
func (t *Transport) robotsFor(ctx context.Context, req *http.Request, key string) (time.Duration, error) {
	if !t.c.robotsOn() || req.URL == nil || req.URL.Path == "/robots.txt" {
		return 0, nil
	}
	origin := reqScheme(req) + "://" + NormalizeHost(reqScheme(req), reqHost(req))
	for {
		e, mine := t.c.mem.robots(origin, time.Now())
		if !mine {
			select {
			case <-e.done:
				if e.abandoned {
					continue
				}
				return e.delay, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		delay, ttl := t.fetchRobots(ctx, origin, req.Header.Get("User-Agent"))
		abandoned := ctx.Err() != nil
		strictest := t.c.mem.robotsDone(e, origin, key, delay, time.Now().Add(ttl), abandoned)
		if abandoned {
			return 0, ctx.Err()
		}
		t.c.setCrawlDelay(key, strictest)
		return delay, nil
	}
}

// fetchRobots reads origin's robots.txt and returns the Crawl-delay for ua
// and how long to trust it. 2xx: the file's delay (capped), trusted for
// RobotsTTL. 4xx other than 429: no delay (RFC 9309: no restrictions).
// 429, 5xx or unreachable: the conservative RobotsFailDelay until it can be
// read, asked again after RobotsRetry. Redirects are followed up to 5 hops.
func (t *Transport) fetchRobots(ctx context.Context, origin, ua string) (time.Duration, time.Duration) {
	st := t.c.st
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
		timeout := st.AttemptTimeout
		if timeout == 0 {
			timeout = robotsTimeout
		}
		resp, err := t.roundTrip(req, t.c.resolve(req), 0, timeout)
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

// setCrawlDelay makes 1/d the Crawl-delay ceiling of the live scope key, if
// any (a scope created later reads it from memory).
func (c *Controller) setCrawlDelay(key string, d time.Duration) {
	c.mu.RLock()
	s := c.scopes[key]
	c.mu.RUnlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	s.robCeil = crawlDelayRate(d)
	s.syncRate(time.Now())
	s.mu.Unlock()
}

// crawlDelayRate is the rate ceiling of a Crawl-delay d (0: none), with 1 %
// headroom (at least 5 ms): the gap the server sees is the gap we send at
// plus the jitter of the way there.
func crawlDelayRate(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return 1 / (d + max(d/100, 5*time.Millisecond)).Seconds()
}

// robotsTimeout bounds one robots.txt attempt when no AttemptTimeout is set.
const robotsTimeout = 30 * time.Second

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
