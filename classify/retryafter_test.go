package classify

import (
	"net/http"
	"strings"
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
		{"max seconds + 1", "9223372037", Forever, true},
		{"ten nines", "9999999999", Forever, true},
		{"twenty digits", "99999999999999999999", Forever, true},
		{"uint64 overflow", "18446744073709551616", Forever, true},
		{"hundred digits", strings.Repeat("9", 100), Forever, true},
		{"huge with leading zeros", "0000" + "9223372037", Forever, true},
		{"max seconds with leading zeros", "000000" + "9223372036", 9223372036 * time.Second, true},
		{"huge then garbage", "99999999999999999999x", 0, false},
		{"negative huge", "-99999999999999999999", 0, false},
		{"fractional huge", "99999999999999999999.5", 0, false},
		{"negative", "-1", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "5s", 0, false},
		{"hex", "0x10", 0, false},
		{"inner space", "1 2", 0, false},
		{"garbage", "abc", 0, false},
		{"empty", "", 0, false},
		{"blank", "   ", 0, false},

		// Lists: the largest valid member.
		{"list", "3, 5", 5 * time.Second, true},
		{"list descending", "5, 3", 5 * time.Second, true},
		{"list no spaces", "3,5", 5 * time.Second, true},
		{"list space before comma", "3 ,5", 5 * time.Second, true},
		{"list of three", "10, 30, 20", 30 * time.Second, true},
		{"list invalid member ignored", "abc, 7", 7 * time.Second, true},
		{"list negative member ignored", "-1, 2", 2 * time.Second, true},
		{"list fraction member ignored", "1.5, 2", 2 * time.Second, true},
		{"list trailing comma", "5,", 5 * time.Second, true},
		{"list leading comma", ", 5", 5 * time.Second, true},
		{"list of zeros", "0, 0", 0, true},
		{"list with huge", "3, 9999999999", Forever, true},
		{"list only commas", ", ,", 0, false},
		{"list comma", ",", 0, false},
		{"list all invalid", "abc, -1, 1.5", 0, false},
		{"list date then seconds", "Sun, 06 Nov 1994 08:49:37 GMT, 120", 120 * time.Second, true},
		{"list seconds then date", "120, Sun, 06 Nov 1994 08:49:37 GMT", 120 * time.Second, true},
		{"list seconds then future date", "30, " + in(90*time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"list future date then seconds", in(90*time.Second).Format(http.TimeFormat) + ", 30", 90 * time.Second, true},
		{"list RFC 850 then seconds", in(90*time.Second).Format(time.RFC850) + ", 30", 90 * time.Second, true},
		{"list asctime then seconds", in(90*time.Second).Format(time.ANSIC) + ", 30", 90 * time.Second, true},
		{"list two dates", "Sun, 06 Nov 1994 08:49:37 GMT, " + in(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{"list past dates only", "Sun, 06 Nov 1994 08:49:37 GMT, Sunday, 06-Nov-94 08:49:37 GMT", 0, true},
		{"list bare weekday then seconds", "Sun, 5", 5 * time.Second, true},
		{"list weekdays then seconds", "Sun, Mon, 7", 7 * time.Second, true},
		{"list seconds then bare weekday", "3, 5, Sun", 5 * time.Second, true},
		{"list lower-case weekday", "sun, 5", 5 * time.Second, true},
		{"bare weekday", "Sunday", 0, false},
		{"date without weekday", "06 Nov 1994 08:49:37 GMT", 0, false},
		{"date missing space after comma", "Sun,06 Nov 1994 08:49:37 GMT", 0, false},

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
	// A Date in the RFC 850 form, which http.ParseTime allocates to parse:
	// delay-seconds must not read it.
	date := now.Format(time.RFC850)
	for _, v := range []string{" 120 ", "3, 5", "abc, 7", "99999999999999999999", ", , 0"} {
		h := http.Header{"Retry-After": {v}, "Date": {date}}
		var ok bool
		n := testing.AllocsPerRun(1000, func() {
			_, ok = RetryAfter(h, now)
		})
		if n != 0 || !ok {
			t.Errorf("RetryAfter(%q) allocates %v times per call (ok=%v), want 0", v, n, ok)
		}
		n = testing.AllocsPerRun(1000, func() {
			_, ok = ParseRetryAfter(v, now)
		})
		if n != 0 || !ok {
			t.Errorf("ParseRetryAfter(%q) allocates %v times per call (ok=%v), want 0", v, n, ok)
		}
	}
}

// TestRetryAfterServerDate: an HTTP-date Retry-After is measured against
// the response's Date, so a local clock an hour fast (or slow) still waits
// what the server asked.
func TestRetryAfterServerDate(t *testing.T) {
	server := time.Date(2025, time.June, 1, 12, 0, 0, 0, time.UTC)
	fast := server.Add(time.Hour) // the local clock, an hour ahead
	slow := server.Add(-time.Hour)
	at := func(d time.Duration) string { return server.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name   string
		h      http.Header
		now    time.Time
		want   time.Duration
		wantOK bool
	}{
		{"fast clock with Date", header("Date", at(0), "Retry-After", at(30*time.Second)), fast, 30 * time.Second, true},
		{"fast clock without Date", header("Retry-After", at(30*time.Second)), fast, 0, true},
		{"slow clock with Date", header("Date", at(0), "Retry-After", at(30*time.Second)), slow, 30 * time.Second, true},
		{"slow clock without Date", header("Retry-After", at(30*time.Second)), slow, time.Hour + 30*time.Second, true},
		{"Date RFC 850", header("Date", server.Format(time.RFC850), "Retry-After", at(30*time.Second)), fast, 30 * time.Second, true},
		{"Date asctime", header("Date", server.Format(time.ANSIC), "Retry-After", at(30*time.Second)), fast, 30 * time.Second, true},
		{"Retry-After RFC 850", header("Date", at(0), "Retry-After", server.Add(30*time.Second).Format(time.RFC850)), fast, 30 * time.Second, true},
		{"Date with whitespace", header("Date", " "+at(0)+"	", "Retry-After", at(30*time.Second)), fast, 30 * time.Second, true},
		{"garbage Date ignored", header("Date", "yesterday", "Retry-After", at(30*time.Second)), slow, time.Hour + 30*time.Second, true},
		{"Date not GMT ignored", header("Date", "Sun, 01 Jun 2025 12:00:00 PST", "Retry-After", at(30*time.Second)), fast, 0, true},
		{"empty Date ignored", header("Date", "", "Retry-After", at(30*time.Second)), fast, 0, true},
		{"first Date line counts", header("Date", at(0), "Date", at(20*time.Second), "Retry-After", at(30*time.Second)), fast, 30 * time.Second, true},
		{"date before Date", header("Date", at(0), "Retry-After", at(-time.Second)), slow, 0, true},
		{"date equal to Date", header("Date", at(0), "Retry-After", at(0)), slow, 0, true},
		{"seconds ignore Date", header("Date", at(-time.Hour), "Retry-After", "120"), fast, 120 * time.Second, true},
		{"list with Date", header("Date", at(0), "Retry-After", "10, "+at(30*time.Second)), fast, 30 * time.Second, true},
		{"lines with Date", header("Date", at(0), "Retry-After", at(30*time.Second), "Retry-After", "20"), fast, 30 * time.Second, true},
		{"invalid Retry-After with Date", header("Date", at(0), "Retry-After", "soon"), fast, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RetryAfter(tt.h, tt.now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%v, now) = %v, %v; want %v, %v", tt.h, got, ok, tt.want, tt.wantOK)
			}
			// the same as parsing each line against ServerNow
			var want time.Duration
			var wantOK bool
			for _, v := range tt.h["Retry-After"] {
				if d, ok := ParseRetryAfter(v, ServerNow(tt.h, tt.now)); ok && (!wantOK || d > want) {
					want, wantOK = d, true
				}
			}
			if got != want || ok != wantOK {
				t.Errorf("RetryAfter = %v, %v; ParseRetryAfter(v, ServerNow) = %v, %v", got, ok, want, wantOK)
			}
		})
	}
}

func TestServerNow(t *testing.T) {
	server := time.Date(1994, time.November, 6, 8, 49, 37, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Time
	}{
		{"IMF-fixdate", header("Date", "Sun, 06 Nov 1994 08:49:37 GMT"), server},
		{"RFC 850", header("Date", "Sunday, 06-Nov-94 08:49:37 GMT"), server},
		{"asctime", header("Date", "Sun Nov  6 08:49:37 1994"), server},
		{"whitespace", header("Date", "  Sun, 06 Nov 1994 08:49:37 GMT "), server},
		{"first line", header("Date", "Sun, 06 Nov 1994 08:49:37 GMT", "Date", "Mon, 07 Nov 1994 08:49:37 GMT"), server},
		{"absent", header("Content-Type", "text/html"), now},
		{"nil header", nil, now},
		{"empty", header("Date", ""), now},
		{"garbage", header("Date", "tomorrow"), now},
		{"not GMT", header("Date", "Sun, 06 Nov 1994 08:49:37 PST"), now},
		{"Unix time", header("Date", "784111777"), now},
		{"garbage first line", header("Date", "x", "Date", "Sun, 06 Nov 1994 08:49:37 GMT"), now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ServerNow(tt.h, now); !got.Equal(tt.want) {
				t.Errorf("ServerNow(%v) = %v; want %v", tt.h, got, tt.want)
			}
		})
	}
}

func TestIsWeekday(t *testing.T) {
	for s, want := range map[string]bool{
		"Sun": true, "sun": true, "SUN": true, "Sunday": true, "sUNDAY": true,
		"Wed": true, "Wednesday": true, "Thu": true, "Thursday": true, "Sat": true, "Saturday": true,
		"": false, "Su": false, "Sund": false, "Sundays": false, "Wedn": false, "Wednesdays": false,
		"Sun ": false, "Mon1": false, "3": false, "120": false, "S\x15n": false, "Tue\u017fday": false,
		"Jan": false, "Mo": false, "Wed,": false,
	} {
		if got := isWeekday(s); got != want {
			t.Errorf("isWeekday(%q) = %v, want %v", s, got, want)
		}
	}
}
