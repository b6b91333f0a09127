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

// robots.txt: fetched once per origin, through the same politeness as any
// request (the caller passes send), kept in memory, and pulled by each scope
// (the strictest Crawl-delay over its origins) when it is created and
// whenever memory changes. Nothing here knows a Transport or a Controller.

// robotsMaxBytes is how much of a robots.txt is read; RFC 9309 asks crawlers
// to parse at least 500 KiB.
const robotsMaxBytes = 512 << 10

// robotsTimeout bounds one robots.txt attempt when no AttemptTimeout is set.
const robotsTimeout = 30 * time.Second

// robotsPolicy is what fetchRobots needs of the settings.
type robotsPolicy struct {
	ttl, failDelay, retry, maxDelay time.Duration
	logger                          *slog.Logger
}

// fetchRobots reads origin's robots.txt with send and returns the
// Crawl-delay for ua and how long to trust it. 2xx: the file's delay
// (capped), trusted for the TTL. 4xx other than 429: no delay (RFC 9309: no
// restrictions). 429, 5xx or unreachable: the conservative fail delay until
// it can be read, asked again after the retry interval. Redirects are
// followed up to 5 hops.
func fetchRobots(ctx context.Context, send func(*http.Request) (*http.Response, error), origin, ua string, p robotsPolicy) (time.Duration, time.Duration) {
	target := origin + "/robots.txt"
	for hop := 0; hop < 6; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return p.failDelay, p.retry
		}
		if ua != "" {
			req.Header.Set("User-Agent", ua)
		}
		resp, err := send(req)
		if err != nil {
			return p.failDelay, p.retry
		}
		b, readErr := io.ReadAll(io.LimitReader(resp.Body, robotsMaxBytes))
		_ = resp.Body.Close()
		switch code := resp.StatusCode; {
		case code >= 300 && code < 400:
			loc, err := resp.Location()
			if err != nil {
				return 0, p.ttl
			}
			target = loc.String()
			continue
		case code == http.StatusTooManyRequests || code >= 500:
			return p.failDelay, p.retry
		case code >= 400:
			return 0, p.ttl
		case readErr != nil:
			return p.failDelay, p.retry
		}
		return p.capDelay(origin, CrawlDelay(b, ua)), p.ttl
	}
	return 0, p.ttl
}

// capDelay bounds an absurd Crawl-delay (or one that overflowed to a
// negative duration), and says so in the log.
func (p robotsPolicy) capDelay(origin string, d time.Duration) time.Duration {
	if d >= 0 && d <= p.maxDelay {
		return d
	}
	l := p.logger
	if l == nil {
		l = slog.Default()
	}
	l.Warn("adaptive: robots.txt Crawl-delay capped", "origin", origin, "crawl_delay", d, "cap", p.maxDelay)
	return p.maxDelay
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
