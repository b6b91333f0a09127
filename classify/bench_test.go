package classify

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func BenchmarkRetryAfterSeconds(b *testing.B) {
	h := http.Header{"Retry-After": {"120"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := RetryAfter(h, now); !ok {
			b.Fatal("not ok")
		}
	}
}

func BenchmarkRetryAfterDate(b *testing.B) {
	for _, v := range []struct{ name, value string }{
		{"IMF", now.Add(time.Minute).Format(http.TimeFormat)},
		{"RFC850", now.Add(time.Minute).Format(time.RFC850)},
		{"ANSIC", now.Add(time.Minute).Format(time.ANSIC)},
	} {
		b.Run(v.name, func(b *testing.B) {
			h := http.Header{"Retry-After": {v.value}}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := RetryAfter(h, now); !ok {
					b.Fatal("not ok")
				}
			}
		})
	}
}

func BenchmarkRetryAfterList(b *testing.B) {
	for _, v := range []struct{ name, value string }{
		{"seconds", "3, 5"},
		{"date-and-seconds", now.Add(time.Minute).Format(http.TimeFormat) + ", 120"},
	} {
		b.Run(v.name, func(b *testing.B) {
			h := http.Header{"Retry-After": {v.value}}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := RetryAfter(h, now); !ok {
					b.Fatal("not ok")
				}
			}
		})
	}
}

// BenchmarkRetryAfterServerDate measures the realistic response, which
// carries Date: delay-seconds never parse it, a date parses it once.
func BenchmarkRetryAfterServerDate(b *testing.B) {
	date := now.Format(http.TimeFormat)
	for _, v := range []struct{ name, value string }{
		{"seconds", "120"},
		{"IMF", now.Add(time.Minute).Format(http.TimeFormat)},
	} {
		b.Run(v.name, func(b *testing.B) {
			h := http.Header{"Retry-After": {v.value}, "Date": {date}}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := RetryAfter(h, now); !ok {
					b.Fatal("not ok")
				}
			}
		})
	}
}

func BenchmarkParseQuota(b *testing.B) {
	for _, c := range []struct {
		name string
		h    http.Header
	}{
		{"ratelimit", header("RateLimit", `"default";r=50;t=30`, "RateLimit-Policy", `"default";q=100;w=60`)},
		{"ratelimit-draft07", header("RateLimit", "limit=100, remaining=50, reset=5", "RateLimit-Policy", "100;w=60")},
		{"github", header("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Used", "1",
			"X-RateLimit-Reset", "1750000000", "X-RateLimit-Resource", "core")},
		{"shopify", header("X-Shopify-Shop-Api-Call-Limit", "32/40")},
		{"none", header("Content-Type", "text/html", "Cache-Control", "max-age=60")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseQuota(c.h, now)
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	plain := http.Header{"Content-Type": {"text/html"}}
	cases := []struct {
		name string
		c    *Classifier
		o    Outcome
	}{
		{"200", nil, Outcome{Status: 200, Header: plain}},
		{"429", nil, Outcome{Status: 429, Header: http.Header{"Retry-After": {"5"}}}},
		{"403-challenge", nil, Outcome{Status: 403, Header: http.Header{"Cf-Mitigated": {"challenge"}}}},
		{"timeout", nil, Outcome{Err: urlErr(context.DeadlineExceeded)}},
		{"refused", nil, Outcome{Err: urlErr(opErr("dial", errRefused))}},
		{"body-markers-4KiB", &Classifier{Detectors: []Detector{CloudflareChallenge, BodyMarkers("access denied", "captcha")}},
			Outcome{Status: 200, Header: plain, Body: htmlPage(4096)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.c.Classify(c.o)
				}
			})
		})
	}
}

// htmlPage returns n bytes of ordinary markup and prose, dense in the
// first letters of the benchmarked markers.
func htmlPage(n int) []byte {
	const chunk = `<div class="article"><p>Crawlers can access a catalogue of data; ` +
		`Access is granted to all. <a href="/cat/accessories">Accessories</a></p></div>` + "\n"
	return []byte(strings.Repeat(chunk, n/len(chunk)+1)[:n])
}
