package polite

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/temoto/robotstxt"
)

// robots.txt: fetched once per origin, through the same politeness as any
// request (the caller passes send), kept in memory (the Crawl-delay, and the
// Allow and Disallow rules of this crawler's group), and pulled by each
// scope (the strictest Crawl-delay over its origins) when it is created and
// whenever memory changes. Nothing here knows a Transport or a Controller.

// robotsMaxBytes is how much of a robots.txt is read; RFC 9309 asks crawlers
// to parse at least 500 KiB.
const robotsMaxBytes = 512 << 10

// robotsTimeout bounds one robots.txt attempt when no AttemptTimeout is set.
const robotsTimeout = 30 * time.Second

// robotsPolicy is what fetchRobots needs of the settings.
type robotsPolicy struct {
	ttl, failDelay, retry, maxDelay time.Duration
	disallow                        bool // enforce Allow and Disallow
	logger                          *slog.Logger
}

// robotsFacts is what one robots.txt says to this crawler: its Crawl-delay,
// and its Allow and Disallow rules (group: the group of the User-Agent it
// was read for; nil allows everything), or that everything is disallowed
// while it cannot be read.
type robotsFacts struct {
	delay       time.Duration
	group       *robotstxt.Group
	disallowAll bool
	cost        int // an estimate of the group's size in memory, bytes
}

// allows reports whether the facts allow uri (path and query).
func (f *robotsFacts) allows(uri string) bool {
	if f.disallowAll {
		return false
	}
	return f.group == nil || f.group.Test(uri)
}

// fetchRobots reads origin's robots.txt with send and returns what it says
// to ua and how long to trust it (see robotsPolicy.from). Redirects are
// followed up to 5 hops. err is a refusal of send's own (a *ScopeError: the
// scope is paused or parked): robots.txt was not asked for, and nothing is
// learned.
func fetchRobots(ctx context.Context, send func(*http.Request) (*http.Response, error), origin, ua string, p robotsPolicy) (robotsFacts, time.Duration, error) {
	target := origin + "/robots.txt"
	for hop := 0; hop < 6; hop++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			f, ttl := p.unreadable()
			return f, ttl, nil
		}
		if ua != "" {
			req.Header.Set("User-Agent", ua)
		}
		resp, err := send(req)
		if err != nil {
			if se := (*ScopeError)(nil); errors.As(err, &se) {
				return robotsFacts{}, 0, err
			}
			f, ttl := p.unreadable()
			return f, ttl, nil
		}
		b, readErr := io.ReadAll(io.LimitReader(resp.Body, robotsMaxBytes))
		_ = resp.Body.Close()
		if code := resp.StatusCode; code >= 300 && code < 400 {
			loc, err := resp.Location()
			if err != nil {
				return robotsFacts{}, p.ttl, nil
			}
			target = loc.String()
			continue
		}
		f, ttl := p.from(origin, resp.StatusCode, b, readErr, ua)
		return f, ttl, nil
	}
	return robotsFacts{}, p.ttl, nil
}

// from reads one answer to a robots.txt request (not a redirect): 2xx, the
// file's rules and Crawl-delay (capped), trusted for the TTL; 4xx other
// than 429, no restrictions (RFC 9309); 429, the conservative fail delay;
// 5xx or a body that fails, unreadable. Those last two are asked again
// after the retry interval.
func (p robotsPolicy) from(origin string, status int, body []byte, readErr error, ua string) (robotsFacts, time.Duration) {
	switch {
	case status == http.StatusTooManyRequests:
		return robotsFacts{delay: p.failDelay}, p.retry
	case status >= 500:
		return p.unreadable()
	case status >= 400:
		return robotsFacts{}, p.ttl
	case readErr != nil:
		return p.unreadable()
	}
	f, ok := parseRobots(body, ua)
	if !ok {
		return p.unreadable()
	}
	f.delay = p.capDelay(origin, f.delay)
	if !p.disallow {
		f.group, f.cost = nil, 0
	}
	return f, p.ttl
}

// unreadable is a robots.txt that answers 5xx or cannot be reached: RFC
// 9309 says disallow everything; with Disallow off, the conservative fail
// delay. Either holds until it is asked again, after the retry interval.
func (p robotsPolicy) unreadable() (robotsFacts, time.Duration) {
	if p.disallow {
		return robotsFacts{delay: p.failDelay, disallowAll: true}, p.retry
	}
	return robotsFacts{delay: p.failDelay}, p.retry
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
	l.Warn("polite: robots.txt Crawl-delay capped", "origin", origin, "crawl_delay", d, "cap", p.maxDelay)
	return p.maxDelay
}

// parseRobots reads the group of body that applies to ua: its rules and its
// Crawl-delay (not capped); false if the file cannot be read as rules at
// all. The parser refuses a whole file for one line it cannot place (a
// rule before any User-agent, a Crawl-delay of "10s"), so such lines are
// mended first (lenient): a file's other rules and its delay are not
// lost to a slip of its author's.
func parseRobots(body []byte, ua string) (robotsFacts, bool) {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	data, err := robotstxt.FromBytes(body)
	if err != nil {
		body = lenient(body)
		if data, err = robotstxt.FromBytes(body); err != nil {
			return robotsFacts{}, false
		}
	}
	g := data.FindGroup(ua)
	return robotsFacts{delay: g.CrawlDelay, group: g, cost: rulesCost(body)}, true
}

// leadingNumber is the number a Crawl-delay value starts with ("10s",
// "2.5 seconds").
var leadingNumber = regexp.MustCompile(`^[0-9]*\.?[0-9]+`)

// lenient mends the lines of a robots.txt that make its parser refuse the
// whole file: an Allow, Disallow or Crawl-delay before any User-agent
// belongs to no group and is dropped (as RFC 9309's parsers do); a
// Crawl-delay whose value is no plain non-negative number keeps the number
// it starts with ("10s" is 10 s), or is dropped if it has none.
func lenient(body []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(body))
	agent := false
	for line := range bytes.Lines(body) {
		text := line
		if i := bytes.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		k, v, ok := bytes.Cut(text, []byte(":"))
		if !ok {
			out.Write(line)
			continue
		}
		key := string(bytes.ToLower(bytes.TrimSpace(k)))
		v = bytes.TrimSpace(v)
		switch key {
		case "user-agent":
			agent = true
		case "allow", "disallow", "crawl-delay", "crawldelay":
			if !agent {
				continue
			}
		}
		if key == "crawl-delay" || key == "crawldelay" {
			if f, err := strconv.ParseFloat(string(v), 64); err != nil || !(f >= 0) || math.IsInf(f, 0) {
				n := leadingNumber.Find(v)
				if n == nil {
					continue
				}
				line = append(append([]byte("Crawl-delay: "), n...), '\n')
			}
		}
		out.Write(line)
	}
	return out.Bytes()
}

// rulesCost estimates what the rules of body cost in memory once parsed:
// every Allow and Disallow line of the file (of any group: an upper bound
// for the one group kept) with the overhead of a parsed rule.
func rulesCost(body []byte) int {
	const perRule = 96
	n := 64
	for line := range bytes.Lines(body) {
		l := bytes.ToLower(bytes.TrimSpace(line))
		if bytes.HasPrefix(l, []byte("allow")) || bytes.HasPrefix(l, []byte("disallow")) {
			n += len(l) + perRule
		}
	}
	return n
}
