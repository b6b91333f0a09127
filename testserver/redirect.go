package testserver

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Paths of the redirect endpoints; see the package documentation.
const (
	redirectPath = "/redirect"
	loopPath     = "/redirect/loop"
	hopPath      = "/redirect/hop"
	hopEnd       = "/page/1"
	maxHops      = 1000
)

// reply is how an admitted request is answered. It depends on the request
// alone, so it is decided before the limit is consulted (its status is
// counted on arrival, like every status).
type reply struct {
	status   int    // 200, 302, 400 or 404
	page     int    // 200: the page, -1 for the index
	location string // 302: the Location header
	msg      string // 400: why, for the body
}

// resolve maps a request URL to its reply. Only the path selects the
// resource: a query string is ignored except by the redirect endpoints,
// which take their arguments from it.
func (h *host) resolve(u *url.URL) reply {
	switch u.Path {
	case redirectPath:
		return redirectTo(u.RawQuery)
	case loopPath:
		return reply{status: http.StatusFound, location: loopPath}
	case hopPath:
		return h.hop(u.RawQuery)
	}
	page, found := h.parsePath(u.Path)
	if !found {
		return reply{status: http.StatusNotFound}
	}
	return reply{status: http.StatusOK, page: page}
}

func badRedirect(msg string) reply {
	return reply{status: http.StatusBadRequest, msg: msg}
}

// single returns the only value of key in q, or false if there is none or
// more than one (an ambiguous request is refused rather than guessed).
func single(q url.Values, key string) (string, bool) {
	v := q[key]
	if len(v) != 1 {
		return "", false
	}
	return v[0], true
}

// redirectTo answers /redirect?to=URL: 302 to URL, verbatim, if it is an
// absolute http or https URL with a host. url.Parse refuses control
// characters, so the Location header cannot be split.
func redirectTo(rawQuery string) reply {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return badRedirect("malformed query")
	}
	to, ok := single(q, "to")
	if !ok {
		return badRedirect("want exactly one to=URL")
	}
	u, err := url.Parse(to)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return badRedirect("to must be an absolute http or https URL")
	}
	return reply{status: http.StatusFound, location: to}
}

// hop answers /redirect/hop?n=K&hosts=H1,H2,...: 302 to the next host's
// /redirect/hop with n=K-1, or to its /page/1 when K is 1. The next host is
// the one after h in the list, cyclically, or the first if h is not listed;
// hosts defaults to h alone.
func (h *host) hop(rawQuery string) reply {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return badRedirect("malformed query")
	}
	ns, ok := single(q, "n")
	if !ok {
		return badRedirect("want exactly one n=K")
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 || n > maxHops {
		return badRedirect("n must be an integer in 1.." + strconv.Itoa(maxHops))
	}
	list := h.name
	if v, present := q["hosts"]; present {
		if len(v) != 1 {
			return badRedirect("want at most one hosts=H1,H2,...")
		}
		list = v[0]
	}
	if strings.Count(list, ",") >= len(h.srv.names) {
		return badRedirect("hosts: more names than configured hosts")
	}
	names := strings.Split(list, ",")
	seen := make(map[string]bool, len(names))
	next := ""
	for i, name := range names {
		if _, ok := h.srv.hosts[name]; !ok {
			return badRedirect("hosts: " + strconv.Quote(name) + " is not a configured host")
		}
		if seen[name] {
			return badRedirect("hosts: " + strconv.Quote(name) + " listed twice")
		}
		seen[name] = true
		if name == h.name {
			next = names[(i+1)%len(names)]
		}
	}
	if next == "" {
		next = names[0]
	}
	base := h.srv.HostURL(next)
	if n == 1 {
		return reply{status: http.StatusFound, location: base + hopEnd}
	}
	// Configured names need no escaping, not even the commas between them.
	return reply{status: http.StatusFound, location: base + hopPath + "?n=" + strconv.Itoa(n-1) + "&hosts=" + list}
}
