package adaptive_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/colly-polite/polite/adaptive"
)

// fuzzHostPart is the part of a scope key before its port, split as
// NormalizeHost documents it: after the brackets of an IPv6 literal, or at
// the only colon of anything else.
func fuzzHostPart(key string) string {
	if strings.HasPrefix(key, "[") {
		if i := strings.LastIndexByte(key, ']'); i > 0 {
			return key[:i+1]
		}
		return key
	}
	if i := strings.LastIndexByte(key, ':'); i >= 0 && strings.IndexByte(key[:i], ':') < 0 {
		return key[:i]
	}
	return key
}

// Hosts come from URLs and Host headers: outside input.
func FuzzNormalizeHost(f *testing.F) {
	for _, s := range [][2]string{
		{"https", "Example.COM."},
		{"http", "example.com:80"},
		{"http", "[FE80::1%25en0]:8080"},
		{"https", "a..:443"},
		{"", "::1"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, scheme, host string) {
		got := adaptive.NormalizeHost(scheme, host)
		if again := adaptive.NormalizeHost(scheme, got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", host, got, again)
		}
		if strings.ToLower(got) != got {
			t.Fatalf("%q -> %q: not lower case", host, got)
		}
		if h := fuzzHostPart(got); strings.HasSuffix(h, ".") {
			t.Fatalf("%q -> %q: trailing dot before the port", host, got)
		}
		// case folding may widen a letter (or an invalid byte) to 3 bytes
		if len(got) > 3*len(host) {
			t.Fatalf("%q -> %q: grew", host, got)
		}
		if port := got[len(fuzzHostPart(got)):]; port == ":80" && scheme == "http" || port == ":443" && scheme == "https" {
			t.Fatalf("%q -> %q: default port kept", host, got)
		}
	})
}

// ScopeDomain runs the public suffix list over whatever host a URL has.
func FuzzScopeDomain(f *testing.F) {
	for _, s := range []string{
		"https://a.example.co.uk/x",
		"http://[fe80::1%25eth0.100]:8080/",
		"http://localhost:8080",
		"https://co.uk.",
		"http://..example.com../",
		"//Ex%41mple.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		req := &http.Request{URL: u, Host: u.Host}
		byHost := adaptive.ScopeHost(req)
		got := adaptive.ScopeDomain(req)
		// the registered domain is the host or one of its parent domains
		h := fuzzHostPart(byHost)
		if got != byHost && got != h && !strings.HasSuffix(h, "."+got) {
			t.Fatalf("%q: ScopeDomain %q is not a parent of ScopeHost %q", raw, got, byHost)
		}
		if again := adaptive.ScopeDomain(req); again != got {
			t.Fatalf("%q: %q then %q", raw, got, again)
		}
	})
}
