package frontier_test

import (
	"net/url"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/frontier"
	"github.com/colly-polite/polite/testserver"
)

// The test server's pages link with relative hrefs ("/page/N"): AddLink
// resolves them against the page they were found on, as e.Request.Visit
// does, and the crawl finds the whole site, one depth further per link.
func TestFrontierAddLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, testserver.Config{Hosts: map[string]testserver.Policy{
			"a.test": {Site: testserver.Site{Pages: 30, FanOut: 3}, Latency: testserver.Latency{Base: 10 * time.Millisecond}},
		}})
		c := colly.NewCollector(colly.Async())
		c.WithTransport(srv.Transport())
		ctrl := adaptive.Attach(c, polite.Config{Robots: new(false)})
		q, err := frontier.New(ctrl, frontier.Config{Threads: 4})
		require.NoError(t, err)
		var links, deepest atomic.Int64
		c.OnHTML("a[href]", func(e *colly.HTMLElement) {
			href := e.Attr("href")
			if u, err := url.Parse(href); assert.NoError(t, err) {
				assert.False(t, u.IsAbs(), "the site links relatively: %s", href)
			}
			if q.AddLink(e.Request, href) == nil {
				links.Add(1)
			}
		})
		c.OnRequest(func(r *colly.Request) {
			assert.Equal(t, "v", r.Ctx.Get("k"), "the context of the page that linked")
			for d := deepest.Load(); int64(r.Depth) > d && !deepest.CompareAndSwap(d, int64(r.Depth)); d = deepest.Load() {
			}
		})
		ctx := colly.NewContext()
		ctx.Put("k", "v")
		root, _ := url.Parse(srv.HostURL("a.test") + "/")
		require.NoError(t, q.AddRequest(&colly.Request{URL: root, Method: "GET", Depth: 1, Ctx: ctx}))
		require.NoError(t, q.Run(c))
		assert.Equal(t, 31, len(srv.Stats("a.test").Accepted), "the index and its 30 pages, each once (Colly's revisit check)")
		assert.Positive(t, links.Load())
		assert.Greater(t, deepest.Load(), int64(1), "a link is one deeper than its page")
	})
}

// An href AddLink cannot follow fails with ErrLink, saying which href on
// which page; nothing is queued.
func TestFrontierAddLinkBad(t *testing.T) {
	ctrl, err := polite.New(polite.Config{})
	require.NoError(t, err)
	q, err := frontier.New(ctrl, frontier.Config{})
	require.NoError(t, err)
	page, _ := url.Parse("http://a.test/dir/page")
	from := &colly.Request{URL: page}
	for _, href := range []string{"", "  ", "#top", "mailto:x@a.test", "javascript:void(0)", "ftp://a.test/f", "http://[::1"} {
		err := q.AddLink(from, href)
		assert.ErrorIs(t, err, frontier.ErrLink, "%q", href)
		if err != nil {
			assert.Contains(t, err.Error(), "a.test/dir/page", "names the page")
		}
	}
	assert.ErrorIs(t, q.AddLink(nil, "/x"), frontier.ErrLink)
	assert.True(t, q.IsEmpty())
	for _, href := range []string{"other", "../up?x=1", "//b.test/p", "https://c.test/q#f"} {
		require.NoError(t, q.AddLink(from, href), href)
	}
	assert.Equal(t, 4, q.Size())
	var scopes []string
	for _, b := range q.Backlogs() {
		scopes = append(scopes, b.Scope)
	}
	assert.Equal(t, []string{"a.test", "b.test", "c.test"}, scopes)
}
