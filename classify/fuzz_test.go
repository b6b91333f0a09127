package classify

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"120", "0", " 7 ", "\t5\t", "-1", "+5", "1.5", "abc", "", "   ",
		"9223372036", "9223372037", "99999999999999999999", "000000000000000000000000001",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 PST",
		"3, 5", "abc, 7", ", ,", "Sun, 06 Nov 1994 08:49:37 GMT, 120", "120, Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 5",
	} {
		f.Add(s, now.Unix())
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		at := time.Unix(nowUnix, 0)
		d, ok := ParseRetryAfter(v, at)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v < 0", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v with ok=false", v, d)
		}
		if d2, ok2 := ParseRetryAfter(" \t"+v+"\t ", at); d2 != d || ok2 != ok {
			t.Fatalf("padding changed %q: %v,%v vs %v,%v", v, d, ok, d2, ok2)
		}
		if d2, ok2 := RetryAfter(http.Header{"Retry-After": {v}}, at); d2 != d || ok2 != ok {
			t.Fatalf("RetryAfter(%q) = %v,%v; ParseRetryAfter = %v,%v", v, d2, ok2, d, ok)
		}
		// Delay-seconds agrees with strconv; beyond a Duration it is Forever.
		if s := trimOWS(v); s != "" && strings.Trim(s, "0123456789") == "" {
			n, err := strconv.ParseUint(s, 10, 64)
			want := Forever
			if err == nil && n <= uint64(MaxRetryAfterSeconds) {
				want = time.Duration(n) * time.Second
			}
			if !ok || d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v,%v; strconv says %d, %v", v, d, ok, n, err)
			}
		}
		// A list of v with itself, or with an invalid member, is v.
		if lastPieceIsWeekday(v) {
			return
		}
		for _, l := range []string{v + ", " + v, v + ",", v + ", x"} {
			if d2, ok2 := ParseRetryAfter(l, at); d2 != d || ok2 != ok {
				t.Fatalf("ParseRetryAfter(%q) = %v,%v; ParseRetryAfter(%q) = %v,%v", l, d2, ok2, v, d, ok)
			}
		}
	})
}

// FuzzRetryAfter checks RetryAfter on two field lines a and b and a Date:
// the result is the larger of the lines parsed alone against ServerNow,
// and so is the result of the one line "a, b" a proxy would merge them
// into.
func FuzzRetryAfter(f *testing.F) {
	date := now.Format(http.TimeFormat)
	for _, s := range [][3]string{
		{"3", "5", ""},
		{"abc", "7", date},
		{"Sun, 06 Nov 1994 08:49:37 GMT", "120", date},
		{"120", "Sunday, 06-Nov-94 08:49:37 GMT", "garbage"},
		{now.Add(30 * time.Second).Format(http.TimeFormat), "10", date},
		{now.Add(30 * time.Second).Format(time.ANSIC), "", now.Format(time.RFC850)},
		{"Fri, 31 Dec 9999 23:59:59 GMT", "9223372037", "Mon, 01 Jan 0001 00:00:00 GMT"},
		{", ,", "Sun", "Sun Nov  6 08:49:37 1994"},
	} {
		f.Add(s[0], s[1], s[2], now.Add(time.Hour).Unix())
	}
	f.Fuzz(func(t *testing.T, a, b, date string, nowUnix int64) {
		at := time.Unix(nowUnix, 0)
		h := http.Header{"Retry-After": {a, b}, "Date": {date}}
		d, ok := RetryAfter(h, at)
		if d < 0 || !ok && d != 0 {
			t.Fatalf("RetryAfter(%v) = %v,%v", h, d, ok)
		}
		base := ServerNow(h, at)
		if tm, err := http.ParseTime(trimOWS(date)); err == nil && !base.Equal(tm) || err != nil && !base.Equal(at) {
			t.Fatalf("ServerNow(Date: %q) = %v; http.ParseTime says %v, %v", date, base, tm, err)
		}
		da, oka := ParseRetryAfter(a, base)
		db, okb := ParseRetryAfter(b, base)
		want, wantOK := da, oka
		if okb && (!oka || db > da) {
			want, wantOK = db, true
		}
		if d != want || ok != wantOK {
			t.Fatalf("RetryAfter(%v) = %v,%v; lines alone give %v,%v and %v,%v", h, d, ok, da, oka, db, okb)
		}
		if lastPieceIsWeekday(a) {
			return // "a, b" may read a's weekday and b's start as one date
		}
		if dm, okm := RetryAfter(http.Header{"Retry-After": {a + ", " + b}, "Date": {date}}, at); dm != d || okm != ok {
			t.Fatalf("merged %q = %v,%v; as two lines %v,%v", a+", "+b, dm, okm, d, ok)
		}
	})
}

// lastPieceIsWeekday reports whether the last comma-separated piece of v is
// a day name, which a following ", ..." may join into a date.
func lastPieceIsWeekday(v string) bool {
	return isWeekday(trimOWS(v[strings.LastIndexByte(v, ',')+1:]))
}

// headerFrom builds a header from "Name: value" lines, so that the fuzzer
// explores field names as well as values.
func headerFrom(raw string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(raw, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		h.Add(http.CanonicalHeaderKey(strings.TrimSpace(name)), value)
	}
	return h
}

func FuzzParseQuota(f *testing.F) {
	for _, s := range []string{
		"RateLimit: \"default\";r=50;t=30\nRateLimit-Policy: \"default\";q=100;w=60",
		"RateLimit: \"permin\";r=5;t=20, \"perhr\";r=900;t=3000\nRateLimit-Policy: \"permin\";q=50;w=60,\"perhr\";q=1000;w=3600",
		"RateLimit: \"b\";r=1000;t=10\nRateLimit-Policy: \"b\";q=65535;qu=\"content-bytes\";w=10;pk=:sdfjLJUOUH==:",
		"RateLimit: limit=100, remaining=50, reset=5\nRateLimit-Policy: 100;w=60",
		"RateLimit-Limit: 10, 10;w=1, 50;w=60\nRateLimit-Remaining: 9\nRateLimit-Reset: 1",
		"X-RateLimit-Limit: 60\nX-RateLimit-Remaining: 59\nX-RateLimit-Reset: 1750000000",
		"X-RateLimit-Limit: 60\nX-RateLimit-Used: 61\nX-RateLimit-Reset: 1750000000123",
		"x-ratelimit-remaining: 598.0\nx-ratelimit-used: 2\nx-ratelimit-reset: 396\nx-ratelimit-resource: core",
		"X-RateLimit-Remaining: 1\nX-RateLimit-Reset-After: 64.57",
		"X-RateLimit-Remaining: 1\nX-RateLimit-Reset: Sun, 06 Nov 1994 08:49:37 GMT",
		"x-rate-limit-limit: 900\nx-rate-limit-remaining: 899\nx-rate-limit-reset: 1750000900",
		"X-Shopify-Shop-Api-Call-Limit: 32/40",
		"RateLimit: \"d;r=5\nX-RateLimit-Remaining: 99999999999999999999",
		"RateLimit: (\"a\" b);r=1, %\"%c3%bc\";r=2, :aGk=:;r=3, ?1;r=4, @5;r=6",
		"Date: Sun, 01 Jun 2025 12:00:00 GMT\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: 1748779230",
		"Date: Sunday, 01-Jun-25 12:00:00 GMT\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: Sun, 01 Jun 2025 12:00:30 GMT",
		"Date: soon\nRateLimit: \"d\";r=0;t=1748779230\nx-rate-limit-remaining: 1\nx-rate-limit-reset: 1748779230000",
		"",
	} {
		f.Add(s, now.Unix())
	}
	f.Fuzz(func(t *testing.T, raw string, nowUnix int64) {
		h := headerFrom(raw)
		at := time.Unix(nowUnix, 0)
		q, ok := ParseQuota(h, at)
		checkQuota(t, q, ok)
		if q2, ok2 := ParseQuota(h, at); q2 != q || ok2 != ok {
			t.Fatalf("not deterministic: %+v,%v then %+v,%v", q, ok, q2, ok2)
		}
		// Date only moves the clock absolute resets are measured against.
		noDate := h.Clone()
		delete(noDate, "Date")
		if q2, ok2 := ParseQuota(noDate, ServerNow(h, at)); q2 != q || ok2 != ok {
			t.Fatalf("with Date %+v,%v; without, against ServerNow, %+v,%v", q, ok, q2, ok2)
		}
		// the fast pre-check never hides a quota a family would find
		if !mayHaveQuota(h) {
			for i, fam := range quotaFamilies {
				if _, ok := fam(h, at); ok {
					t.Fatalf("family %d finds a quota the pre-check missed: %v", i, h)
				}
			}
		}
	})
}

func FuzzStructuredFields(f *testing.F) {
	for _, s := range []string{
		`"default";r=50;t=30`, `"a";q=1;w=2, "b";q=3;qu="content-bytes"`, `limit=1, remaining=2, reset=3`,
		`1.5, -0.001, ?1, @-1, :aGk=:, %"%c3%bc", tok/en:x`, `("a" b);p=1, c`, `a;b="x\"y\\z"`,
		`-999999999999999`, `123456789012.123`, `a,`, `(`, `"`, `%"%`, `:`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, ok := parseSFList(s)
		if !ok && l != nil {
			t.Fatalf("failed list parse returned %v", l)
		}
		for i := range l {
			checkSFValue(t, l[i].val)
			for _, p := range l[i].params {
				checkSFValue(t, p.val)
			}
		}
		if l2, ok2 := parseSFList(s + " "); ok2 != ok || len(l2) != len(l) {
			t.Fatalf("trailing space changed the parse of %q", s)
		}
		d, ok := parseSFDict(s)
		if !ok && d != nil {
			t.Fatalf("failed dict parse returned %v", d)
		}
		sfRoundTrip(t, s)
		seen := map[string]bool{}
		for _, m := range d {
			if seen[m.key] {
				t.Fatalf("duplicate key %q in %q", m.key, s)
			}
			seen[m.key] = true
			checkSFValue(t, m.val)
		}
	})
}

func checkSFValue(t *testing.T, v sfValue) {
	t.Helper()
	const maxInt = 999_999_999_999_999
	switch v.typ {
	case sfInteger, sfDate, sfDecimal:
		if v.num > maxInt || v.num < -maxInt {
			t.Fatalf("number out of range: %+v", v)
		}
	case sfString:
		for i := 0; i < len(v.str); i++ {
			if c := v.str[i]; c < 0x20 || c >= 0x7f {
				t.Fatalf("string holds byte %#x: %+v", c, v)
			}
		}
	case sfBoolean:
		if v.num != 0 && v.num != 1 {
			t.Fatalf("boolean %+v", v)
		}
	case sfToken, sfBytes, sfDisplayString, sfInnerList:
	default:
		t.Fatalf("bad type %+v", v)
	}
}

// fuzzErrors are the errors FuzzClassify chooses from.
var fuzzErrors = []error{
	nil,
	context.Canceled,
	context.DeadlineExceeded,
	io.EOF,
	io.ErrUnexpectedEOF,
	errRefused,
	urlErr(opErr("read", errReset)),
	timeoutError{true},
	timeoutError{false},
	errors.New("Too Many Requests"),
	&url.Error{Op: "Get", URL: "http://x", Err: context.Canceled},
}

func FuzzClassify(f *testing.F) {
	f.Add(200, "", []byte(nil), uint8(0))
	f.Add(429, "Retry-After: 5", []byte("slow down"), uint8(9))
	f.Add(403, "Cf-Mitigated: challenge", []byte("<title>Just a moment...</title>"), uint8(0))
	f.Add(403, "X-RateLimit-Remaining: 0", []byte(nil), uint8(0))
	f.Add(503, "", []byte("Access Denied"), uint8(4))
	f.Add(0, "", []byte(nil), uint8(1))
	f.Add(200, "", []byte(nil), uint8(4))
	f.Add(-5, "Retry-After: x", []byte{0xff, 0xfe}, uint8(200))
	c := &Classifier{Detectors: []Detector{CloudflareChallenge, BodyMarkers("access denied", "доступ")}}
	f.Fuzz(func(t *testing.T, status int, rawHeader string, body []byte, errKind uint8) {
		h := headerFrom(rawHeader)
		err := fuzzErrors[int(errKind)%len(fuzzErrors)]
		o := Outcome{Status: status, Header: h, Body: body, Err: err}
		got := c.Classify(o)
		if got > Canceled {
			t.Fatalf("invalid class %d", got)
		}
		if again := c.Classify(o); again != got {
			t.Fatalf("not deterministic: %v then %v", got, again)
		}
		if got == Canceled && !errors.Is(err, context.Canceled) {
			t.Fatalf("Canceled without context.Canceled: %+v", o)
		}
		// A status of 400 or more decides whatever the error says.
		if status >= 400 {
			if noErr := c.Classify(Outcome{Status: status, Header: h, Body: body}); noErr != got {
				t.Fatalf("error changed the class of status %d: %v vs %v", status, got, noErr)
			}
		}
		// The convenience forms agree with the zero Classifier.
		want := Classify(Outcome{Status: status, Header: h, Err: err})
		if s := Status(status, h, err); s != want {
			t.Fatalf("Status = %v, Classify = %v", s, want)
		}
		if r := Response(&http.Response{StatusCode: status, Header: h}, err); r != want {
			t.Fatalf("Response = %v, Classify = %v", r, want)
		}
	})
}
