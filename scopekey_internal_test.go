package polite

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalizeHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scheme, host, want string
	}{
		// already normal
		{"https", "example.com", "example.com"},
		{"http", "example.com:8080", "example.com:8080"},
		{"", "", ""},
		// case
		{"https", "Example.COM", "example.com"},
		{"http", "WWW.Example.com:8080", "www.example.com:8080"},
		{"http", "ÉCOLE.example", "xn--cole-9oa.example"},
		// trailing dots
		{"https", "example.com.", "example.com"},
		{"https", "example.com..", "example.com"},
		{"http", "example.com.:8080", "example.com:8080"},
		{"http", "Example.com.:80", "example.com"},
		{"https", ".", ""},
		// default ports, per scheme
		{"http", "example.com:80", "example.com"},
		{"https", "example.com:443", "example.com"},
		{"HTTPS", "example.com:443", "example.com"},
		{"http", "example.com:443", "example.com:443"},
		{"https", "example.com:80", "example.com:80"},
		{"ftp", "example.com:80", "example.com:80"},
		{"", "example.com:80", "example.com:80"},
		{"http", "example.com:", "example.com"}, // empty port: none
		// IPv4
		{"http", "127.0.0.1", "127.0.0.1"},
		{"http", "127.0.0.1:80", "127.0.0.1"},
		{"http", "127.0.0.1:8080", "127.0.0.1:8080"},
		// IPv6: brackets kept
		{"http", "[::1]", "[::1]"},
		{"http", "[::1]:80", "[::1]"},
		{"https", "[::1]:443", "[::1]"},
		{"http", "[::1]:8080", "[::1]:8080"},
		{"http", "[FE80::1]:8080", "[fe80::1]:8080"},
		{"http", "::1", "::1"}, // no brackets: no port to split off
		{"http", "2001:DB8::1", "2001:db8::1"},
		// weird input: no panic, a stable key
		{"http", ":80", ""},
		{"http", ":8080", ":8080"},
		{"http", "[", "["},
		{"http", "[::1", "[::1"},
		{"http", "[::1]junk", "[::1]"},
		{"http", "a:b:c", "a:b:c"},
		{"http", "Host:ABC", "host:abc"},
		// one server, one key, however it is spelt (IDNA for lookup,
		// netip's IPv6, a port's digits)
		{"http", "ｅｘａｍｐｌｅ.com", "example.com"},
		{"http", "example。com", "example.com"},
		{"http", "exam\u00adple.com", "example.com"},
		{"http", "xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"http", "bücher.example", "xn--bcher-kva.example"},
		{"http", "xn--zz.example", "xn--zz.example"}, // no valid punycode: as it is
		{"http", "example.com:080", "example.com"},
		{"http", "example.com:08080", "example.com:8080"},
		{"http", "[0:0::1]", "[::1]"},
		{"http", "[0:0::1]:8080", "[::1]:8080"},
		{"http", "[::ffff:127.0.0.1]", "127.0.0.1"},
		{"http", "[::ffff:127.0.0.1]:8080", "127.0.0.1:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.scheme+" "+tt.host, func(t *testing.T) {
			got := normalizeHost(tt.scheme, tt.host)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, normalizeHost(tt.scheme, got), "not idempotent")
		})
	}
}

// The doc of normalizeHost promises no allocation for hosts that are
// already normal: it runs for every request.
func TestNormalizeHostAllocs(t *testing.T) {
	for _, tt := range []struct{ scheme, host string }{
		{"https", "example.com"},
		{"http", "example.com:8080"},
		{"http", "example.com:80"}, // the default port is cut, not copied
		{"https", "[2001:db8::1]:8443"},
	} {
		allocs := testing.AllocsPerRun(100, func() { _ = normalizeHost(tt.scheme, tt.host) })
		assert.Zero(t, allocs, "normalizeHost(%q, %q)", tt.scheme, tt.host)
	}
	req := skRequest(t, "https://example.com/path")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = ScopeHost(req) }), "ScopeHost")
}

func skRequest(t testing.TB, rawURL string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	require.NoError(t, err)
	return req
}

func TestScopeHost(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"http://Example.com/a", "example.com"},
		{"https://example.com:443/", "example.com"},
		{"http://example.com:443/", "example.com:443"},
		{"https://example.com.:8443/", "example.com:8443"},
		{"http://[::1]:80/", "[::1]"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ScopeHost(skRequest(t, tt.url)), tt.url)
	}

	// no URL host (a server-side request, say): Request.Host, scheme http
	assert.Equal(t, "example.org", ScopeHost(&http.Request{URL: &url.URL{Path: "/"}, Host: "Example.org:80"}))
	assert.Equal(t, "example.org", ScopeHost(&http.Request{Host: "example.org"}))
	assert.Empty(t, ScopeHost(&http.Request{}))
	// the URL's host is where the request goes; a Host header override is not
	req := skRequest(t, "http://a.example/")
	req.Host = "b.example"
	assert.Equal(t, "a.example", ScopeHost(req))
}

func TestScopeDomain(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, want string }{
		{"https://a.example.co.uk/", "example.co.uk"},
		{"https://b.example.co.uk/x", "example.co.uk"},
		{"https://example.co.uk/", "example.co.uk"},
		{"https://A.B.Example.COM./", "example.com"},
		{"http://a.example.com:8080/", "example.com"},
		{"https://foo.appspot.com/", "foo.appspot.com"}, // private suffix
		// IP addresses: the host, port included
		{"http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"http://192.168.0.1/", "192.168.0.1"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[2001:DB8::1]/", "[2001:db8::1]"},
		{"http://[fe80::1%25eth0.100]:8080/", "[fe80::1%eth0.100]:8080"}, // zone with a dot
		// no registered domain: the host
		{"http://localhost:8080/", "localhost:8080"},
		{"http://localhost/", "localhost"},
		{"https://co.uk/", "co.uk"},
		{"https://com/", "com"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ScopeDomain(skRequest(t, tt.url)), tt.url)
	}
	assert.Empty(t, ScopeDomain(&http.Request{}))
}

func TestScopeProxy(t *testing.T) {
	t.Parallel()
	fixed := func(raw string) func(*http.Request) (*url.URL, error) {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		return func(*http.Request) (*url.URL, error) { return u, nil }
	}
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	failing := func(*http.Request) (*url.URL, error) { return nil, errors.New("no proxy for you") }

	req := skRequest(t, "https://Example.com:443/")
	tests := []struct {
		name  string
		proxy func(*http.Request) (*url.URL, error)
		want  string
	}{
		{"fixed", fixed("http://Proxy.Example:3128"), "proxy:proxy.example:3128"},
		{"default port", fixed("http://proxy.example:80"), "proxy:proxy.example"},
		{"https proxy", fixed("https://proxy.example:443"), "proxy:proxy.example"},
		{"socks", fixed("socks5://proxy.example:1080"), "proxy:proxy.example:1080"},
		{"credentials stay out of the key", fixed("http://user:secret@proxy.example:3128"), "proxy:proxy.example:3128"},
		{"nil URL: by host", noProxy, "example.com"},
		{"error: by host", failing, "example.com"},
		{"nil func: by host", nil, "example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			require.NotPanics(t, func() { got = ScopeProxy(tt.proxy)(req) })
			assert.Equal(t, tt.want, got)
		})
	}

	// every request through one proxy shares one scope
	f := ScopeProxy(fixed("http://proxy.example:3128"))
	assert.Equal(t, f(skRequest(t, "https://a.example/")), f(skRequest(t, "http://b.example:8080/")))
	// a proxy chosen per request keys by the proxy chosen
	byHost := ScopeProxy(func(r *http.Request) (*url.URL, error) {
		return &url.URL{Scheme: "http", Host: r.URL.Hostname() + "-proxy:3128"}, nil
	})
	assert.Equal(t, "proxy:a.example-proxy:3128", byHost(skRequest(t, "https://a.example/")))
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
		got := normalizeHost(scheme, host)
		if again := normalizeHost(scheme, got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", host, got, again)
		}
		if strings.ToLower(got) != got {
			t.Fatalf("%q -> %q: not lower case", host, got)
		}
		if h := fuzzHostPart(got); strings.HasSuffix(h, ".") {
			t.Fatalf("%q -> %q: trailing dot before the port", host, got)
		}
		// case folding may widen a letter (or an invalid byte) to 3
		// bytes, and IDNA's ASCII form a label by its "xn--" and its
		// encoding
		if len(got) > 4*len(host)+4 {
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
		byHost := ScopeHost(req)
		got := ScopeDomain(req)
		// the registered domain is the host or one of its parent domains
		h := fuzzHostPart(byHost)
		if got != byHost && got != h && !strings.HasSuffix(h, "."+got) {
			t.Fatalf("%q: ScopeDomain %q is not a parent of ScopeHost %q", raw, got, byHost)
		}
		if again := ScopeDomain(req); again != got {
			t.Fatalf("%q: %q then %q", raw, got, again)
		}
	})
}

// fuzzHostPart is the part of a scope key before its port, split as
// normalizeHost documents it: after the brackets of an IPv6 literal, or at
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

// A rule of a host reaches it however the host is spelt: before, a host
// in fullwidth letters missed Rule{Domain: "example.com"} and ran under
// Default, with no ceiling, and ":080" ran as a scope of its own beside
// ":80", twice the configured rate.
func TestRuleReachesEverySpelling(t *testing.T) {
	st, err := Config{Rules: []Rule{{Domain: "example.com", Rate: 1}}}.resolve()
	require.NoError(t, err)
	for _, host := range []string{"example.com", "ｅｘａｍｐｌｅ.com", "example。com", "EXAMPLE.com."} {
		assert.Equal(t, 1.0, st.ruleFor("http", host).Rate, host)
	}
	assert.Equal(t, normalizeHost("http", "example.com:80"), normalizeHost("http", "example.com:080"))

	// a rule written in punycode or in Unicode reaches both spellings;
	// ScopeDomain reads the public suffix list in its ASCII form
	st, err = Config{Rules: []Rule{{Domain: "*.xn--bcher-kva.example", Rate: 1}, {Domain: "*.école.example", Rate: 2}}}.resolve()
	require.NoError(t, err)
	for _, host := range []string{"www.xn--bcher-kva.example", "www.bücher.example"} {
		assert.Equal(t, 1.0, st.ruleFor("http", host).Rate, host)
	}
	for _, host := range []string{"www.xn--cole-9oa.example", "www.école.example"} {
		assert.Equal(t, 2.0, st.ruleFor("http", host).Rate, host)
	}
	for _, u := range []string{"http://a.xn--55qx5d.cn/", "http://a.公司.cn/"} {
		assert.Equal(t, "a.xn--55qx5d.cn", ScopeDomain(skRequest(t, u)), u)
	}
}
