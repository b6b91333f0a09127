package polite

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What one answer to a robots.txt request means (RFC 9309), with Disallow
// on and off.
func TestRobotsAnswers(t *testing.T) {
	p := robotsPolicy{ttl: 24 * time.Hour, failDelay: 5 * time.Second, retry: time.Minute, maxDelay: 30 * time.Second, disallow: true}
	body := []byte("User-agent: *\nDisallow: /private\nCrawl-delay: 2\n")
	for _, tc := range []struct {
		name     string
		status   int
		disallow bool
		uri      string
		allowed  bool
		delay    time.Duration
		ttl      time.Duration
	}{
		{"2xx: its rules", 200, true, "/private/x", false, 2 * time.Second, 24 * time.Hour},
		{"2xx: its rules allow the rest", 200, true, "/public", true, 2 * time.Second, 24 * time.Hour},
		{"2xx with Disallow off", 200, false, "/private/x", true, 2 * time.Second, 24 * time.Hour},
		{"404: no restrictions", 404, true, "/private/x", true, 0, 24 * time.Hour},
		{"429: the fail delay, no disallow", 429, true, "/private/x", true, 5 * time.Second, time.Minute},
		{"503: disallow all", 503, true, "/", false, 5 * time.Second, time.Minute},
		{"503 with Disallow off: the fail delay", 503, false, "/", true, 5 * time.Second, time.Minute},
	} {
		p.disallow = tc.disallow
		f, ttl := p.from("http://a.test", tc.status, body, nil, "colly")
		assert.Equal(t, tc.allowed, f.allows(tc.uri), tc.name)
		assert.Equal(t, tc.delay, f.delay, tc.name)
		assert.Equal(t, tc.ttl, ttl, tc.name)
	}
	p.disallow = true
	f, ttl := p.from("http://a.test", http.StatusOK, body, errRead, "colly")
	assert.True(t, f.disallowAll, "a body that fails is unreadable")
	assert.Equal(t, time.Minute, ttl)
}

var errRead = http.ErrBodyReadAfterClose

// The rules memory holds are bounded: past the budget the least recently
// used origins drop theirs and read robots.txt again when next needed.
func TestRobotsRulesBounded(t *testing.T) {
	m := newMemory(1000)
	big := robotsFacts{group: parsed([]byte("User-agent: *\nDisallow: /x\n"), "colly").group, cost: rulesBudget / 4}
	var first *originFacts
	for i := range 8 {
		o := "http://h" + string(rune('a'+i)) + ".test"
		e, mine := m.robots(o, 0)
		assert.True(t, mine)
		m.robotsDone(e, o, o, big, time.Hour, false)
		if i == 0 {
			first = e
		}
	}
	assert.LessOrEqual(t, m.rules, rulesBudget)
	_, state := m.robotsState("http://ha.test", 0)
	assert.Equal(t, robotsUnknown, state, "the oldest origin reads robots.txt again")
	assert.Nil(t, m.factsOf(first).group)
	_, state = m.robotsState("http://hh.test", 0)
	assert.Equal(t, robotsKnown, state, "the newest keeps its rules")
}

// Any robots.txt, user agent and URL: no panic, a cost that covers the
// parsed rules' bookkeeping.
func FuzzRobotsRules(f *testing.F) {
	for _, s := range []string{
		"User-agent: *\nDisallow: /\nAllow: /a\n",
		"User-agent: colly\nDisallow: /*.php$\n\nUser-agent: *\nAllow: /\n",
		"\xef\xbb\xbfUser-agent: *\nDisallow: /p?q=*\n",
		"<html>robots</html>",
	} {
		f.Add([]byte(s), "colly/2.0", "/a/b?q=1")
	}
	f.Fuzz(func(t *testing.T, body []byte, ua, uri string) {
		r := parsed(body, ua)
		_ = r.allows(uri)
		if r.cost < 64 && r.group != nil {
			t.Fatalf("cost %d for %q", r.cost, body)
		}
	})
}

// One line the parser cannot place no longer costs a file its rules: the
// Disallow after a Crawl-delay of "10s" holds, with the 10 s. Before, the
// parser refused the whole file, and it was read as allowing everything,
// with no delay, for a day.
func TestRobotsOneBadLineKeepsTheRest(t *testing.T) {
	for _, body := range []string{
		"User-agent: *\nCrawl-delay: 10s\nDisallow: /private\n",
		"Disallow: /orphan\nUser-agent: *\nCrawl-delay: 10\nDisallow: /private\n",
		"User-agent: *\nCrawl-delay: -3\nCrawl-delay: 10\nDisallow: /private\n",
	} {
		f, ok := parseRobots([]byte(body), "colly")
		require.True(t, ok, body)
		assert.Equal(t, 10*time.Second, f.delay, body)
		assert.False(t, f.allows("/private"), body)
		assert.True(t, f.allows("/public"), body)
	}
}
