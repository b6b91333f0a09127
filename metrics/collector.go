package metrics

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/classify"
)

// Other is the scope label of every scope without a label of its own.
const Other = "other"

// Defaults of the label bound.
const (
	DefaultMaxScopes   = 100
	DefaultMinRequests = 10
)

// Collector is a prometheus.Collector over one polite.Controller. Make
// one with New; the zero value is not usable. It is safe for concurrent
// use (scrapes are serialised).
//
// Label cardinality is bounded: at a scrape, a scope gets a scope label of
// its own if it has recorded MinRequests requests and fewer than MaxScopes
// scopes have one; it keeps it while it lives. Every other scope, and every
// scope evicted, is summed under scope="other". Counters never go down:
// what a scope counted before the scrape that labels it stays in "other"
// if an earlier scrape counted it there, and an evicted scope's counts
// move to "other" whole (the controller keeps the totals of evicted
// scopes, polite.Report). Gauges of "other" are sums
// over its live scopes (the RTT a mean); each scope-state gauge
// (pause_reason, breaker_state, phase) counts the scopes in that state.
//
// A scope label is the scope's key when that is valid UTF-8 of at most 128
// bytes; otherwise the key's valid part, cut to fit, then "~" and a hash of
// the whole key, so that a hostile name (from a custom Config.Scope) never
// fails a scrape and two names that clean up alike stay apart. A scope
// whose label another scope already holds is summed under "other".
type Collector struct {
	ctrl        *polite.Controller
	maxScopes   int
	minRequests uint64
	d           descs

	mu       sync.Mutex
	labelled map[string]*labelled // guarded by mu
	last     time.Time            // guarded by mu: the Time of the last report
}

// labelled is a scope with a label of its own.
type labelled struct {
	label   string    // its scope label: the key, or the key made valid (labelOf)
	created time.Time // tells a scope from a later one with the same key
	base    tally     // what it had counted when it got its label (in "other")
}

// maxLabel bounds a scope label's length in bytes.
const maxLabel = 128

// labelOf is the scope label of key: the key itself when it is valid UTF-8
// of at most maxLabel bytes; otherwise its valid part, cut to fit, and "~"
// with 16 hex digits of a hash of the whole key, so that keys that clean
// up alike keep labels of their own. Whatever a scope function returns, a
// label never fails a scrape.
func labelOf(key string) string {
	if len(key) <= maxLabel && utf8.ValidString(key) {
		return key
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	tag := fmt.Sprintf("~%016x", h.Sum64())
	clean := strings.ToValidUTF8(key, "\uFFFD")
	cut := maxLabel - len(tag)
	for len(clean) > cut {
		_, size := utf8.DecodeLastRuneInString(clean)
		clean = clean[:len(clean)-size]
	}
	return clean + tag
}

// Option changes a Collector.
type Option func(*Collector)

// WithMaxScopes sets how many scopes may have a label of their own: 0
// means DefaultMaxScopes (100), a negative number none (every scope is
// "other").
func WithMaxScopes(n int) Option { return func(c *Collector) { c.maxScopes = n } }

// WithMinRequests sets the traffic threshold: how many requests a scope
// must have recorded before it gets a label. 0 means DefaultMinRequests
// (10).
func WithMinRequests(n uint64) Option { return func(c *Collector) { c.minRequests = n } }

// WithConstLabels adds labels to every metric, to tell several controllers
// apart in one registry.
func WithConstLabels(l prometheus.Labels) Option { return func(c *Collector) { c.d = newDescs(l) } }

// New returns a Collector over ctrl:
//
//	reg.MustRegister(metrics.New(ctrl))
func New(ctrl *polite.Controller, opts ...Option) *Collector {
	c := &Collector{ctrl: ctrl, labelled: map[string]*labelled{}}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.d.list == nil {
		c.d = newDescs(nil)
	}
	switch {
	case c.maxScopes == 0:
		c.maxScopes = DefaultMaxScopes
	case c.maxScopes < 0:
		c.maxScopes = 0
	}
	if c.minRequests == 0 {
		c.minRequests = DefaultMinRequests
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.list {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// under the lock: two scrapes must not see reports out of order
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.ctrl.Report()

	// A labelled scope keeps its label while it lives: forget those
	// evicted (gone, or replaced by a new scope with the same key). A label
	// in use is not given to another scope (a key spelled like another's
	// cleaned label): that one is folded, never a duplicate series.
	live := make(map[string]*polite.Snapshot, len(c.labelled))
	for i := range r.Scopes {
		if _, ok := c.labelled[r.Scopes[i].Scope]; ok {
			live[r.Scopes[i].Scope] = &r.Scopes[i]
		}
	}
	used := make(map[string]bool, len(c.labelled))
	for k, l := range c.labelled {
		if s := live[k]; s == nil || !s.Created.Equal(l.created) {
			delete(c.labelled, k)
			continue
		}
		used[l.label] = true
	}

	other := newSum()
	other.add(tallyOf(r.Evicted.Counts, r.Evicted.Statuses, r.Evicted.Retries, r.Evicted.PausedTotal))
	// "other" is shown once it holds something: a folded or evicted
	// scope, or what a scope counted before its label
	folded := r.EvictedScopes > 0
	for i := range r.Scopes {
		s := &r.Scopes[i]
		t := tallyOf(s.Counts, s.Statuses, s.Retries, s.PausedTotal)
		l := c.labelled[s.Scope]
		if l == nil && len(c.labelled) < c.maxScopes && t.requests() >= c.minRequests {
			if label := labelOf(s.Scope); label != Other && !used[label] {
				used[label] = true
				l = &labelled{label: label, created: s.Created}
				if !s.Created.After(c.last) {
					// the last scrape counted it in "other": what it
					// counted so far stays there, so that "other" never
					// goes down
					l.base = t
				}
				c.labelled[s.Scope] = l
			}
		}
		if l == nil {
			other.add(t)
			other.gauges(s)
			folded = true
			continue
		}
		other.add(l.base)
		folded = folded || l.base.requests() > 0
		own := newSum()
		own.add(t.minus(l.base))
		own.gauges(s)
		c.emit(ch, l.label, own, s)
	}
	if folded {
		c.emit(ch, Other, other, nil)
	}
	c.last = r.Time

	ch <- prometheus.MustNewConstMetric(c.d.scopes, prometheus.GaugeValue, float64(len(r.Scopes)))
	ch <- prometheus.MustNewConstMetric(c.d.evicted, prometheus.CounterValue, float64(r.EvictedScopes))
	ch <- prometheus.MustNewConstMetric(c.d.dropped, prometheus.CounterValue, float64(r.DroppedEvents))
	buckets := make(map[float64]uint64, len(r.WaitBounds))
	var cum uint64
	for i, b := range r.WaitBounds {
		cum += r.WaitCounts[i]
		buckets[b.Seconds()] = cum
	}
	total := cum
	for _, n := range r.WaitCounts[len(r.WaitBounds):] {
		total += n
	}
	ch <- prometheus.MustNewConstHistogram(c.d.wait, total, r.WaitSum.Seconds(), buckets)
}

// emit sends the series of one scope label. s is the scope's snapshot
// (nil for "other", which has no ceiling of its own).
func (c *Collector) emit(ch chan<- prometheus.Metric, scope string, m *sum, s *polite.Snapshot) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{scope}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{scope}, labels...)...)
	}
	gauge(c.d.rate, m.rate)
	gauge(c.d.estimate, m.estimate)
	gauge(c.d.limit, m.limit)
	gauge(c.d.inFlight, m.inFlight)
	gauge(c.d.waiting, m.waiting)
	rtt := 0.0
	if m.rttN > 0 {
		rtt = (m.rttSum / time.Duration(m.rttN)).Seconds()
	}
	gauge(c.d.rtt, rtt)
	for k, n := range m.paused {
		gauge(c.d.pauseReason, n, k)
	}
	for k, n := range m.breaker {
		gauge(c.d.breaker, n, k)
	}
	for k, n := range m.phase {
		gauge(c.d.phase, n, k)
	}
	if s != nil && s.Ceiling != polite.CeilingNone {
		gauge(c.d.ceiling, s.CeilingRate, string(s.Ceiling))
	}
	if s != nil && s.FleetProcesses > 0 {
		gauge(c.d.fleetRate, s.FleetRate)
		gauge(c.d.fleetProcesses, float64(s.FleetProcesses))
		shared := 0.0
		if s.FleetShared {
			shared = 1
		}
		gauge(c.d.fleetShared, shared)
	}
	for cl, n := range m.t.classes {
		if n > 0 {
			counter(c.d.requests, float64(n), classify.Class(cl).String())
		}
	}
	for code, n := range m.t.codes {
		if n > 0 {
			counter(c.d.responses, float64(n), codeLabel(code))
		}
	}
	counter(c.d.retries, float64(m.t.retries))
	counter(c.d.pauseSeconds, m.t.paused.Seconds())
}

func codeLabel(code int) string {
	if code == polite.StatusOther {
		return Other
	}
	return strconv.Itoa(code)
}

// classes is the number of classify classes.
const classes = int(classify.Canceled) + 1

// tally is what a scope (or a sum of scopes) counted.
type tally struct {
	classes [classes]uint64
	codes   map[int]uint64
	retries uint64
	paused  time.Duration
}

func tallyOf(counts map[classify.Class]uint64, statuses map[int]uint64, retries uint64, paused time.Duration) tally {
	t := tally{codes: statuses, retries: retries, paused: paused}
	for cl, n := range counts {
		if int(cl) < classes {
			t.classes[cl] = n
		}
	}
	return t
}

func (t tally) requests() uint64 {
	var n uint64
	for _, c := range t.classes {
		n += c
	}
	return n
}

// minus is t less what it had counted at base (never below zero).
func (t tally) minus(base tally) tally {
	out := tally{codes: make(map[int]uint64, len(t.codes)), retries: sub(t.retries, base.retries), paused: max(t.paused-base.paused, 0)}
	for i := range t.classes {
		out.classes[i] = sub(t.classes[i], base.classes[i])
	}
	for k, n := range t.codes {
		out.codes[k] = sub(n, base.codes[k])
	}
	return out
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// sum is what one scope label shows: a tally and gauges summed over its
// scopes.
type sum struct {
	t                                        tally
	rate, estimate, limit, inFlight, waiting float64
	rttSum                                   time.Duration
	rttN                                     int
	paused, breaker, phase                   map[string]float64
}

func newSum() *sum {
	return &sum{t: tally{codes: map[int]uint64{}}, paused: map[string]float64{}, breaker: map[string]float64{}, phase: map[string]float64{}}
}

func (m *sum) add(t tally) {
	for i, n := range t.classes {
		m.t.classes[i] += n
	}
	for k, n := range t.codes {
		m.t.codes[k] += n
	}
	m.t.retries += t.retries
	m.t.paused += t.paused
}

func (m *sum) gauges(s *polite.Snapshot) {
	m.rate += s.Rate
	m.estimate += s.Estimate
	m.limit += float64(s.Limit)
	m.inFlight += float64(s.InFlight)
	m.waiting += float64(s.Waiting)
	if s.RTT > 0 {
		m.rttSum += s.RTT
		m.rttN++
	}
	reason := string(s.PauseReason)
	switch {
	case s.Parked:
		reason = string(polite.PauseBlocked)
	case reason == "":
		reason = "none"
	}
	m.paused[reason]++
	m.breaker[string(s.Breaker)]++
	m.phase[string(s.Phase)]++
}
