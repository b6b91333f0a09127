package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/colly-polite/polite/classify"
)

func ExampleResponse() {
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}
	c := classify.Response(resp, nil)
	fmt.Println(c, c.Signal())

	// What http.Client.Do returns when its Timeout expires.
	err := &url.Error{Op: "Get", URL: "https://example.com/", Err: context.DeadlineExceeded}
	c = classify.Response(nil, err)
	fmt.Println(c, c.Signal())
	// Output:
	// throttled true
	// transport-failure true
}

func ExampleStatus() {
	// What Colly's OnError reports: the status and an error made of its text.
	for _, status := range []int{204, 401, 403, 404, 503, 522} {
		fmt.Println(status, classify.Status(status, nil, errors.New(http.StatusText(status))))
	}
	// Output:
	// 204 success
	// 401 neutral
	// 403 blocked
	// 404 neutral
	// 503 overloaded
	// 522 overloaded
}

func ExampleClassify() {
	bodyCut := &url.Error{Op: "Get", URL: "https://example.com/", Err: io.ErrUnexpectedEOF}
	fmt.Println(classify.Classify(classify.Outcome{Status: 200, Err: bodyCut}))

	// A GitHub rate-limit 403 is throttling, not a block.
	h := http.Header{}
	h.Set("X-RateLimit-Remaining", "0")
	fmt.Println(classify.Classify(classify.Outcome{Status: 403, Header: h}))
	// Output:
	// transport-failure
	// throttled
}

func ExampleClassifier() {
	c := &classify.Classifier{
		Detectors: append([]classify.Detector{classify.BodyMarkers("Access Denied")},
			classify.DefaultDetectors...),
		Statuses: map[int]classify.Class{500: classify.Overloaded},
	}
	page := []byte("<html><title>ACCESS DENIED</title>...")
	fmt.Println(c.Classify(classify.Outcome{Status: 200, Body: page}))
	fmt.Println(c.Classify(classify.Outcome{Status: 500}))
	// Output:
	// blocked
	// overloaded
}

func ExampleParseRetryAfter() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"120",
		"Sun, 01 Jun 2025 12:01:30 GMT",
		"Sun, 06 Nov 1994 08:49:37 GMT", // in the past
		"3, 5",                          // two fields merged by a proxy
		"-1",
		"99999999999999999999",
	} {
		d, ok := classify.ParseRetryAfter(v, now)
		if d == classify.Forever {
			fmt.Println("forever", ok)
			continue
		}
		fmt.Println(d.Seconds(), ok)
	}
	// Output:
	// 120 true
	// 90 true
	// 0 true
	// 5 true
	// 0 false
	// forever true
}

func ExampleRetryAfter() {
	// The local clock runs an hour ahead of the server's.
	now := time.Date(2025, 6, 1, 13, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Date", "Sun, 01 Jun 2025 12:00:00 GMT")
	h.Set("Retry-After", "Sun, 01 Jun 2025 12:00:30 GMT")
	d, ok := classify.RetryAfter(h, now)
	fmt.Println(d.Seconds(), ok)

	h.Del("Date") // without it, the date is measured against now: past
	d, ok = classify.RetryAfter(h, now)
	fmt.Println(d.Seconds(), ok)
	// Output:
	// 30 true
	// 0 true
}

func ExampleParseQuota() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("RateLimit", `"default";r=50;t=30`)
	h.Set("RateLimit-Policy", `"default";q=100;w=60`)
	h.Set("X-RateLimit-Remaining", "7") // the IETF fields win
	q, ok := classify.ParseQuota(h, now)
	fmt.Println(ok, q.Source, q.Remaining, q.Limit, q.Reset.Seconds(), q.Window.Seconds())

	h = http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Reset", fmt.Sprint(now.Add(time.Hour).Unix())) // an epoch
	h.Set("X-RateLimit-Resource", "core")
	q, ok = classify.ParseQuota(h, now)
	fmt.Println(ok, q.Source, q.Remaining, q.Limit, q.Reset.Seconds())
	// Output:
	// true ratelimit 50 100 30 60
	// true github 4999 5000 3600
}
