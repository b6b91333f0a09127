package frontiermetrics

import (
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/colly-polite/polite/frontier"
)

// DefaultScopes is how many scopes, the last to finish, get gauges of
// their own.
const DefaultScopes = 10

// Collector is a prometheus.Collector over one frontier.Queue. Make one
// with New; the zero value is not usable. Safe for concurrent use.
type Collector struct {
	q      *frontier.Queue
	scopes int

	queued, running, done, failed, rate, added, eta *prometheus.Desc
	scopeQueued, scopeRate, scopeETA                *prometheus.Desc
}

// New is a collector of q's progress, with gauges of their own for the
// DefaultScopes scopes whose ETA is the longest (scopes is that number
// instead, if given and positive).
func New(q *frontier.Queue, scopes ...int) *Collector {
	c := &Collector{q: q, scopes: DefaultScopes}
	if len(scopes) > 0 && scopes[0] > 0 {
		c.scopes = scopes[0]
	}
	const p = "colly_polite_frontier_"
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(p+name, help, labels, nil)
	}
	c.queued = desc("queued_requests", "Requests waiting in the queue.")
	c.running = desc("running_requests", "Requests handed to a thread, not done.")
	c.done = desc("done_requests_total", "Requests ended without an error since the queue was made or opened.")
	c.failed = desc("failed_requests_total", "Requests ended with an error (OnError) since the queue was made or opened.")
	c.rate = desc("rate_requests_per_second", "Requests ended per second, recently.")
	c.added = desc("added_requests_per_second", "Requests added per second, recently: at the rate or above it, the crawl is still finding URLs and the ETA is a lower bound.")
	c.eta = desc("eta_seconds", "Until nothing is left if the rates hold: the slowest scope's backlog over its rate, or the backlog over the rate if longer. Absent while a scope with a backlog has no rate yet.")
	c.scopeQueued = desc("scope_queued_requests", "Requests of the scope waiting, for the scopes that finish last.", "scope")
	c.scopeRate = desc("scope_rate_requests_per_second", "Requests of the scope ended per second, recently, for the scopes that finish last.", "scope")
	c.scopeETA = desc("scope_eta_seconds", "The scope's backlog over its rate, for the scopes that finish last; absent without a rate.", "scope")
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queued, c.running, c.done, c.failed, c.rate, c.added, c.eta, c.scopeQueued, c.scopeRate, c.scopeETA} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	p := c.q.Progress()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.queued, float64(p.Queued))
	gauge(c.running, float64(p.Running))
	ch <- prometheus.MustNewConstMetric(c.done, prometheus.CounterValue, float64(p.Done))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(p.Failed))
	gauge(c.rate, p.Rate)
	gauge(c.added, p.Added)
	if p.ETA != frontier.Unknown {
		gauge(c.eta, p.ETA.Seconds())
	}
	n := 0
	for _, s := range p.Scopes { // the slowest first
		if n == c.scopes {
			break
		}
		if !utf8.ValidString(s.Scope) || len(s.Scope) > 128 { // a label Prometheus would refuse
			continue
		}
		n++
		gauge(c.scopeQueued, float64(s.Queued), s.Scope)
		gauge(c.scopeRate, s.Rate, s.Scope)
		if s.ETA != frontier.Unknown {
			gauge(c.scopeETA, s.ETA.Seconds(), s.Scope)
		}
	}
}
