package adaptive

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// NormalizeHost returns the scope key of a URL host: lower case, trailing
// dot and default port (80 for http, 443 for https) stripped, brackets kept
// for IPv6. It allocates only when the host has upper-case letters or a
// trailing dot.
func NormalizeHost(scheme, host string) string {
	h, port := splitHostPort(host)
	if strings.HasSuffix(h, ".") {
		h = strings.TrimSuffix(h, ".")
	}
	if hasUpper(h) {
		h = strings.ToLower(h)
	}
	if port == "" || (port == "80" && scheme == "http") || (port == "443" && scheme == "https") {
		if len(h) == len(host) {
			return host
		}
		return h
	}
	if len(h)+1+len(port) == len(host) && host[len(h)] == ':' && host[:len(h)] == h {
		return host
	}
	return h + ":" + port
}

func splitHostPort(hostport string) (host, port string) {
	if strings.HasPrefix(hostport, "[") {
		if i := strings.LastIndexByte(hostport, ']'); i > 0 {
			host = hostport[:i+1]
			if rest := hostport[i+1:]; strings.HasPrefix(rest, ":") {
				port = rest[1:]
			}
			return host, port
		}
		return hostport, ""
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && strings.IndexByte(hostport[:i], ':') < 0 {
		return hostport[:i], hostport[i+1:]
	}
	return hostport, ""
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

func reqHost(r *http.Request) string {
	if r.URL != nil && r.URL.Host != "" {
		return r.URL.Host
	}
	return r.Host
}

func reqScheme(r *http.Request) string {
	if r.URL != nil && r.URL.Scheme != "" {
		return r.URL.Scheme
	}
	return "http"
}

// ScopeHost is the default scope: one controller per normalised host
// (see NormalizeHost), port included when it is not the default one.
func ScopeHost(r *http.Request) string { return NormalizeHost(reqScheme(r), reqHost(r)) }

// ScopeDomain puts every host of one registered domain (eTLD+1, by the
// public suffix list) under one controller: a.example.co.uk and
// b.example.co.uk share example.co.uk. IP addresses and hosts without a
// registered domain fall back to ScopeHost.
func ScopeDomain(r *http.Request) string {
	h, _ := splitHostPort(ScopeHost(r))
	if net.ParseIP(strings.Trim(h, "[]")) != nil {
		return ScopeHost(r)
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil {
		return ScopeHost(r)
	}
	return d
}

// ScopeProxy returns a ScopeFunc that puts all requests going through one
// proxy under one controller, as servers see the proxy's address. proxy is
// the same function given to the transport (http.ProxyFromEnvironment, or a
// sticky function of your own); it must be deterministic for a request, so do
// not pass a rotating switcher here: scope by a key your switcher sets
// instead. Requests with no proxy are scoped by host.
func ScopeProxy(proxy func(*http.Request) (*url.URL, error)) ScopeFunc {
	return func(r *http.Request) string {
		u, err := proxy(r)
		if err != nil || u == nil {
			return ScopeHost(r)
		}
		return "proxy:" + NormalizeHost(u.Scheme, u.Host)
	}
}
