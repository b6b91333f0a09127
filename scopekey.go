package polite

import (
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// normalizeHost returns the scope key of a URL host: lower case, trailing
// dots and default port (80 for http, 443 for https) stripped, brackets kept
// for IPv6. One server is one key, however its host is written: a name
// in Unicode or with fullwidth letters takes its ASCII form, as the
// resolver reads it and as Colly's URL parser writes it
// ("ｅｘａｍｐｌｅ.com" is example.com, "bücher.example" is
// xn--bcher-kva.example; the public suffix list and punycode rules read
// that form too), an IPv6
// address its canonical one ("[0:0::1]" is "[::1]", an IPv4-mapped one
// the IPv4), a port its digits without leading zeros (":080" is ":80").
// Before, each spelling was a scope of its own, with a rate of its own,
// and a rule of "example.com" missed the fullwidth one. It allocates only
// when the host has upper-case letters, non-ASCII bytes (IDNA's
// mapping), an IPv6 address not in its canonical form, a port with a
// leading zero, or trailing dots before a port.
func normalizeHost(scheme, host string) string {
	if needsLower(host) {
		host = strings.ToLower(host)
	}
	h, port := splitHostPort(host)
	h = strings.TrimRight(h, ".")
	if c, ok := canonicalHost(h); ok {
		h, host = c, ""
	}
	if len(port) > 1 && port[0] == '0' {
		if n, err := strconv.Atoi(port); err == nil && n <= 65535 {
			port, host = strconv.Itoa(n), ""
		}
	}
	if port == "" || (port == "80" && strings.EqualFold(scheme, "http")) || (port == "443" && strings.EqualFold(scheme, "https")) {
		return h // a prefix of host: no copy
	}
	if len(h)+1+len(port) == len(host) { // nothing was cut between h and port
		return host
	}
	return h + ":" + port
}

// canonicalHost is the one spelling of a host (lower case, no trailing
// dot) that another spelling of it differs from, and true; or h and false
// when h is that spelling already, or cannot be read (it is then its own
// key, as before). A name's spelling is its ASCII form after IDNA's
// mapping for lookup (fullwidth letters, an ideographic full stop, a soft
// hyphen read as the resolver reads them); an IPv6 address's is netip's.
func canonicalHost(h string) (string, bool) {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		if err != nil {
			return h, false
		}
		if a.Is4In6() {
			return a.Unmap().String(), true
		}
		var buf [64]byte
		if b := a.AppendTo(buf[:0]); string(b) != h[1:len(h)-1] {
			return "[" + string(b) + "]", true
		}
		return h, false
	}
	if !needsIDNA(h) {
		return h, false
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil || a == "" {
		return h, false
	}
	a = strings.TrimRight(a, ".")
	return a, a != h
}

// needsIDNA reports whether h may have another spelling under IDNA: a
// non-ASCII byte (an ASCII name is its own form).
func needsIDNA(h string) bool {
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return true
		}
	}
	return false
}

// canonicalGlob is a Rule.Domain glob in the hosts' form: each label
// without glob syntax that has non-ASCII bytes in its ASCII form, so that
// "*.bücher.example" matches the host xn--bcher-kva.example.
func canonicalGlob(d string) string {
	if !needsIDNA(d) {
		return d
	}
	labels := strings.Split(d, ".")
	for i, l := range labels {
		if needsIDNA(l) && !strings.ContainsAny(l, "*?[\\") {
			if a, err := idna.Lookup.ToASCII(l); err == nil && a != "" {
				labels[i] = a
			}
		}
	}
	return strings.Join(labels, ".")
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

// needsLower reports whether s has upper-case ASCII letters or any
// non-ASCII byte (which strings.ToLower folds, or leaves without copying).
func needsLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' || c >= 0x80 {
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

// ScopeHost is the default Config.Scope: one scope per host, in lower case
// without a trailing dot, with its port when it is not the scheme's
// default. Like every Scope function it is safe for concurrent use.
func ScopeHost(r *http.Request) string { return normalizeHost(reqScheme(r), reqHost(r)) }

// ScopeDomain puts every host of one registered domain (eTLD+1, by the
// public suffix list) under one controller: a.example.co.uk and
// b.example.co.uk share example.co.uk. IP addresses and hosts without a
// registered domain fall back to ScopeHost.
func ScopeDomain(r *http.Request) string {
	key := ScopeHost(r)
	h, _ := splitHostPort(key)
	// netip, not net.ParseIP: it knows zones, and a zone may hold dots
	// ("fe80::1%eth0.100") that the public suffix list would take for labels
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return key
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil {
		return key
	}
	return d
}

// ScopeProxy returns a Config.Scope that puts all requests going through
// one proxy under one scope, as servers see the proxy's address. proxy is
// the same function given to the transport (http.ProxyFromEnvironment, or a
// sticky function of your own); it must be deterministic for a request, so
// do not pass a rotating switcher here: scope by a key your switcher sets
// instead. Requests with no proxy (nil proxy, a nil URL or an error) are
// scoped by host.
func ScopeProxy(proxy func(*http.Request) (*url.URL, error)) func(*http.Request) string {
	if proxy == nil { // as http.Transport.Proxy: no proxy
		return ScopeHost
	}
	return func(r *http.Request) string {
		u, err := proxy(r)
		if err != nil || u == nil {
			return ScopeHost(r)
		}
		return "proxy:" + normalizeHost(u.Scheme, u.Host)
	}
}
