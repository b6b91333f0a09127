package adaptive

import (
	"net/http"
	"reflect"

	"github.com/gocolly/colly/v2"
)

// Attach makes c polite with one line and returns its controller:
//
//	ctrl := adaptive.Attach(c)
//
// It wraps the collector's current transport: set proxies (SetProxyFunc),
// a custom transport (WithTransport) or a client (SetClient) before Attach.
// Colly's SetProxyFunc called after Attach replaces the whole transport and
// so detaches the controller; call Attach (or ctrl.Attach) again after it.
//
// The collector's request timeout (colly's default is 10 s) moves into the
// controller as the per-attempt timeout, counted from the moment a request
// is sent: time spent waiting politely (a 12 s Retry-After, say) never uses
// it up, while a server that hangs still times out per attempt. Call
// SetRequestTimeout before Attach, or pass WithAttemptTimeout.
//
// Attach takes over the job of colly.LimitRule. LimitRules already set still
// apply on top (their Parallelism caps, their Delay sleeps after each
// response): remove them, or keep one only as a hard cap.
//
// Clones (c.Clone()) share the collector's HTTP backend and so this
// controller. robots.txt Crawl-delay is honoured by default (WithRobots(false)
// turns it off); colly's own robots.txt handling (IgnoreRobotsTxt) is left as
// it is. An invalid option fails safe (its most conservative value, every
// valid one kept); ctrl.Err() reports it.
func Attach(c *colly.Collector, opts ...Option) *Controller {
	ctrl := mustNew(opts, true)
	ctrl.Attach(c)
	return ctrl
}

// Attach wraps c's current transport with this controller (once: a
// transport that is already this controller's is left as it is). The
// collector's request timeout becomes the per-attempt timeout of this
// collector's transport, unless Config.AttemptTimeout is set; the
// controller's settings are never changed.
func (ctrl *Controller) Attach(c *colly.Collector) {
	client := collyClient(c)
	var next http.RoundTripper
	timeout := ctrl.st.AttemptTimeout
	if client != nil {
		next = client.Transport
		if t, ok := next.(*Transport); ok && t.c == ctrl {
			return
		}
		if timeout == 0 {
			timeout = client.Timeout
		}
	} else if timeout == 0 {
		timeout = collyDefaultTimeout
	}
	c.SetRequestTimeout(0)
	c.WithTransport(ctrl.transport(next, timeout))
}

const collyDefaultTimeout = 10e9

// collyClient reads the collector's *http.Client, which Colly keeps in an
// unexported field and offers no getter for. It returns nil if Colly's
// layout is not the one this was written against (v2.3.0); Attach then
// wraps http.DefaultTransport and assumes Colly's default 10 s timeout.
func collyClient(c *colly.Collector) *http.Client {
	v := reflect.ValueOf(c).Elem().FieldByName("backend")
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	f := v.Elem().FieldByName("Client")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*http.Client]() || f.IsNil() {
		return nil
	}
	return (*http.Client)(f.UnsafePointer())
}
