package classify

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseQuota(t *testing.T) {
	epoch := func(d time.Duration) string { return fmt.Sprint(now.Add(d).Unix()) }
	q := func(limit, remaining int64, reset, window time.Duration, src string) Quota {
		return Quota{Limit: limit, Remaining: remaining, Reset: reset, Window: window, Source: src}
	}
	const (
		rl = SourceRateLimit
		xr = SourceXRateLimit
		gh = SourceGitHub
		x  = SourceX
		sh = SourceShopify
	)
	tests := []struct {
		name   string
		h      http.Header
		want   Quota
		wantOK bool
	}{
		// IETF draft-08 and later.
		{"draft-11", header("RateLimit", `"default";r=50;t=30`, "RateLimit-Policy", `"default";q=100;w=60`),
			q(100, 50, 30*time.Second, time.Minute, rl), true},
		{"draft-11 no policy", header("RateLimit", `"default";r=50;t=30`), q(-1, 50, 30*time.Second, 0, rl), true},
		{"draft-11 no t", header("RateLimit", `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`), q(-1, 999, 0, 0, rl), true},
		{"draft-11 token name", header("RateLimit", `default;r=5;t=1`, "RateLimit-Policy", `default;q=10;w=1`),
			q(10, 5, time.Second, time.Second, rl), true},
		{"draft-11 policy name mismatch", header("RateLimit", `"a";r=5;t=1`, "RateLimit-Policy", `"b";q=10;w=1`),
			q(-1, 5, time.Second, 0, rl), true},
		{"draft-11 spaces after semicolons", header("RateLimit", `"100-in-15min"; r=25; t=5`,
			"RateLimit-Policy", `"100-in-15min"; q=100; w=900; pk=:ZDQ5MDI=:`),
			q(100, 25, 5*time.Second, 900*time.Second, rl), true},
		{"draft-11 surrounding whitespace", header("RateLimit", "  \"d\";r=5;t=2 \t", "RateLimit-Policy", ` "d";q=9 `),
			q(9, 5, 2*time.Second, 0, rl), true},
		{"draft-11 fewest remaining wins", header("RateLimit", `"permin";r=5;t=20, "perhr";r=900;t=3000`,
			"RateLimit-Policy", `"permin";q=50;w=60,"perhr";q=1000;w=3600`),
			q(50, 5, 20*time.Second, time.Minute, rl), true},
		{"draft-11 tie takes later reset", header("RateLimit", `"a";r=0;t=1, "b";r=0;t=3600`),
			q(-1, 0, time.Hour, 0, rl), true},
		{"draft-11 split over lines", header("RateLimit", `"a";r=5;t=1`, "RateLimit", `"b";r=3;t=2`),
			q(-1, 3, 2*time.Second, 0, rl), true},
		{"draft-11 policy split over lines", header("RateLimit", `"b";r=3`, "RateLimit-Policy", `"a";q=5`, "RateLimit-Policy", `"b";q=7;w=10`),
			q(7, 3, 0, 10*time.Second, rl), true},
		{"draft-11 content-bytes policy skipped", header(
			"RateLimit", `"bytes";r=1000;t=10, "req";r=40;t=5`,
			"RateLimit-Policy", `"bytes";q=65535;qu="content-bytes";w=10, "req";q=50;w=10`),
			q(50, 40, 5*time.Second, 10*time.Second, rl), true},
		{"draft-11 explicit requests unit", header("RateLimit", `"r";r=1`, "RateLimit-Policy", `"r";q=2;qu="requests"`),
			q(2, 1, 0, 0, rl), true},
		// a Token, as servers send names unquoted too (before, the whole
		// quota was dropped)
		{"draft-11 requests unit unquoted", header("RateLimit", `"r";r=0;t=30`, "RateLimit-Policy", `"r";q=100;w=60;qu=requests`),
			q(100, 0, 30*time.Second, 60*time.Second, rl), true},
		{"draft-11 only non-request policies", header("RateLimit", `"c";r=3`, "RateLimit-Policy", `"c";q=4;qu="concurrent-requests"`),
			Quota{}, false},
		{"draft-11 r above q clamps", header("RateLimit", `"d";r=500`, "RateLimit-Policy", `"d";q=100;w=60`),
			q(100, 100, 0, time.Minute, rl), true},
		{"draft-11 r=0", header("RateLimit", `"d";r=0;t=10`), q(-1, 0, 10*time.Second, 0, rl), true},
		{"draft-11 epoch in t", header("RateLimit", `"d";r=1;t=`+epoch(40*time.Second)), q(-1, 1, 40*time.Second, 0, rl), true},
		{"draft-11 malformed member ignored", header("RateLimit", `"a";r=abc, "b";r=7`), q(-1, 7, 0, 0, rl), true},
		{"draft-11 member without r ignored", header("RateLimit", `"a";t=5, "b";r=7`), q(-1, 7, 0, 0, rl), true},
		{"draft-11 negative r ignored", header("RateLimit", `"a";r=-1`), Quota{}, false},
		{"draft-11 decimal r ignored", header("RateLimit", `"a";r=1.5`), Quota{}, false},
		{"draft-11 bad t drops member", header("RateLimit", `"a";r=1;t="soon"`), Quota{}, false},
		{"draft-11 negative t drops member", header("RateLimit", `"a";r=1;t=-4`), Quota{}, false},
		{"draft-11 integer name ignored", header("RateLimit", `5;r=1`), Quota{}, false},
		{"draft-11 huge w ignored", header("RateLimit", `"d";r=1`, "RateLimit-Policy", `"d";q=5;w=999999999999999`),
			q(5, 1, 0, 0, rl), true},
		{"draft-11 zero w ignored", header("RateLimit", `"d";r=1`, "RateLimit-Policy", `"d";q=5;w=0`), q(5, 1, 0, 0, rl), true},
		{"draft-11 malformed policy ignored", header("RateLimit", `"d";r=1`, "RateLimit-Policy", `"d";q=5;w=`),
			q(-1, 1, 0, 0, rl), true},
		{"draft-11 unterminated string", header("RateLimit", `"default;r=5`), Quota{}, false},
		{"draft-11 trailing comma", header("RateLimit", `"d";r=5,`), Quota{}, false},
		{"draft-11 sixteen digits", header("RateLimit", `"d";r=1234567890123456`), Quota{}, false},
		{"draft-11 inner list member skipped", header("RateLimit", `("a" "b");r=1, "c";r=2`), q(-1, 2, 0, 0, rl), true},
		{"policy only", header("RateLimit-Policy", `"d";q=100;w=60`), Quota{}, false},

		// Draft-07 dictionary.
		{"draft-07", header("RateLimit", "limit=100, remaining=50, reset=5", "RateLimit-Policy", "100;w=60"),
			q(100, 50, 5*time.Second, time.Minute, rl), true},
		{"draft-07 several policies", header("RateLimit", "limit=10, remaining=1, reset=7", "RateLimit-Policy", "10;w=1, 50;w=60, 1000;w=3600"),
			q(10, 1, 7*time.Second, time.Second, rl), true},
		{"draft-07 no policy", header("RateLimit", "limit=100, remaining=50, reset=5"), q(100, 50, 5*time.Second, 0, rl), true},
		{"draft-07 no remaining", header("RateLimit", "limit=100, reset=5"), Quota{}, false},
		{"draft-07 bad reset ignored", header("RateLimit", "limit=100, remaining=3, reset=soon"), q(100, 3, 0, 0, rl), true},
		{"draft-07 bad limit ignored", header("RateLimit", `limit="x", remaining=3, reset=1`), q(-1, 3, time.Second, 0, rl), true},
		{"draft-07 duplicate key last wins", header("RateLimit", "remaining=9, remaining=4"), q(-1, 4, 0, 0, rl), true},

		// Drafts 00–06: separate fields.
		{"draft-06", header("RateLimit-Limit", "100", "RateLimit-Remaining", "99", "RateLimit-Reset", "60"),
			q(100, 99, time.Minute, 0, rl), true},
		{"draft-03 limit list", header("RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "9", "RateLimit-Reset", "1"),
			q(10, 9, time.Second, time.Second, rl), true},
		{"draft-00 window=", header("RateLimit-Limit", "100, 100;window=60", "RateLimit-Remaining", "9"),
			q(100, 9, 0, time.Minute, rl), true},
		{"draft-06 policy field", header("RateLimit-Limit", "50", "RateLimit-Remaining", "9", "RateLimit-Policy", "10;w=1, 50;w=60"),
			q(50, 9, 0, time.Minute, rl), true},
		{"draft-06 epoch reset", header("RateLimit-Remaining", "3", "RateLimit-Reset", epoch(2*time.Minute)),
			q(-1, 3, 2*time.Minute, 0, rl), true},
		{"draft-06 whitespace", header("RateLimit-Limit", " 100 ", "RateLimit-Remaining", "\t99 ", "RateLimit-Reset", " 60"),
			q(100, 99, time.Minute, 0, rl), true},
		{"draft-06 bad remaining", header("RateLimit-Limit", "100", "RateLimit-Remaining", "lots"), Quota{}, false},

		// X-RateLimit-*.
		{"x-ratelimit delta", header("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "59", "X-RateLimit-Reset", "30"),
			q(60, 59, 30*time.Second, 0, xr), true},
		{"x-ratelimit epoch", header("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "59", "X-RateLimit-Reset", epoch(2*time.Minute)),
			q(60, 59, 2*time.Minute, 0, xr), true},
		{"x-ratelimit epoch past", header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(-time.Hour)),
			q(-1, 0, 0, 0, xr), true},
		{"x-ratelimit epoch boundary", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "999999999"),
			q(-1, 1, 999999999*time.Second, 0, xr), true},
		{"x-ratelimit epoch first second", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1000000000"),
			q(-1, 1, 0, 0, xr), true},
		{"x-ratelimit epoch millis", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", fmt.Sprint(now.Add(1500*time.Millisecond).UnixMilli())),
			q(-1, 1, 1500*time.Millisecond, 0, xr), true},
		{"x-ratelimit fractional epoch", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", epoch(10*time.Second)+".25"),
			q(-1, 1, 10250*time.Millisecond, 0, xr), true},
		{"x-ratelimit fractional delta", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1.5"),
			q(-1, 1, 1500*time.Millisecond, 0, xr), true},
		{"x-ratelimit date reset", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", now.Add(time.Hour).Format(http.TimeFormat)),
			q(-1, 1, time.Hour, 0, xr), true},
		{"x-ratelimit reset-after preferred", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", epoch(time.Hour), "X-RateLimit-Reset-After", "64.57"),
			q(-1, 1, 64570*time.Millisecond, 0, xr), true},
		{"x-ratelimit bad reset-after falls back", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "5", "X-RateLimit-Reset-After", "x"),
			q(-1, 1, 5*time.Second, 0, xr), true},
		{"x-ratelimit bad reset ignored", header("X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "-3"),
			q(5, 1, 0, 0, xr), true},
		{"x-ratelimit overflowing reset ignored", header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "99999999999999999999"),
			q(-1, 1, 0, 0, xr), true},
		{"x-ratelimit whitespace", header("X-RateLimit-Limit", " 60 ", "X-RateLimit-Remaining", " 59\t", "X-RateLimit-Reset", " 30 "),
			q(60, 59, 30*time.Second, 0, xr), true},
		{"x-ratelimit only remaining", header("X-RateLimit-Remaining", "7"), q(-1, 7, 0, 0, xr), true},
		{"x-ratelimit remaining above limit clamps", header("X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "9"), q(5, 5, 0, 0, xr), true},
		{"x-ratelimit negative remaining", header("X-RateLimit-Limit", "-1", "X-RateLimit-Remaining", "-1"), Quota{}, false},
		{"x-ratelimit garbage remaining", header("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "abc"), Quota{}, false},
		{"x-ratelimit empty remaining", header("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", ""), Quota{}, false},
		{"x-ratelimit twenty digits", header("X-RateLimit-Remaining", "99999999999999999999"), Quota{}, false},
		{"x-ratelimit int64 overflow", header("X-RateLimit-Remaining", "9223372036854775808"), Quota{}, false},
		{"x-ratelimit repeated lines", header("X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "7"), q(-1, 5, 0, 0, xr), true},
		{"x-ratelimit comma list", header("X-RateLimit-Limit", "100, 1000", "X-RateLimit-Remaining", "5, 700"), q(100, 5, 0, 0, xr), true},
		{"x-ratelimit used only", header("X-RateLimit-Limit", "60", "X-RateLimit-Used", "45"), q(60, 15, 0, 0, xr), true},
		{"x-ratelimit used above limit", header("X-RateLimit-Limit", "60", "X-RateLimit-Used", "75"), q(60, 0, 0, 0, xr), true},
		{"x-ratelimit used without limit", header("X-RateLimit-Used", "45"), Quota{}, false},
		{"reddit decimals", header("X-Ratelimit-Remaining", "598.0", "X-Ratelimit-Used", "2", "X-Ratelimit-Reset", "396"),
			q(-1, 598, 396*time.Second, 0, xr), true},
		{"x-ratelimit fraction rounds down", header("X-Ratelimit-Remaining", "4.9"), q(-1, 4, 0, 0, xr), true},
		{"x-ratelimit bare dot", header("X-Ratelimit-Remaining", "4."), Quota{}, false},
		{"github", header("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Used", "1",
			"X-RateLimit-Reset", epoch(59*time.Minute), "X-RateLimit-Resource", "core"),
			q(5000, 4999, 59*time.Minute, 0, gh), true},
		{"github lower-case names", http.Header{
			http.CanonicalHeaderKey("x-ratelimit-limit"):     {"60"},
			http.CanonicalHeaderKey("x-ratelimit-remaining"): {"0"},
			http.CanonicalHeaderKey("x-ratelimit-reset"):     {epoch(10 * time.Minute)},
			http.CanonicalHeaderKey("x-ratelimit-resource"):  {"search"},
		}, q(60, 0, 10*time.Minute, 0, gh), true},

		// X (Twitter).
		{"x", header("x-rate-limit-limit", "900", "x-rate-limit-remaining", "899", "x-rate-limit-reset", epoch(15*time.Minute)),
			q(900, 899, 15*time.Minute, 0, x), true},
		{"x no reset", header("x-rate-limit-limit", "900", "x-rate-limit-remaining", "0"), q(900, 0, 0, 0, x), true},
		{"x bad remaining", header("x-rate-limit-limit", "900", "x-rate-limit-remaining", "none"), Quota{}, false},

		// Shopify.
		{"shopify", header("X-Shopify-Shop-Api-Call-Limit", "32/40"), q(40, 8, 0, 0, sh), true},
		{"shopify spaces", header("X-Shopify-Shop-Api-Call-Limit", " 32 / 40 "), q(40, 8, 0, 0, sh), true},
		{"shopify full", header("X-Shopify-Shop-Api-Call-Limit", "40/40"), q(40, 0, 0, 0, sh), true},
		{"shopify over", header("X-Shopify-Shop-Api-Call-Limit", "41/40"), q(40, 0, 0, 0, sh), true},
		{"shopify no slash", header("X-Shopify-Shop-Api-Call-Limit", "32"), Quota{}, false},
		{"shopify empty used", header("X-Shopify-Shop-Api-Call-Limit", "/40"), Quota{}, false},
		{"shopify empty limit", header("X-Shopify-Shop-Api-Call-Limit", "32/"), Quota{}, false},
		{"shopify garbage", header("X-Shopify-Shop-Api-Call-Limit", "a/b"), Quota{}, false},
		{"shopify negative", header("X-Shopify-Shop-Api-Call-Limit", "-1/40"), Quota{}, false},

		// Preference and fallback between families.
		{"IETF preferred over X-RateLimit", header("RateLimit", `"d";r=1;t=2`, "X-RateLimit-Remaining", "100", "X-RateLimit-Reset", "5"),
			q(-1, 1, 2*time.Second, 0, rl), true},
		{"new draft preferred over split fields", header("RateLimit", `"d";r=1`, "RateLimit-Remaining", "100"),
			q(-1, 1, 0, 0, rl), true},
		{"malformed IETF falls back", header("RateLimit", `"d";r=oops`, "X-RateLimit-Remaining", "100", "X-RateLimit-Reset", "5"),
			q(-1, 100, 5*time.Second, 0, xr), true},
		{"unparseable IETF falls back", header("RateLimit", `"d;r=1`, "X-Shopify-Shop-Api-Call-Limit", "1/40"),
			q(40, 39, 0, 0, sh), true},
		{"X-RateLimit preferred over X", header("X-RateLimit-Remaining", "3", "X-Rate-Limit-Remaining", "4"), q(-1, 3, 0, 0, xr), true},

		{"nil header", nil, Quota{}, false},
		{"empty header", http.Header{}, Quota{}, false},
		{"unrelated header", header("Content-Type", "text/html", "Retry-After", "5"), Quota{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseQuota(tt.h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseQuota(%v)\n got  %+v, %v\n want %+v, %v", tt.h, got, ok, tt.want, tt.wantOK)
			}
			checkQuota(t, got, ok)
		})
	}
}

// TestParseQuotaServerDate: an absolute reset (Unix time or HTTP-date) is
// measured against the response's Date, a delay against nothing; the
// local clock here runs an hour ahead of the server's.
func TestParseQuotaServerDate(t *testing.T) {
	server := time.Date(2025, time.June, 1, 12, 0, 0, 0, time.UTC)
	fast := server.Add(time.Hour)
	date := server.Format(http.TimeFormat)
	unix := func(d time.Duration) string { return fmt.Sprint(server.Add(d).Unix()) }
	tests := []struct {
		name string
		h    http.Header
		now  time.Time
		want time.Duration // Quota.Reset
	}{
		{"x-ratelimit epoch", header("Date", date, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(30*time.Second)), fast, 30 * time.Second},
		{"x-ratelimit epoch without Date", header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(30*time.Second)), fast, 0},
		{"x-ratelimit epoch slow clock", header("Date", date, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(30*time.Second)),
			server.Add(-time.Hour), 30 * time.Second},
		{"x-ratelimit epoch millis", header("Date", date, "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", fmt.Sprint(server.Add(1500*time.Millisecond).UnixMilli())), fast, 1500 * time.Millisecond},
		{"x-ratelimit fractional epoch", header("Date", date, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(30*time.Second)+".5"),
			fast, 30500 * time.Millisecond},
		{"x-ratelimit date reset", header("Date", date, "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", server.Add(time.Minute).Format(http.TimeFormat)), fast, time.Minute},
		{"x-ratelimit date reset without Date", header("X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", server.Add(time.Minute).Format(http.TimeFormat)), fast, 0},
		{"x-ratelimit delay ignores Date", header("Date", server.Add(-time.Hour).Format(http.TimeFormat),
			"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"), fast, 30 * time.Second},
		{"x-ratelimit reset-after ignores Date", header("Date", date, "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", unix(time.Hour), "X-RateLimit-Reset-After", "2.5"), fast, 2500 * time.Millisecond},
		{"x-ratelimit epoch before Date", header("Date", date, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(-time.Second)),
			server.Add(-time.Hour), 0},
		{"github Date RFC 850", header("Date", server.Format(time.RFC850), "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", unix(time.Minute), "X-RateLimit-Resource", "core"), fast, time.Minute},
		{"garbage Date ignored", header("Date", "now", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", unix(30*time.Second)),
			server.Add(-time.Hour), time.Hour + 30*time.Second},
		{"x epoch", header("Date", date, "x-rate-limit-remaining", "0", "x-rate-limit-reset", unix(15*time.Minute)), fast, 15 * time.Minute},
		{"draft-06 epoch", header("Date", date, "RateLimit-Remaining", "0", "RateLimit-Reset", unix(time.Minute)), fast, time.Minute},
		{"draft-07 epoch", header("Date", date, "RateLimit", "remaining=0, reset="+unix(time.Minute)), fast, time.Minute},
		{"draft-11 epoch t", header("Date", date, "RateLimit", `"d";r=0;t=`+unix(time.Minute)), fast, time.Minute},
		{"draft-11 delay t ignores Date", header("Date", date, "RateLimit", `"d";r=0;t=40`), fast, 40 * time.Second},
		{"draft-11 epoch t without Date", header("RateLimit", `"d";r=0;t=`+unix(time.Minute)), fast, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseQuota(tt.h, tt.now)
			if !ok || got.Reset != tt.want {
				t.Errorf("ParseQuota(%v).Reset = %v, %v; want %v, true", tt.h, got.Reset, ok, tt.want)
			}
			checkQuota(t, got, ok)
		})
	}
}

// checkQuota asserts the invariants ParseQuota documents.
func checkQuota(t *testing.T, q Quota, ok bool) {
	t.Helper()
	if !ok {
		if q != (Quota{}) {
			t.Errorf("ok=false with non-zero %+v", q)
		}
		return
	}
	switch q.Source {
	case SourceRateLimit, SourceGitHub, SourceXRateLimit, SourceX, SourceShopify:
	default:
		t.Errorf("unknown Source %q", q.Source)
	}
	if q.Limit < -1 || q.Remaining < 0 || q.Reset < 0 || q.Window < 0 {
		t.Errorf("negative field in %+v", q)
	}
	if q.Limit >= 0 && q.Remaining > q.Limit {
		t.Errorf("Remaining > Limit in %+v", q)
	}
}

// TestQuotaFieldNamesCanonical guards the direct map lookups in quota.go
// and detect.go: a name that is not canonical would never match.
func TestQuotaFieldNamesCanonical(t *testing.T) {
	re := regexp.MustCompile(`"((?:X-|Ratelimit|Cf-)[A-Za-z-]*)"`)
	for _, file := range []string{"quota.go", "detect.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := re.FindAllStringSubmatch(string(src), -1)
		if len(names) == 0 {
			t.Fatalf("no field names found in %s", file)
		}
		for _, m := range names {
			if c := http.CanonicalHeaderKey(m[1]); c != m[1] {
				t.Errorf("%s: field name %q is not canonical (%q)", file, m[1], c)
			}
		}
	}
}

// A quota header of tens of thousands of members is no quota: the readers
// match members against each other, and such a header cost seconds of CPU
// on every response (80,000 members: 9.6 s). Past 64 members or 64
// parameters a field is malformed. A header of a few policies reads as
// before.
func TestParseQuotaHugeHeader(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	many := func(n int, f func(int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ", ")
	}
	for name, h := range map[string]http.Header{
		"members":  {"Ratelimit": {many(80_000, func(i int) string { return fmt.Sprintf("k%d", i) })}},
		"policies": {"Ratelimit": {many(40_000, func(i int) string { return fmt.Sprintf(`"p%d";r=1`, i) })}, "Ratelimit-Policy": {many(40_000, func(i int) string { return fmt.Sprintf(`"p%d";q=2`, i) })}},
		"params":   {"Ratelimit": {`"d";r=1` + strings.Repeat(";x=1", 80_000)}},
	} {
		if _, ok := ParseQuota(h, now); ok {
			t.Errorf("%s: a quota read from a huge header", name)
		}
	}
	q, ok := ParseQuota(http.Header{"Ratelimit": {many(64, func(i int) string { return fmt.Sprintf(`"p%d";r=%d;t=30`, i, i+1) })},
		"Ratelimit-Policy": {many(64, func(i int) string { return fmt.Sprintf(`"p%d";q=100;w=60`, i) })}}, now)
	if !ok || q.Remaining != 1 {
		t.Errorf("64 policies: %+v, %v; want the tightest, 1 remaining", q, ok)
	}
}
