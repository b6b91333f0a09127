package classify

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// Quota is the normalised quota state a server announced in one response.
//
// The zero value means "no quota announced" (ParseQuota returns it with
// ok=false). Quota is a plain value, safe for concurrent use.
type Quota struct {
	// Limit is the number of requests allowed per window; -1 if unknown.
	Limit int64
	// Remaining is the number of requests left in the current window.
	// It is always known when ParseQuota reports ok, is never negative,
	// and never exceeds a known Limit (a larger value is clamped to it).
	Remaining int64
	// Reset is the time until the window resets, from when the response
	// was received: a delay as the server sent it, or an absolute reset
	// time less the response's Date (less the now passed to ParseQuota
	// when Date is absent or invalid); never negative. 0 if unknown or
	// already past.
	Reset time.Duration
	// Window is the policy's window length if announced (RateLimit-Policy
	// w=, or the w= of an older draft's policy); 0 if unknown.
	Window time.Duration
	// Source names the header family that was used: one of the Source
	// constants.
	Source string
}

// Values of [Quota.Source].
const (
	// SourceRateLimit: the IETF RateLimit fields, in any draft's form:
	// RateLimit + RateLimit-Policy (draft-08 and later, "name";r=;t=),
	// the RateLimit dictionary of draft-07 (limit=, remaining=, reset=),
	// or RateLimit-Limit / -Remaining / -Reset of drafts 00–06.
	SourceRateLimit = "ratelimit"
	// SourceGitHub: X-RateLimit-* with GitHub's x-ratelimit-resource.
	SourceGitHub = "github"
	// SourceXRateLimit: X-RateLimit-Limit / -Remaining / -Used / -Reset /
	// -Reset-After, as sent by many APIs.
	SourceXRateLimit = "x-ratelimit"
	// SourceX: X's (Twitter's) x-rate-limit-limit / -remaining / -reset.
	SourceX = "x-rate-limit"
	// SourceShopify: X-Shopify-Shop-Api-Call-Limit: used/limit.
	SourceShopify = "shopify"
)

// Epoch thresholds for reset values. A reset value below EpochSeconds is a
// delay in seconds; from EpochSeconds up it is a Unix time in seconds; from
// EpochMillis up it is a Unix time in milliseconds. The bounds are fixed,
// not relative to now, so a wrong clock cannot change how a value is read:
// 1e9 seconds is 31.7 years, longer than any real window, and 1e9 as a Unix
// time is September 2001, earlier than any real reset; 1e12 as Unix seconds
// would be the year 33658, while as milliseconds it is again 2001.
const (
	EpochSeconds = 1_000_000_000
	EpochMillis  = 1_000_000_000_000
)

// ParseQuota reads the quota a server announced in h. now is the time the
// response was received. A reset given as an absolute time (a Unix time
// or an HTTP-date) is the server's clock, so when h carries a valid Date
// field the reset is measured against it (see [ServerNow]) rather than
// against now; a reset given as a delay depends on neither clock.
//
// Families are tried in this order, and the first that yields a quota
// wins: the IETF RateLimit fields (newest draft form first), X-RateLimit-*
// (reported as "github" when x-ratelimit-resource is present), X's
// x-rate-limit-*, and Shopify's call limit. A family yields a quota only
// when its remaining count is present and well-formed; a malformed
// optional field (limit, reset, window) is ignored, as the IETF draft
// requires, and a family without a usable remaining count is skipped in
// favour of the next.
//
// Details:
//   - RateLimit (draft-08+) may list several policies; the one with the
//     fewest requests remaining wins (on a tie, the later reset). Its
//     Limit and Window come from the RateLimit-Policy item of the same
//     name. Policies whose quota unit (qu) is not "requests" are skipped.
//   - Reset values in every family, the IETF t= and reset= included, go
//     through the epoch rule of [EpochSeconds], so a server that sends a
//     Unix time where the draft asks for seconds is still read right. The
//     unstructured reset fields (RateLimit-Reset, X-RateLimit-Reset,
//     x-rate-limit-reset) may also be fractional or an HTTP-date, and
//     X-RateLimit-Reset-After (always a delay) is preferred when present.
//   - Structured (IETF) counts must be non-negative Integers. Unstructured
//     counts may be written as decimals ("598.0", as Reddit does); they
//     are rounded down. Negative counts are malformed everywhere: some
//     servers mean "unlimited" by -1, and reading it as 0 would stall a
//     crawl.
//   - When only a limit and X-RateLimit-Used are sent, Remaining is
//     limit-used; Shopify's "used/limit" likewise; both floor at 0.
//   - A repeated legacy field, or one with comma-separated values, counts
//     by its first value.
//
// ok is false, with the zero Quota, when no family yields a quota.
func ParseQuota(h http.Header, now time.Time) (Quota, bool) {
	if len(h) == 0 || !mayHaveQuota(h) {
		return Quota{}, false
	}
	for _, f := range quotaFamilies {
		if q, ok := f(h, now); ok {
			if q.Limit >= 0 && q.Remaining > q.Limit {
				q.Remaining = q.Limit
			}
			return q, true
		}
	}
	return Quota{}, false
}

// quotaKeys are the fields without which no family can give a quota (each
// family needs a remaining count, or a used count to derive it from). Checking them first makes the common
// response, with no quota header at all, cost a few map lookups instead of
// every family's parse: ParseQuota runs on every response the adaptive
// controller records.
var quotaKeys = [...]string{
	"Ratelimit", "Ratelimit-Remaining", "X-Ratelimit-Remaining",
	"X-Ratelimit-Used", "X-Rate-Limit-Remaining", "X-Shopify-Shop-Api-Call-Limit",
}

func mayHaveQuota(h http.Header) bool {
	for _, k := range quotaKeys {
		if len(h[k]) > 0 {
			return true
		}
	}
	return false
}

var quotaFamilies = [...]func(http.Header, time.Time) (Quota, bool){
	rateLimitList,
	rateLimitDict,
	rateLimitSplit,
	xRateLimit,
	xRateLimitX,
	shopify,
}

// Field names below are written in canonical form and looked up by direct
// map index, skipping http.Header's per-call canonicalisation; a test
// checks every name in this file is canonical.

// field returns the field's value with multiple lines combined by commas,
// as RFC 9110 allows for list-based fields; empty lines are dropped.
func field(h http.Header, name string) string {
	vs := h[name]
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return vs[0]
	}
	var b strings.Builder
	for _, v := range vs {
		if v = trimOWS(v); v == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v)
	}
	return b.String()
}

// rateLimitList reads draft-08+: RateLimit: "name";r=50;t=30 with
// RateLimit-Policy: "name";q=100;w=60.
func rateLimitList(h http.Header, now time.Time) (Quota, bool) {
	v := field(h, "Ratelimit")
	if v == "" {
		return Quota{}, false
	}
	limits, ok := parseSFList(v)
	if !ok {
		return Quota{}, false
	}
	var policies []sfMember
	if pv := field(h, "Ratelimit-Policy"); pv != "" {
		policies, _ = parseSFList(pv) // informative; malformed means absent
	}
	var best Quota
	found := false
	for i := range limits {
		m := &limits[i]
		if !isPolicyName(m.val) {
			continue
		}
		r, ok := paramInt(m, "r")
		if !ok {
			continue
		}
		q := Quota{Limit: -1, Remaining: r, Source: SourceRateLimit}
		if tv, present := m.param("t"); present {
			t, ok := tv.nonNegInt()
			if !ok {
				continue // a malformed member is ignored as a whole
			}
			if q.Reset, ok = resetDelay(uint64(t), 0, h, now); !ok {
				continue
			}
		}
		if p := policyNamed(policies, m.val); p != nil {
			if u, present := p.param("qu"); present && !(isPolicyName(u) && u.str == "requests") {
				continue // bytes or concurrency, not a request rate (a Token accepted, as for names)
			}
			if l, ok := paramInt(p, "q"); ok {
				q.Limit = l
				q.Window = windowParam(p)
			}
		}
		if !found || q.Remaining < best.Remaining ||
			q.Remaining == best.Remaining && q.Reset > best.Reset {
			best, found = q, true
		}
	}
	return best, found
}

// isPolicyName reports a policy identifier: a String per the draft; Tokens
// are accepted too, as some servers send them unquoted.
func isPolicyName(v sfValue) bool { return v.typ == sfString || v.typ == sfToken }

func policyNamed(policies []sfMember, name sfValue) *sfMember {
	for i := range policies {
		if p := &policies[i]; isPolicyName(p.val) && p.val.str == name.str {
			return p
		}
	}
	return nil
}

func paramInt(m *sfMember, key string) (int64, bool) {
	v, ok := m.param(key)
	if !ok {
		return 0, false
	}
	return v.nonNegInt()
}

// windowParam returns the w parameter (window= in the earliest drafts) as
// a duration, or 0 if absent, not a positive integer, or too large.
func windowParam(m *sfMember) time.Duration {
	for _, k := range [...]string{"w", "window"} {
		if w, ok := paramInt(m, k); ok && w > 0 && w <= MaxRetryAfterSeconds {
			return time.Duration(w) * time.Second
		}
	}
	return 0
}

// rateLimitDict reads draft-07: RateLimit: limit=100, remaining=50,
// reset=5, with RateLimit-Policy: 100;w=60.
func rateLimitDict(h http.Header, now time.Time) (Quota, bool) {
	v := field(h, "Ratelimit")
	if v == "" {
		return Quota{}, false
	}
	d, ok := parseSFDict(v)
	if !ok {
		return Quota{}, false
	}
	dictInt := func(k string) (int64, bool) {
		if m, ok := dictGet(d, k); ok {
			return m.val.nonNegInt()
		}
		return 0, false
	}
	r, ok := dictInt("remaining")
	if !ok {
		return Quota{}, false
	}
	q := Quota{Limit: -1, Remaining: r, Source: SourceRateLimit}
	if l, ok := dictInt("limit"); ok {
		q.Limit = l
		q.Window = legacyWindow(h, l, nil)
	}
	if t, ok := dictInt("reset"); ok {
		q.Reset, _ = resetDelay(uint64(t), 0, h, now)
	}
	return q, true
}

// legacyWindow finds the window of the pre-draft-08 policy whose quota
// equals limit, in RateLimit-Policy or among extra (the policy items that
// drafts 00–06 appended to RateLimit-Limit).
func legacyWindow(h http.Header, limit int64, extra []sfMember) time.Duration {
	find := func(ps []sfMember) time.Duration {
		for i := range ps {
			if q, ok := ps[i].val.nonNegInt(); ok && q == limit {
				if w := windowParam(&ps[i]); w > 0 {
					return w
				}
			}
		}
		return 0
	}
	if w := find(extra); w > 0 {
		return w
	}
	if pv := field(h, "Ratelimit-Policy"); pv != "" {
		if ps, ok := parseSFList(pv); ok {
			return find(ps)
		}
	}
	return 0
}

// rateLimitSplit reads drafts 00–06: RateLimit-Limit: 100 (or
// "100, 100;w=60"), RateLimit-Remaining: 50, RateLimit-Reset: 30.
func rateLimitSplit(h http.Header, now time.Time) (Quota, bool) {
	r, ok := countField(h, "Ratelimit-Remaining")
	if !ok {
		return Quota{}, false
	}
	q := Quota{Limit: -1, Remaining: r, Source: SourceRateLimit}
	if l, ok := countField(h, "Ratelimit-Limit"); ok {
		q.Limit = l
		extra, _ := parseSFList(field(h, "Ratelimit-Limit"))
		q.Window = legacyWindow(h, l, extra)
	}
	q.Reset, _ = resetField(h, "Ratelimit-Reset", now)
	return q, true
}

// xRateLimit reads X-RateLimit-Limit / -Remaining / -Used / -Reset /
// -Reset-After, GitHub's among them.
func xRateLimit(h http.Header, now time.Time) (Quota, bool) {
	src := SourceXRateLimit
	if len(h["X-Ratelimit-Resource"]) > 0 {
		src = SourceGitHub
	}
	return xFamily(h, now, src,
		"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Used",
		"X-Ratelimit-Reset", "X-Ratelimit-Reset-After")
}

// xRateLimitX reads X's x-rate-limit-limit / -remaining / -reset.
func xRateLimitX(h http.Header, now time.Time) (Quota, bool) {
	return xFamily(h, now, SourceX,
		"X-Rate-Limit-Limit", "X-Rate-Limit-Remaining", "",
		"X-Rate-Limit-Reset", "")
}

func xFamily(h http.Header, now time.Time, src, limitF, remF, usedF, resetF, resetAfterF string) (Quota, bool) {
	q := Quota{Limit: -1, Source: src}
	if l, ok := countField(h, limitF); ok {
		q.Limit = l
	}
	r, ok := countField(h, remF)
	if !ok {
		if usedF == "" || q.Limit < 0 {
			return Quota{}, false
		}
		u, ok := countField(h, usedF)
		if !ok {
			return Quota{}, false
		}
		r = max(q.Limit-u, 0)
	}
	q.Remaining = r
	var d time.Duration
	ok = false
	if resetAfterF != "" {
		d, ok = resetAfterField(h, resetAfterF)
	}
	if !ok {
		d, _ = resetField(h, resetF, now)
	}
	q.Reset = d
	return q, true
}

// shopify reads X-Shopify-Shop-Api-Call-Limit: used/limit (a leaky bucket,
// so there is no reset time).
func shopify(h http.Header, _ time.Time) (Quota, bool) {
	v := firstValue(h, "X-Shopify-Shop-Api-Call-Limit")
	used, limit, ok := strings.Cut(v, "/")
	if !ok {
		return Quota{}, false
	}
	u, ok1 := parseCount(used)
	l, ok2 := parseCount(limit)
	if !ok1 || !ok2 {
		return Quota{}, false
	}
	return Quota{Limit: l, Remaining: max(l-u, 0), Source: SourceShopify}, true
}

// firstValue returns the first comma-separated element of the field's
// first line, trimmed.
func firstValue(h http.Header, name string) string {
	vs := h[name]
	if len(vs) == 0 {
		return ""
	}
	v, _, _ := strings.Cut(vs[0], ",")
	return trimOWS(v)
}

func countField(h http.Header, name string) (int64, bool) {
	return parseCount(firstValue(h, name))
}

// parseCount parses a non-negative count, "42" or "42.0" (rounded down).
func parseCount(s string) (int64, bool) {
	n, _, ok := parseDecimal(trimOWS(s))
	if !ok || n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// parseDecimal parses digits with an optional fraction ("12", "12.5");
// frac is the fraction in nanoseconds-of-a-unit (9 digits, the rest
// truncated). Signs, exponents and empty parts are malformed.
func parseDecimal(s string) (ip uint64, frac int64, ok bool) {
	is, fs, dot := strings.Cut(s, ".")
	if ip, ok = parseUint(is); !ok {
		return 0, 0, false
	}
	if !dot {
		return ip, 0, true
	}
	if fs == "" {
		return 0, 0, false
	}
	scale := int64(1e8)
	for i := 0; i < len(fs); i++ {
		if !isDigit(fs[i]) {
			return 0, 0, false
		}
		frac += int64(fs[i]-'0') * scale
		scale /= 10
	}
	return ip, frac, true
}

// resetField reads a reset value: delay seconds or a Unix time (by the
// epoch rule), possibly fractional, or an HTTP-date.
func resetField(h http.Header, name string, now time.Time) (time.Duration, bool) {
	vs := h[name]
	if len(vs) == 0 {
		return 0, false
	}
	v := trimOWS(vs[0])
	if v != "" && !isDigit(v[0]) {
		// An HTTP-date holds a comma, so try it before cutting at one.
		if t, err := http.ParseTime(v); err == nil {
			return nonNegative(t.Sub(ServerNow(h, now))), true
		}
		return 0, false
	}
	v, _, _ = strings.Cut(v, ",")
	ip, frac, ok := parseDecimal(trimOWS(v))
	if !ok {
		return 0, false
	}
	return resetDelay(ip, frac, h, now)
}

// resetAfterField reads a delay in (possibly fractional) seconds.
func resetAfterField(h http.Header, name string) (time.Duration, bool) {
	ip, frac, ok := parseDecimal(firstValue(h, name))
	if !ok || ip >= EpochSeconds {
		return 0, false
	}
	return time.Duration(ip)*time.Second + time.Duration(frac), true
}

// resetDelay applies the epoch rule (see EpochSeconds) to a reset value of
// sec seconds plus frac nanoseconds of the response h, returning the delay
// from now. A Unix time is measured against ServerNow(h, now), read only
// then: most resets are delays.
func resetDelay(sec uint64, frac int64, h http.Header, now time.Time) (time.Duration, bool) {
	switch {
	case sec < EpochSeconds:
		return time.Duration(sec)*time.Second + time.Duration(frac), true
	case sec < EpochMillis:
		return nonNegative(time.Unix(int64(sec), frac).Sub(ServerNow(h, now))), true
	case sec <= math.MaxInt64:
		return nonNegative(time.UnixMilli(int64(sec)).Sub(ServerNow(h, now))), true
	}
	return 0, false
}
