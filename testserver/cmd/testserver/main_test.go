package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/colly-polite/polite/testserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &stdout, &stderr))
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	new(options).flags(fs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		assert.Regexp(t, `\n  -`+f.Name+`[ \n]`, stderr.String(), f.Name)
	})
	assert.GreaterOrEqual(t, n, 25)
	assert.Contains(t, stderr.String(), `"-rate N" alone is a fixed window`)
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined"},
		{[]string{"-rate", "x"}, "invalid value"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-rate", "-1"}, "whole number >= 1"},
		{[]string{"-rate", "2.5"}, "whole number >= 1"},
		{[]string{"-kind", "leaky"}, `unknown -kind "leaky"`},
		{[]string{"-kind", "token"}, "-rate > 0"},
		{[]string{"-kind", "token", "-rate", "5", "-burst", "0"}, "Burst >= 1"},
		{[]string{"-kind", "fixed"}, "needs -rate or -n"},
		{[]string{"-kind", "concurrency"}, "-max-concurrent >= 1"},
		{[]string{"-rate", "5", "-window", "0"}, "Window > 0"},
		{[]string{"-latency", "-1s"}, "Latency.Base"},
		{[]string{"-rtt", "-1s"}, "Latency.RTT"},
		{[]string{"-kind", "pool"}, "worker pool needs -max-concurrent >= 1"},
		{[]string{"-queue", "5"}, "worker pool needs -max-concurrent >= 1"},
		{[]string{"-kind", "pool", "-max-concurrent", "2", "-queue", "-1"}, "negative Queue"},
		{[]string{"-rate", "5", "-queue", "3"}, "-queue is for a worker pool"},
		{[]string{"-kind", "pool", "-max-concurrent", "2", "-schedule", "10s=0"}, "worker pool needs"},
		{[]string{"-retry-after", "later"}, `-retry-after "later"`},
		{[]string{"-rate", "5", "-ban-after", "-1"}, "Ban.After"},
		{[]string{"-robots-status", "700"}, "Robots.Status"},
		{[]string{"-hosts", "0"}, "-hosts must be >= 1"},
		{[]string{"-pages", "0"}, "-pages and -fanout"},
		{[]string{"-schedule", "10s=5"}, "-schedule needs a limit"},
		{[]string{"-rate", "5", "-schedule", "10s"}, "want AT=CAP"},
		{[]string{"-rate", "5", "-schedule", "x=5"}, "invalid duration"},
		{[]string{"-rate", "5", "-schedule", "10s=1.5"}, "whole number"},
		{[]string{"-rate", "5", "-schedule", "20s=5,10s=3"}, "Schedule[1]"},
		{[]string{"-adversary", "flood"}, `-adversary "flood"`},
		{[]string{"-adversary", "hang", "-adversary-bytes", "3"}, "does not use"},
		{[]string{"-adversary", "reset", "-drip-interval", "1s"}, "does not use"},
		{[]string{"-adversary", "drip", "-drip-interval", "-1s"}, "negative"},
		{[]string{"-quota-lie", "maybe"}, `-quota-lie "maybe"`},
		{[]string{"-quota-lie", "date", "-quota-headers"}, "set one of them"},
		{[]string{"-raw-retry-after", "5", "-retry-after", "date"}, "replaces -retry-after"},
		{[]string{"-raw-retry-after", "5\x01"}, "control character"},
		{[]string{"-robots-size", "3"}, "Robots.Size"},
		{[]string{"-robots-file", "/nonexistent/robots.txt"}, "-robots-file"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(context.Background(), tc.args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func parse(t *testing.T, args ...string) testserver.Config {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.flags(fs)
	require.NoError(t, fs.Parse(args))
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg, err := o.config(set)
	require.NoError(t, err)
	return cfg
}

func TestFlagsToPolicy(t *testing.T) {
	cfg := parse(t, "-rate", "30", "-latency", "350ms")
	require.Len(t, cfg.Hosts, 1)
	p := cfg.Hosts["a.test"]
	assert.Equal(t, testserver.Limit{Kind: testserver.FixedWindow, N: 30, Window: time.Second}, p.Limit)
	assert.Equal(t, 350*time.Millisecond, p.Latency.Base)
	assert.Nil(t, p.Ban)
	assert.Equal(t, testserver.Loopback, cfg.Network)

	p = parse(t, "-kind", "gcra", "-rate", "5", "-burst", "2", "-count-rejected", "-retry-after", "date", "-quota-headers").Hosts["a.test"]
	assert.Equal(t, testserver.Limit{Kind: testserver.TokenBucket, Rate: 5, Burst: 2, CountRejected: true}, p.Limit)
	assert.Equal(t, testserver.Excess{RetryAfter: testserver.RetryAfterHTTPDate, QuotaHeaders: true}, p.Excess)

	p = parse(t, "-kind", "sliding", "-n", "10", "-window", "2s").Hosts["a.test"]
	assert.Equal(t, testserver.Limit{Kind: testserver.SlidingWindow, N: 10, Window: 2 * time.Second}, p.Limit)

	p = parse(t, "-max-concurrent", "8", "-excess-status", "429", "-retry-after", "none").Hosts["a.test"]
	assert.Equal(t, testserver.Limit{Kind: testserver.Concurrency, MaxConcurrent: 8}, p.Limit)
	assert.Equal(t, testserver.Excess{Status: 429, RetryAfter: testserver.RetryAfterNone}, p.Excess)

	p = parse(t, "-kind", "pool", "-max-concurrent", "8", "-queue", "100", "-rtt", "50ms", "-latency", "100ms").Hosts["a.test"]
	assert.Equal(t, testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 8, Queue: 100}, p.Limit)
	assert.Equal(t, testserver.Latency{RTT: 50 * time.Millisecond, Base: 100 * time.Millisecond}, p.Latency)
	assert.Equal(t, testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 4, Queue: 10},
		parse(t, "-max-concurrent", "4", "-queue", "10").Hosts["a.test"].Limit, "-queue makes a pool")
	assert.Equal(t, testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 4},
		parse(t, "-kind", "workerpool", "-max-concurrent", "4").Hosts["a.test"].Limit)
	assert.Equal(t, time.Second, parse(t, "-rtt", "1s").Hosts["a.test"].Latency.RTT)

	p = parse(t, "-kind", "pool", "-max-concurrent", "2", "-queue", "5", "-schedule", "10s=8").Hosts["a.test"]
	assert.Equal(t, []testserver.Step{
		{At: 10 * time.Second, Limit: testserver.Limit{Kind: testserver.WorkerPool, MaxConcurrent: 8, Queue: 5}},
	}, p.Schedule)

	p = parse(t, "-rate", "40", "-schedule", "10s=10, 20s=40").Hosts["a.test"]
	assert.Equal(t, []testserver.Step{
		{At: 10 * time.Second, Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 10, Window: time.Second}},
		{At: 20 * time.Second, Limit: testserver.Limit{Kind: testserver.FixedWindow, N: 40, Window: time.Second}},
	}, p.Schedule)

	p = parse(t, "-ban-after", "5", "-ban-for", "30s", "-crawl-delay", "2s", "-robots-status", "503",
		"-disallow", "/a, /b", "-pages", "10", "-fanout", "2", "-jitter", "10ms", "-per-inflight", "5ms").Hosts["a.test"]
	assert.Equal(t, &testserver.Ban{After: 5, Within: time.Minute, For: 30 * time.Second}, p.Ban)
	assert.Equal(t, testserver.Robots{Status: 503, CrawlDelay: 2 * time.Second, Disallow: []string{"/a", "/b"}}, p.Robots)
	assert.Equal(t, testserver.Site{Pages: 10, FanOut: 2}, p.Site)
	assert.Equal(t, testserver.Latency{Jitter: 10 * time.Millisecond, PerInFlight: 5 * time.Millisecond}, p.Latency)
	assert.Equal(t, testserver.Limit{}, p.Limit)

	p = parse(t, "-adversary", "drip", "-adversary-bytes", "10", "-excess-close", "-quota-lie", "epoch",
		"-raw-retry-after", "-1", "-raw-retry-after", "Fri, 31 Dec 9999 23:59:59 GMT",
		"-robots-size", "10485760", "-robots-type", "text/html").Hosts["a.test"]
	assert.Equal(t, testserver.Adversary{Kind: testserver.DripBody, Bytes: 10, Interval: time.Second}, p.Adversary)
	assert.Equal(t, testserver.Excess{RawRetryAfter: []string{"-1", "Fri, 31 Dec 9999 23:59:59 GMT"},
		CloseConnection: true, QuotaLie: testserver.QuotaLieResetEpoch}, p.Excess)
	assert.Equal(t, testserver.Robots{Status: 200, ContentType: "text/html", Size: 10 << 20}, p.Robots)
	for flag, kind := range map[string]testserver.AdversaryKind{"reset": testserver.ResetMidBody, "hang": testserver.Hang, "none": testserver.NoAdversary} {
		assert.Equal(t, testserver.Adversary{Kind: kind}, parse(t, "-adversary", flag).Hosts["a.test"].Adversary)
	}
	assert.Equal(t, testserver.Adversary{Kind: testserver.DripBody, Interval: 5 * time.Millisecond},
		parse(t, "-adversary", "drip", "-drip-interval", "5ms").Hosts["a.test"].Adversary)
	for flag, mode := range map[string]testserver.QuotaLieMode{"zero": testserver.QuotaLieResetZero, "date": testserver.QuotaLieResetDate, "none": testserver.NoQuotaLie} {
		assert.Equal(t, mode, parse(t, "-quota-lie", flag).Hosts["a.test"].Excess.QuotaLie)
	}
	file := filepath.Join(t.TempDir(), "robots.txt")
	require.NoError(t, os.WriteFile(file, []byte("\ufeffUser-agent: *\nCrawl-delay: abc\n"), 0o600))
	assert.Equal(t, "\ufeffUser-agent: *\nCrawl-delay: abc\n", parse(t, "-robots-file", file).Hosts["a.test"].Robots.Body)

	cfg = parse(t, "-hosts", "3", "-seed", "7")
	assert.Len(t, cfg.Hosts, 3)
	assert.Contains(t, cfg.Hosts, "c.test")
	assert.Equal(t, int64(7), cfg.Seed)
}

// A real run on loopback: the URLs are printed, the hosts answer, and the
// summary follows the cancellation. Nothing sleeps.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"-rate", "1", "-hosts", "2"}, pw, &stderr)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var urls []string
	for range 2 {
		require.True(t, lines.Scan())
		host, url, ok := strings.Cut(lines.Text(), " ")
		require.True(t, ok, lines.Text())
		assert.Contains(t, []string{"a.test", "b.test"}, host)
		urls = append(urls, url)
	}
	client := &http.Client{Transport: &http.Transport{}}
	for _, want := range []int{200, 429} {
		resp, err := client.Get(urls[1] + "/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode)
	}
	client.CloseIdleConnections()
	cancel()
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	assert.Equal(t, 0, <-code, stderr.String())
	require.Len(t, rest, 2)
	assert.Equal(t, "a.test: 0 requests; max in flight 0; pause violations 0; bans 0; robots.txt 0", rest[0])
	assert.Equal(t, "b.test: 2 requests, 1×200, 1×429; max in flight 1; pause violations 0; bans 0; robots.txt 0", rest[1])
}

func TestSummary(t *testing.T) {
	assert.Equal(t, "a.test: 3 requests, 3×200; max in flight 1; max queued 2; pause violations 0; bans 0; robots.txt 0",
		summary("a.test", testserver.Stats{Requests: 3, ByStatus: map[int]int{200: 3}, MaxInFlight: 1, MaxQueued: 2}))
}

func TestRunDuration(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-duration", "1ns"}, &stdout, &stderr))
	assert.Regexp(t, `^a\.test http://127\.0\.0\.1:\d+\na\.test: 0 requests`, stdout.String())
}
