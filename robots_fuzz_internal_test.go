package polite

import (
	"bytes"
	"testing"
	"time"

	"github.com/temoto/robotstxt"
)

// parsed is parseRobots's facts (none for a file it cannot read).
func parsed(body []byte, ua string) robotsFacts {
	f, _ := parseRobots(body, ua)
	return f
}

func TestCrawlDelayParse(t *testing.T) {
	for _, tc := range []struct {
		body string
		ua   string
		want time.Duration
	}{
		{"User-agent: *\nCrawl-delay: 2\n", "colly", 2 * time.Second},
		{"User-agent: *\nCrawl-delay: 0.5\n", "colly", 500 * time.Millisecond},
		{"\xef\xbb\xbfUser-agent: *\nCrawl-delay: 3\n", "colly", 3 * time.Second},
		{"User-agent: colly\nCrawl-delay: 7\n\nUser-agent: *\nCrawl-delay: 1\n", "colly/2.0", 7 * time.Second},
		{"User-agent: other\nCrawl-delay: 7\n\nUser-agent: *\nCrawl-delay: 1\n", "colly", time.Second},
		{"User-agent: *\nCrawl-delay: -1\n", "colly", 0},
		{"User-agent: *\nCrawl-delay: abc\n", "colly", 0},
		// a value with a unit keeps its number, where the parser refused
		// the whole file (and with it every rule)
		{"User-agent: *\nCrawl-delay: 10s\nDisallow: /private\n", "colly", 10 * time.Second},
		{"User-agent: *\nCrawl-delay: 2.5 seconds # slow\n", "colly", 2500 * time.Millisecond},
		// a rule before any User-agent belongs to no group: dropped, the
		// groups after it kept
		{"Crawl-delay: 5\nUser-agent: *\nCrawl-delay: 3\n", "colly", 3 * time.Second},
		{"Disallow: /x\nUser-agent: *\nCrawl-delay: 4\n", "colly", 4 * time.Second},
		{"<html><body>Welcome</body></html>", "colly", 0},
		{"", "colly", 0},
	} {
		if got := parsed([]byte(tc.body), tc.ua).delay; got != tc.want {
			t.Errorf("the Crawl-delay of %q for %q is %v, want %v", tc.body, tc.ua, got, tc.want)
		}
	}
}

// FuzzCrawlDelay: any robots.txt body and user agent, never a panic; a
// negative result can only come from a huge delay that overflowed (which the
// controller caps), never from a negative Crawl-delay line.
func FuzzCrawlDelay(f *testing.F) {
	for _, s := range []string{
		"User-agent: *\nCrawl-delay: 2\n",
		"\xef\xbb\xbfUser-agent: *\nCrawl-delay: 1000000000\n",
		"User-agent: *\nCrawl-delay: -1\nDisallow: /\n",
		"User-agent: a\nUser-agent: b\nCrawl-delay: 1e400\n",
		"<html>\n<body>robots</body></html>",
		"Crawl-delay: 5\nUser-agent: *\n",
	} {
		f.Add([]byte(s), "colly")
	}
	f.Fuzz(func(t *testing.T, body []byte, ua string) {
		if f, ok := parseRobots(body, ua); ok && f.delay == 0 {
			// a file read leniently says no more than the file read
			// as it is: the mending never drops a delay it could keep
			if g, err := robotstxt.FromBytes(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))); err == nil && g.FindGroup(ua).CrawlDelay > 0 {
				t.Fatalf("a delay lost from %q", body)
			}
		}
		d := parsed(body, ua).delay
		if d < 0 && d > -time.Hour {
			t.Fatalf("a small negative delay %v from %q", d, body)
		}
	})
}
