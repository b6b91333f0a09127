package adaptive

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/gocolly/colly/v2"
)

// Attach makes c polite with one line and returns its controller:
//
//	ctrl := adaptive.Attach(c)
//
// It wraps the collector's current transport: set proxies (SetProxyFunc),
// a custom transport (WithTransport) or a client (SetClient) before Attach,
// or name the transport with WithBaseTransport. Colly's SetProxyFunc called
// after Attach replaces the whole transport and so detaches the controller;
// call Attach (or ctrl.Attach) again after it.
//
// One controller per collector family: a collector and its clones
// (c.Clone()) share one HTTP client in Colly, so they share one controller.
// Attach on a collector (or a clone) that already has one returns that
// controller as it is, without wrapping it again; options given then are
// ignored, with a warning in the log. To share one controller between
// collectors that are not clones, call ctrl.Attach on the second.
//
// The collector's request timeout (colly's default is 10 s) moves into the
// controller as the per-attempt timeout, counted from the moment a request
// is sent: time spent waiting politely (a 12 s Retry-After, say) never uses
// it up, while a server that hangs still times out per attempt. Call
// SetRequestTimeout before Attach, or pass WithAttemptTimeout.
//
// robots.txt is on (Crawl-delay, Allow and Disallow; WithRobots(false) and
// WithRobotsDisallow(false) turn it off). LimitRules already set on c still
// apply on top; convert them with FromLimitRule instead. An invalid option
// fails safe (its most conservative value, every valid one kept), and so
// does a collector whose HTTP client cannot be read; ctrl.Err() reports
// both. README.md ("Using it with Colly") says how caches, redirects,
// queues and Colly's own robots.txt handling combine with it.
func Attach(c *colly.Collector, opts ...Option) *Controller {
	return attach(c, opts, collyClient)
}

// attach is Attach reading the collector's client with read.
func attach(c *colly.Collector, opts []Option, read func(*colly.Collector) (*http.Client, error)) *Controller {
	if c != nil {
		if client, err := read(c); err == nil && client != nil {
			if t, ok := client.Transport.(*Transport); ok {
				if len(opts) > 0 {
					logger(t.c.st).Warn("adaptive: the collector (or the collector it was cloned from) already has a controller: Attach returns it, and the options given are ignored")
				}
				return t.c
			}
		}
	}
	ctrl := mustNew(opts, true)
	if err := ctrl.attach(c, read); err != nil {
		ctrl.err = errors.Join(ctrl.err, err)
		logger(ctrl.st).Error("adaptive: Attach: "+err.Error(), "err", err)
	}
	return ctrl
}

// Attach wraps c's current transport with this controller, so that two
// collectors share one controller (the right way for two collectors on one
// host: one schedule, one pause). A transport that is already this
// controller's is left as it is; another controller's is replaced, this
// one wrapping what that one wrapped (never a controller inside a
// controller), for the whole collector family. The collector's request
// timeout becomes the per-attempt timeout of this collector's transport,
// unless Config.AttemptTimeout is set; the controller's settings are never
// changed. The error wraps ErrAttach: c has no HTTP client, or it cannot be
// read (then the transport wrapped is Config.BaseTransport, or
// http.DefaultTransport).
func (ctrl *Controller) Attach(c *colly.Collector) error {
	return ctrl.attach(c, collyClient)
}

func (ctrl *Controller) attach(c *colly.Collector, read func(*colly.Collector) (*http.Client, error)) error {
	if c == nil {
		return fmt.Errorf("%w: nil collector", ErrAttach)
	}
	client, readErr := read(c)
	if client == nil && readErr == nil {
		return fmt.Errorf("%w: the collector has no HTTP client (made without colly.NewCollector, or SetClient(nil)); nothing attached", ErrAttach)
	}
	timeout := ctrl.st.AttemptTimeout
	next := ctrl.st.BaseTransport
	var err error
	if readErr != nil {
		if next == nil {
			next = http.DefaultTransport
			err = fmt.Errorf("%w: %w; wrapping http.DefaultTransport: a transport or proxy set on the collector is not used (pass WithBaseTransport)", ErrAttach, readErr)
		}
		if timeout == 0 {
			timeout = collyDefaultTimeout
		}
	} else {
		cur, curTimeout := client.Transport, client.Timeout
		if t, ok := cur.(*Transport); ok {
			if t.c == ctrl {
				return nil
			}
			logger(ctrl.st).Warn("adaptive: the collector's transport belongs to another controller: replaced by this one")
			cur, curTimeout = t.next, t.attemptTimeout // the collector's timeout moved there
		}
		if next == nil {
			next = cur
		}
		if timeout == 0 {
			timeout = curTimeout
		}
		if !c.IgnoreRobotsTxt && ctrl.st.robots {
			logger(ctrl.st).Info("adaptive: Colly's robots.txt handling is on as well (IgnoreRobotsTxt = false): both read one fetch of robots.txt, Colly refuses disallowed URLs with colly.ErrRobotsTxtBlocked before the controller sees them, the controller applies Crawl-delay")
		}
	}
	t := ctrl.transport(next, timeout)
	if readErr != nil {
		if e := withTransport(c, t); e != nil {
			return fmt.Errorf("%w: %w; and Colly's WithTransport failed: %v; nothing attached", ErrAttach, readErr, e)
		}
		return err
	}
	c.SetRequestTimeout(0)
	c.WithTransport(t)
	return nil
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
func ControllerOf(c *colly.Collector) *Controller { return controllerOf(c) }

func controllerOf(c *colly.Collector) *Controller {
	if c == nil {
		return nil
	}
	client, err := collyClient(c)
	if err != nil || client == nil {
		return nil
	}
	if t, ok := client.Transport.(*Transport); ok {
		return t.c
	}
	return nil
}

const collyDefaultTimeout = 10 * time.Second

// errCollyLayout: Colly's Collector is not laid out as in v2.3.0.
var errCollyLayout = errors.New("cannot read the collector's http.Client: Colly's layout is not the one of v2.3.0")

// collyClient reads the collector's *http.Client, which Colly keeps in an
// unexported field (backend.Client) and offers no getter for; it is nil
// when the collector has none. It fails when Colly's layout is not the one
// this was written against (v2.3.0); TestCollyLayout checks it against the
// version in go.mod.
func collyClient(c *colly.Collector) (*http.Client, error) {
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
	if f.IsNil() {
		return nil, nil
	}
	return (*http.Client)(f.UnsafePointer()), nil
}

func logger(st *settings) *slog.Logger {
	if st.Logger != nil {
		return st.Logger
	}
	return slog.Default()
}

// FromLimitRule converts a colly.LimitRule into a Rule, for WithRule:
//
//	r, err := adaptive.FromLimitRule(&colly.LimitRule{DomainGlob: "*.example.com", Parallelism: 2, Delay: time.Second})
//	ctrl := adaptive.Attach(c, adaptive.WithRule(r)) // and no c.Limit
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
func FromLimitRule(lr *colly.LimitRule) (Rule, error) {
	if lr == nil {
		return Rule{}, fmt.Errorf("%w: nil LimitRule", ErrConfig)
	}
	if lr.Delay < 0 || lr.RandomDelay < 0 || lr.Parallelism < 0 {
		return Rule{}, fmt.Errorf("%w: LimitRule with a negative Delay, RandomDelay or Parallelism", ErrConfig)
	}
	m := &colly.LimitRule{DomainGlob: lr.DomainGlob, DomainRegexp: lr.DomainRegexp}
	if err := m.Init(); err != nil { // compiles the patterns, as c.Limit does
		return Rule{}, fmt.Errorf("%w: LimitRule: %w", ErrConfig, err)
	}
	return Rule{
		Match:          m.Match,
		MinGap:         lr.Delay,
		RandomGap:      lr.RandomDelay,
		MaxConcurrency: max(lr.Parallelism, 1),
	}, nil
}
