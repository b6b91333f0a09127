package classify

import (
	"net/http"
	"testing"
	"time"
)

var now = time.Date(2025, time.June, 1, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	in := func(d time.Duration) time.Time { return now.Add(d) }
	tests := []struct {
		name   string
		v      string
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"one", "1", time.Second, true},
		{"leading zeros", "0007", 7 * time.Second, true},
		{"many leading zeros", "000000000000000000000000000007", 7 * time.Second, true},
		{"spaces", "  120  ", 120 * time.Second, true},
		{"tabs", "\t5\t", 5 * time.Second, true},
		{"crlf", "5\r\n", 5 * time.Second, true},
		{"max seconds", "9223372036", 9223372036 * time.Second, true},
		{"max seconds + 1", "9223372037", 0, false},
		{"twenty digits", "99999999999999999999", 0, false},
		{"uint64 overflow", "18446744073709551616", 0, false},
		{"negative", "-1", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "5s", 0, false},
		{"hex", "0x10", 0, false},
		{"inner space", "1 2", 0, false},
		{"garbage", "abc", 0, false},
		{"empty", "", 0, false},
		{"blank", "   ", 0, false},
		{"list", "5, 10", 0, false},

		{"IMF-fixdate", in(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"RFC 850", in(90 * time.Second).Format(time.RFC850), 90 * time.Second, true},
		{"asctime", in(90 * time.Second).Format(time.ANSIC), 90 * time.Second, true},
		{"asctime padded day", "Sun Jun  1 12:01:30 2025", 90 * time.Second, true},
		{"IMF-fixdate spaces", "  " + in(time.Hour).Format(http.TimeFormat) + " ", time.Hour, true},
		{"date now", now.Format(http.TimeFormat), 0, true},
		{"date in the past", "Sun, 06 Nov 1994 08:49:37 GMT", 0, true},
		{"RFC 850 past", "Sunday, 06-Nov-94 08:49:37 GMT", 0, true},
		{"asctime past", "Sun Nov  6 08:49:37 1994", 0, true},
		{"date sub-second skew", in(-time.Millisecond).Format(http.TimeFormat), 0, true},
		{"date not GMT", "Sun, 01 Jun 2025 12:00:10 PST", 0, false},
		{"date garbage", "Sun, 99 Nov 1994 08:49:37 GMT", 0, false},
		{"date truncated", "Sun, 06 Nov 1994", 0, false},
		{"date far future", "Fri, 31 Dec 9999 23:59:59 GMT", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Sub(now), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.v, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.wantOK)
			}
			h := http.Header{}
			h.Set("Retry-After", tt.v)
			got, ok = RetryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRetryAfterHeader(t *testing.T) {
	tests := []struct {
		name   string
		h      http.Header
		want   time.Duration
		wantOK bool
	}{
		{"nil header", nil, 0, false},
		{"absent", http.Header{"Content-Type": {"text/html"}}, 0, false},
		{"empty value", http.Header{"Retry-After": {""}}, 0, false},
		{"no values", http.Header{"Retry-After": {}}, 0, false},
		{"largest wins", http.Header{"Retry-After": {"10", "30"}}, 30 * time.Second, true},
		{"largest wins reversed", http.Header{"Retry-After": {"30", "10"}}, 30 * time.Second, true},
		{"invalid ignored", http.Header{"Retry-After": {"abc", "30", "-5"}}, 30 * time.Second, true},
		{"all invalid", http.Header{"Retry-After": {"abc", "-5"}}, 0, false},
		{"zero and date", http.Header{"Retry-After": {"0", now.Add(time.Minute).Format(http.TimeFormat)}}, time.Minute, true},
		{"past date and zero", http.Header{"Retry-After": {"Sun, 06 Nov 1994 08:49:37 GMT", "0"}}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RetryAfter(tt.h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%v) = %v, %v; want %v, %v", tt.h, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRetryAfterSecondsAllocs(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", " 120 ")
	var d time.Duration
	n := testing.AllocsPerRun(1000, func() {
		d, _ = RetryAfter(h, now)
	})
	if n != 0 {
		t.Errorf("RetryAfter(delay-seconds) allocates %v times per call, want 0", n)
	}
	if d != 120*time.Second {
		t.Errorf("d = %v", d)
	}
	n = testing.AllocsPerRun(1000, func() {
		d, _ = ParseRetryAfter("99999999999999999999", now)
	})
	if n != 0 {
		t.Errorf("ParseRetryAfter(overflow) allocates %v times per call, want 0", n)
	}
}
