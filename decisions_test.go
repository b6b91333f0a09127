package polite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/testserver"
)

// logRecords is a JSON slog logger at level and a function returning the
// records it received so far.
func logRecords(t *testing.T, level slog.Level) (*slog.Logger, func() []map[string]any) {
	var mu sync.Mutex
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: level}))
	return l, func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var out []map[string]any
		for _, ln := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if ln == "" {
				continue
			}
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(ln), &rec), ln)
			out = append(out, rec)
		}
		return out
	}
}

// story is the "event cause" of each record of one scope, in order.
func story(recs []map[string]any, scope string) []string {
	var out []string
	for _, r := range recs {
		if r["scope"] == scope {
			out = append(out, r["msg"].(string)+" "+r["cause"].(string))
		}
	}
	return out
}

// inOrder reports the first of want that is not found in got after the
// ones before it ("" when all are).
func inOrder(got, want []string) string {
	i := 0
	for _, w := range want {
		for i < len(got) && got[i] != w {
			i++
		}
		if i == len(got) {
			return w
		}
		i++
	}
	return ""
}

// The decision log tells one scope's story at Info: slow start doubles
// the rate, the first 429 ends it with an estimate, a backoff pause starts
// and ends, and after the probe gap a probe goes out and ends one way or
// the other. Each line carries the state after it (phase, rate, limit, in
// flight, estimate, binding ceiling), so that the story can be checked
// line against line.
func TestDecisionLogStory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{
			Limit:   fixedWindow(20),
			Latency: testserver.Latency{Base: 50 * time.Millisecond},
			Excess:  testserver.Excess{RetryAfter: testserver.RetryAfterNone},
		}))
		logger, records := logRecords(t, slog.LevelInfo)
		c, _ := newCollector(t, srv, polite.Config{Robots: new(false), Logger: logger})
		crawl(t, c, 20, 40*time.Second, srv.HostURL("a.test"))
		recs := records()
		got := story(recs, "a.test")
		require.NotEmpty(t, got)
		t.Logf("%d lines:\n%s", len(got), strings.Join(got, "\n"))
		assert.Empty(t, inOrder(got, []string{
			"increase slow-start-step", "decrease:throttled slow-start-end", "pause backoff", "resume backoff", "probe-start probe-due",
		}), "the story of slow start, throttle, pause, probe")
		probeEnded := false
		var pauseUntil string
		for i, r := range recs {
			for _, k := range []string{"time", "scope", "msg", "cause", "phase", "rate", "limit", "inflight", "estimate", "ceiling"} {
				assert.Contains(t, r, k, "line %d", i)
			}
			switch r["msg"].(string) + " " + r["cause"].(string) {
			case "increase slow-start-step":
				assert.Equal(t, "slow-start", r["phase"])
				assert.Equal(t, 2*r["was"].(float64), r["rate"], "slow start doubles the rate")
			case "decrease:throttled slow-start-end":
				assert.Equal(t, float64(429), r["status"])
				assert.Equal(t, "steady", r["phase"])
				assert.Equal(t, r["estimate"], r["rate"], "the rate sits at the new estimate")
			case "pause backoff":
				pauseUntil = r["until"].(string)
			case "resume backoff":
				assert.Equal(t, pauseUntil, r["time"], "a pause ends when its pause line said: the record's time is when it happened")
			case "probe-success probe-held", "decrease:throttled probe-failure":
				probeEnded = true
			}
		}
		assert.True(t, probeEnded, "a probe ended within 40 s")
		for _, r := range recs {
			assert.NotEqual(t, "send", r["msg"], "per-request detail is at Debug")
			assert.NotEqual(t, "DEBUG", r["level"], "an Info handler gets no Debug line: %v", r)
		}
	})
}

// A robots.txt Crawl-delay: 1 crawl says why its rate is 0.99: the log
// has the robots.txt read and the ceiling it applied, and the snapshot
// names the binding ceiling.
func TestDecisionLogCrawlDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := testserver.NewTest(t, oneHost(testserver.Policy{Robots: testserver.Robots{Body: "User-agent: *\nCrawl-delay: 1\n"}}))
		logger, records := logRecords(t, slog.LevelInfo)
		c, ctrl := newCollector(t, srv, polite.Config{Logger: logger})
		crawl(t, c, 2, 10*time.Second, srv.HostURL("a.test"))
		recs := records()
		assert.Empty(t, inOrder(story(recs, "a.test"), []string{"robots crawl-delay", "ceiling crawl-delay"}))
		for _, r := range recs {
			if r["msg"] == "robots" {
				assert.Equal(t, float64(time.Second), r["crawl_delay"], "durations are nanoseconds in JSON")
				assert.Equal(t, "crawl-delay", r["ceiling"])
			}
		}
		snap, ok := ctrl.Snapshot("a.test")
		require.True(t, ok)
		assert.Equal(t, polite.CeilingCrawlDelay, snap.Ceiling)
		assert.InDelta(t, 1/1.01, snap.CeilingRate, 1e-9, "1 s plus 1 % headroom")
		assert.Equal(t, snap.CeilingRate, snap.Rate)
	})
}

// With a logger that takes nothing at Info, the decision log costs the
// hot path no allocation.
func TestLogOffAllocatesNothing(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := polite.New(polite.Config{Logger: quiet, Default: polite.Rule{InitialRate: 1e12, MaxConcurrency: 1 << 20, StartConcurrency: 1 << 20}})
	require.NoError(t, err)
	req, _ := http.NewRequest("GET", "http://a.test/page/1", nil)
	ctx := context.Background()
	p, _ := c.Acquire(ctx, req)
	p.Record(okResp, nil)
	allocs := testing.AllocsPerRun(1000, func() {
		p, err := c.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		p.Record(okResp, nil)
	})
	assert.Zero(t, allocs)
}

// A logger's level is obeyed: a crawl whose concurrency limit climbs
// writes its additive increases at Debug, which a Debug logger receives
// and an Info logger never does.
func TestDecisionLogLevel(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		t.Run(level.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := testserver.NewTest(t, oneHost(testserver.Policy{Latency: testserver.Latency{Base: 100 * time.Millisecond}}))
				logger, records := logRecords(t, level)
				c, _ := newCollector(t, srv, polite.Config{Robots: new(false), Logger: logger})
				crawl(t, c, 30, 20*time.Second, srv.HostURL("a.test"))
				debug := 0
				for _, r := range records() {
					if r["level"] == "DEBUG" {
						debug++
					}
				}
				if level == slog.LevelDebug {
					assert.Contains(t, story(records(), "a.test"), "increase additive", "the limit climbed, at Debug")
					assert.Positive(t, debug)
				} else {
					assert.Zero(t, debug, "an Info logger gets no Debug line")
				}
			})
		})
	}
}

// panicky is a slog handler that panics in Enabled or in Handle.
type panicky struct{ inEnabled bool }

func (p panicky) Enabled(context.Context, slog.Level) bool {
	if p.inEnabled {
		panic("handler bug")
	}
	return true
}
func (p panicky) Handle(context.Context, slog.Record) error { panic("log sink failed") }
func (p panicky) WithAttrs([]slog.Attr) slog.Handler        { return p }
func (p panicky) WithGroup(string) slog.Handler             { return p }

// A Logger whose handler panics costs its records, not the crawl: before,
// a panic in Handle, called after a slot was granted, left that slot
// taken for good (with MaxConcurrency 1, every later request waited until
// its context ended), and one in Enabled, called with the controller's
// lock held, left the controller locked. The first panic is reported by
// Err.
func TestPanickingLogHandler(t *testing.T) {
	for _, inEnabled := range []bool{false, true} {
		t.Run(map[bool]string{false: "Handle", true: "Enabled"}[inEnabled], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctrl, err := polite.New(polite.Config{Logger: slog.New(panicky{inEnabled}), Robots: new(false), JitterSeed: 1,
					Default: polite.Rule{MaxConcurrency: 1}})
				require.NoError(t, err)
				req, _ := http.NewRequest(http.MethodGet, "http://a.test/", nil)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for i := range 3 {
					p, err := ctrl.Acquire(ctx, req)
					require.NoError(t, err, "request %d", i)
					p.Record(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}}, nil)
				}
				r := ctrl.Report()
				assert.Len(t, r.Scopes, 1, "the controller is not left locked")
				assert.ErrorContains(t, ctrl.Err(), "Logger's handler panicked")
			})
		})
	}
}
