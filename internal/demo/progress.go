package demo

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/classify"
)

// Host is a scope to follow: the name to print and the controller's scope
// key.
type Host struct {
	Name  string
	Scope string
}

// HostOf is the Host of a testserver base URL ("http://127.0.0.1:PORT")
// under name.
func HostOf(name, base string) Host {
	return Host{Name: name, Scope: ScopeOf(base)}
}

// ScopeOf is the key of the scope a controller gives rawURL under the
// default Config.Scope (its normalised host), or "" for a URL that does
// not parse.
func ScopeOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return polite.ScopeHost(&http.Request{URL: u, Host: u.Host})
}

// Progress writes one line per host: the time t, then the scope's pacing
// rate, concurrency limit, requests in flight, requests accepted (as the
// controller counts them: robots.txt included) and 429s so far, and why a
// request to it waits right now (Why).
func Progress(w io.Writer, t time.Duration, ctrl *polite.Controller, hosts []Host) {
	now := time.Now()
	for _, h := range hosts {
		s, ok := ctrl.Snapshot(h.Scope)
		if !ok {
			fmt.Fprintf(w, "%6.1fs %-8s no requests yet\n", t.Seconds(), h.Name)
			continue
		}
		fmt.Fprintf(w, "%6.1fs %-8s rate %6.2f/s  limit %4d  in flight %3d  accepted %6d  429s %4d  %s\n",
			t.Seconds(), h.Name, s.Rate, s.Limit, s.InFlight, s.Counts[classify.Success], s.Statuses[429], Why(s, now))
	}
}

// Why says in a few words what holds the scope of s back at now: a park,
// a pause and its reason, the breaker's probe, the concurrency limit, a
// ceiling on the rate, or the rate itself ("-" when nothing waits).
func Why(s polite.Snapshot, now time.Time) string {
	switch {
	case s.Parked:
		return "waits: parked after blocks"
	case s.PauseReason != polite.PauseNone:
		return fmt.Sprintf("waits: paused (%s), %.1fs left", s.PauseReason, s.PausedUntil.Sub(now).Seconds())
	case s.Waiting == 0 && s.InFlight < max(int(s.Limit), 1):
		return "-"
	case s.Breaker == polite.BreakerHalfOpen:
		return "waits: breaker half-open, one probe at a time"
	case s.InFlight >= max(int(s.Limit), 1):
		return "waits: concurrency limit"
	case s.Ceiling == polite.CeilingConfigured:
		return fmt.Sprintf("waits: configured rate %.2f/s", s.CeilingRate)
	case s.Ceiling != polite.CeilingNone:
		return fmt.Sprintf("waits: %s ceiling %.2f/s", s.Ceiling, s.CeilingRate)
	}
	return "waits: pacing (" + string(s.Phase) + ")"
}

// Summary writes the controller's final word on each host: requests by
// outcome, the 429s, 503s and 403s among them, retries, time paused, the
// capacity estimate and the ceiling that binds.
func Summary(w io.Writer, ctrl *polite.Controller, hosts []Host) {
	fmt.Fprintf(w, "controller, per host:\n")
	for _, h := range hosts {
		s, ok := ctrl.Snapshot(h.Scope)
		if !ok {
			fmt.Fprintf(w, "  %-8s no scope\n", h.Name)
			continue
		}
		var n uint64
		for _, c := range s.Counts {
			n += c
		}
		ceiling := "none binds"
		if s.Ceiling != polite.CeilingNone {
			ceiling = fmt.Sprintf("%s %.2f/s", s.Ceiling, s.CeilingRate)
		}
		fmt.Fprintf(w, "  %-8s %d requests (429: %d, 503: %d, 403: %d), %d retries, paused %.1fs; %s, estimate %.2f/s, ceiling %s, rtt %v\n",
			h.Name, n, s.Statuses[429], s.Statuses[503], s.Statuses[403], s.Retries, s.PausedTotal.Seconds(),
			s.Phase, s.Estimate, ceiling, s.RTT.Round(time.Millisecond))
	}
}
