package adaptive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/internal/hook"
)

// Attach makes c polite with one line and returns its controller:
//
//	ctrl := adaptive.Attach(c)
//
// It wraps the collector's current transport, and keeps wrapping it: a
// transport, proxy function or client set on c after Attach (WithTransport,
// SetProxy, SetProxyFunc, SetClient) is wrapped again before the next
// request goes out, with the user's transport and proxy function kept
// underneath, a warning in the log (once) and ctrl.Err() saying so. The
// order of Attach and those setters does not matter. What the check cannot
// see is said in docs/colly.md: Colly's own robots.txt fetch
// (IgnoreRobotsTxt = false) runs before any callback, so the first one
// after a transport set after Attach goes out on that transport.
//
// One controller per collector family: a collector and its clones
// (c.Clone()) share one HTTP client in Colly, so they share one controller.
// Attach on a collector (or a clone) that already has one returns that
// controller as it is, without wrapping it again; a Config given then is
// ignored, with a warning in the log. Clones made after Attach are policed
// through the client they share; call Attach on a clone too (it returns the
// same controller) so that a transport set through the clone is caught by
// the clone's own requests. To share one controller between collectors that
// are not clones, call AttachTo on the second.
//
// The collector's request timeout (colly's default is 10 s) moves into the
// controller as the per-attempt timeout, counted from the moment a request
// is sent: time spent waiting politely (a 12 s Retry-After, say) never uses
// it up, while a server that hangs still times out per attempt. A timeout
// set later (SetRequestTimeout, or a client's) moves there too, before the
// next request; Config.AttemptTimeout overrides them all.
//
// cfg is the controller's configuration (at most one; none means
// polite.Config{}), with robots.txt on unless cfg.Robots says otherwise
// (Crawl-delay, Allow and Disallow). LimitRules already set on c still
// apply on top; convert them with FromLimitRule instead. An invalid setting
// fails safe (its most conservative value, every valid one kept), and so
// does a collector whose HTTP client cannot be read; ctrl.Err() reports
// both. docs/colly.md says how caches, redirects, queues and Colly's own
// robots.txt handling combine with it.
func Attach(c *colly.Collector, cfg ...polite.Config) *polite.Controller {
	return attach(c, cfg, collySlot)
}

// attach is Attach reading the collector's client with read.
func attach(c *colly.Collector, cfg []polite.Config, read func(*colly.Collector) (**http.Client, error)) *polite.Controller {
	if existing := attached(c, read); existing != nil {
		if len(cfg) > 0 {
			logger(existing).Warn("adaptive: the collector (or the collector it was cloned from) already has a controller: Attach returns it, and the Config given is ignored")
		}
		if err := attachTo(c, existing, read); err != nil {
			hook.AddErr(existing, err)
		}
		return existing
	}
	one := polite.Config{}
	if len(cfg) > 0 {
		one = cfg[0]
	}
	ctrl := hook.New(one, true).(*polite.Controller)
	if len(cfg) > 1 {
		hook.AddErr(ctrl, fmt.Errorf("%w: %d Configs given to Attach, the first is used", polite.ErrConfig, len(cfg)))
	}
	if err := attachTo(c, ctrl, read); err != nil {
		hook.AddErr(ctrl, err)
		logger(ctrl).Error(err.Error())
	}
	return ctrl
}

// logger is ctrl's logger.
func logger(ctrl *polite.Controller) *slog.Logger {
	l, _, _ := hook.Settings(ctrl)
	return l
}

// attached is the controller c's family already has (its guard's, or the
// one its transport belongs to), or nil.
func attached(c *colly.Collector, read func(*colly.Collector) (**http.Client, error)) *polite.Controller {
	if c == nil {
		return nil
	}
	slot, err := read(c)
	if err != nil || slot == nil {
		return nil
	}
	if g := guardOf(c, slot); g != nil && g.live() {
		return g.ctrl
	}
	// (a guard retired: another controller took the family over, and a
	// clone made before still holds the old guard; the transport says
	// whose it is)
	if *slot != nil {
		if ctrl, _, _, ok := hook.Unwrap((*slot).Transport); ok {
			return ctrl.(*polite.Controller)
		}
	}
	return nil
}

// AttachTo makes c a collector of ctrl too, as Attach makes it of a
// controller of its own: two collectors of one host share one controller
// (one schedule, one pause, one law). A transport that is already ctrl's is
// left as it is; another controller's is replaced, ctrl wrapping what that
// one wrapped (never a controller inside a controller), for the whole
// collector family. The collector's request timeout becomes the
// per-attempt timeout of c's transport, unless ctrl's Config.AttemptTimeout
// is set. The error wraps ErrAttach: c has no HTTP client, or it cannot be
// read (then the transport wrapped is http.DefaultTransport, and transports
// set on c later are not seen).
func AttachTo(c *colly.Collector, ctrl *polite.Controller) error {
	return attachTo(c, ctrl, collySlot)
}

func attachTo(c *colly.Collector, ctrl *polite.Controller, read func(*colly.Collector) (**http.Client, error)) error {
	if c == nil {
		return fmt.Errorf("%w: nil collector", ErrAttach)
	}
	slot, readErr := read(c)
	_, robots, timeout := hook.Settings(ctrl)
	if readErr != nil {
		if timeout == 0 {
			timeout = collyDefaultTimeout
		}
		if e := withTransport(c, hook.Transport(ctrl, http.DefaultTransport, timeout)); e != nil {
			return fmt.Errorf("%w: %w; and Colly's WithTransport failed: %v; nothing attached", ErrAttach, readErr, e)
		}
		return fmt.Errorf("%w: %w; wrapping http.DefaultTransport: a transport or proxy set on the collector is not used (set c.WithTransport(ctrl.Transport(yours)) yourself)", ErrAttach, readErr)
	}
	if slot == nil || *slot == nil {
		return fmt.Errorf("%w: the collector has no HTTP client (made without colly.NewCollector, or SetClient(nil)); nothing attached", ErrAttach)
	}
	g := guardOf(c, slot)
	switch {
	case g != nil && g.ctrl == ctrl:
		g.watch(c)
		g.check(nil)
		return nil
	case g != nil:
		g.retire() // another controller's: this one takes the family over
	}
	if !c.IgnoreRobotsTxt && robots {
		logger(ctrl).Info("adaptive: Colly's robots.txt handling is on as well (IgnoreRobotsTxt = false): both read one fetch of robots.txt, Colly refuses disallowed URLs with colly.ErrRobotsTxtBlocked before the controller sees them, the controller applies Crawl-delay")
	}
	g = &guard{ctrl: ctrl, slot: slot}
	g.mu.Lock()
	g.install(*slot, true)
	g.mu.Unlock()
	g.watch(c)
	return nil
}

// guard keeps a collector family's requests under its controller whatever
// is set on the collector after Attach. Attach registers its check as an
// OnRequest callback of the collector, which Colly runs before each
// request goes to the client: a pointer comparison of the client's
// transport with the one installed, and when they differ (or a request
// timeout was set) the transport is wrapped again. A family's collectors
// share Colly's client, reached through slot (the backend's Client field,
// which SetClient replaces).
type guard struct {
	ctrl *polite.Controller
	slot **http.Client
	mu   sync.Mutex
	// guarded by mu:
	t       http.RoundTripper // the controller's transport installed last
	timeout time.Duration     // its attempt timeout
	retired bool              // another controller took the family over
	warned  bool              // the transport set after Attach was logged
}

// guardKey is where a collector's Context holds its hook (guardRef); a
// clone copies its parent's Context, so a family finds its guard there.
type guardKey struct{}

// guardRef is a collector's link to its family's guard; c is the collector
// whose check it is (a clone finds its parent's and registers its own).
type guardRef struct {
	g *guard
	c *colly.Collector
}

// guardOf is the guard of c's family (its client slot), or nil.
func guardOf(c *colly.Collector, slot **http.Client) *guard {
	if c.Context == nil {
		return nil
	}
	ref, ok := c.Context.Value(guardKey{}).(guardRef)
	if !ok || ref.g.slot != slot {
		return nil // none, or another family's (a Context passed on by hand)
	}
	return ref.g
}

// watch registers the check on c unless it has it.
func (g *guard) watch(c *colly.Collector) {
	if ref, ok := c.Context.Value(guardKey{}).(guardRef); ok && ref.g == g && ref.c == c {
		return
	}
	c.Context = context.WithValue(c.Context, guardKey{}, guardRef{g, c})
	c.OnRequest(g.check)
}

// live reports whether g still guards its family (not retired).
func (g *guard) live() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.retired
}

// retire stops g: another controller took the family over.
func (g *guard) retire() {
	g.mu.Lock()
	g.retired = true
	g.mu.Unlock()
}

// check is the OnRequest callback (and Attach's look): the client's
// transport must be the one installed, with no client timeout on top.
func (g *guard) check(*colly.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return
	}
	client := *g.slot
	if client == nil || client.Transport == g.t && client.Timeout == 0 {
		return // nil: SetClient(nil), which Colly itself cannot send with
	}
	g.install(client, false)
}

// install wraps client's transport with the controller; first is Attach's
// own. Called with mu held.
func (g *guard) install(client *http.Client, first bool) {
	ctrl := g.ctrl
	cur, timeout := client.Transport, client.Timeout
	if owner, next, t, ok := hook.Unwrap(cur); ok {
		if owner != ctrl && !first {
			// a transport of another controller set by hand: the user's
			// choice of controller; this guard steps aside
			g.retired = true
			logger(ctrl).Warn("adaptive: the collector's transport was set to another controller's after Attach: that controller polices it now")
			return
		}
		if owner == ctrl && timeout == 0 {
			g.t, g.timeout = cur, t
			return
		}
		cur = next // a controller wraps no controller
		if timeout == 0 {
			timeout = t // the collector's, moved there before
		}
		if owner != ctrl {
			logger(ctrl).Warn("adaptive: the collector's transport belongs to another controller: replaced by this one")
		}
	} else if !first {
		if !g.warned {
			g.warned = true
			err := fmt.Errorf("%w: the collector's transport was replaced after Attach (WithTransport, SetProxy, SetProxyFunc or SetClient): wrapped again, the new transport underneath", ErrAttach)
			hook.AddErr(ctrl, err)
			logger(ctrl).Warn(err.Error(), "transport", fmt.Sprintf("%T", cur))
		}
	}
	if timeout == 0 && g.t != nil {
		timeout = g.timeout
	}
	if _, _, set := hook.Settings(ctrl); set != 0 {
		timeout = set
	}
	g.t, g.timeout = hook.Transport(ctrl, cur, timeout), timeout
	client.Timeout = 0
	client.Transport = g.t
}

// withTransport is c.WithTransport for a collector whose layout is
// unknown: the setter may still work, or panic on a layout it no longer
// has.
func withTransport(c *colly.Collector, t http.RoundTripper) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	c.SetRequestTimeout(0)
	c.WithTransport(t)
	return nil
}

// ControllerOf returns the controller attached to c (or to the collector c
// was cloned from), or nil when there is none or it cannot be read.
func ControllerOf(c *colly.Collector) *polite.Controller { return attached(c, collySlot) }

const collyDefaultTimeout = 10 * time.Second

// ErrAttach: Attach (or AttachTo) could not do all it should with the
// collector (it has no HTTP client, or Colly's layout changed and the
// client cannot be read), or found a transport set on it after Attach and
// wrapped it again; the error says which, and what was done instead.
var ErrAttach = errors.New("adaptive: attach")

// errCollyLayout: Colly's Collector is not laid out as in v2.3.0.
var errCollyLayout = errors.New("cannot read the collector's http.Client: Colly's layout is not the one of v2.3.0")

// collySlot finds where the collector keeps its *http.Client: an unexported
// field (backend.Client) that Colly offers no getter for, shared by a
// collector and its clones, and replaced by SetClient. It is nil when the
// collector has no backend (not made by NewCollector). It fails when
// Colly's layout is not the one this was written against (v2.3.0);
// TestCollyLayout checks it against the version in go.mod.
func collySlot(c *colly.Collector) (**http.Client, error) {
	v := reflect.ValueOf(c).Elem().FieldByName("backend")
	if !v.IsValid() || v.Kind() != reflect.Pointer {
		return nil, errCollyLayout
	}
	if v.IsNil() {
		return nil, nil // a Collector not made by NewCollector
	}
	f := v.Elem().FieldByName("Client")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*http.Client]() {
		return nil, errCollyLayout
	}
	return (**http.Client)(unsafe.Pointer(f.UnsafeAddr())), nil
}

// collyClient is the collector's *http.Client (nil when it has none).
func collyClient(c *colly.Collector) (*http.Client, error) {
	slot, err := collySlot(c)
	if err != nil || slot == nil {
		return nil, err
	}
	return *slot, nil
}

// FromLimitRule converts a colly.LimitRule into a polite.Rule, for Config.Rules:
//
//	r, err := adaptive.FromLimitRule(&colly.LimitRule{DomainGlob: "*.example.com", Parallelism: 2, Delay: time.Second})
//	ctrl := adaptive.Attach(c, polite.Config{Rules: []polite.Rule{r}}) // and no c.Limit
//
// The rule matches hosts with Colly's own matcher (its glob syntax,
// DomainRegexp, or both); Delay becomes MinGap and RandomDelay RandomGap;
// Parallelism becomes MaxConcurrency (Colly's 0 is 1). The rate under them
// stays adaptive. Where the meaning differs:
//   - Parallelism is one semaphore per rule in Colly, shared by all the
//     hosts the rule matches; here MaxConcurrency applies per scope (a host
//     by default). Config.GlobalRate is a ceiling across scopes.
//   - Colly sleeps Delay (plus up to RandomDelay) after each response,
//     holding its slot: with Parallelism p, p requests go every Delay plus
//     a response time. Here MinGap is the shortest gap between two sends of
//     a scope, kept before the send: at most 1/Delay requests per second,
//     whatever the concurrency.
//   - Colly matches URL.Host only, so "*.example.com" misses
//     "a.example.com:8080"; here a rule matches the host, or host:port.
func FromLimitRule(lr *colly.LimitRule) (polite.Rule, error) {
	if lr == nil {
		return polite.Rule{}, fmt.Errorf("%w: nil LimitRule", polite.ErrConfig)
	}
	if lr.Delay < 0 || lr.RandomDelay < 0 || lr.Parallelism < 0 {
		return polite.Rule{}, fmt.Errorf("%w: LimitRule with a negative Delay, RandomDelay or Parallelism", polite.ErrConfig)
	}
	m := &colly.LimitRule{DomainGlob: lr.DomainGlob, DomainRegexp: lr.DomainRegexp}
	if err := m.Init(); err != nil { // compiles the patterns, as c.Limit does
		return polite.Rule{}, fmt.Errorf("%w: LimitRule: %w", polite.ErrConfig, err)
	}
	return polite.Rule{
		Match:          m.Match,
		MinGap:         lr.Delay,
		RandomGap:      lr.RandomDelay,
		MaxConcurrency: max(lr.Parallelism, 1),
	}, nil
}
