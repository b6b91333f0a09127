package frontier

import (
	"container/heap"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/internal/hook"
)

// Errors. Match with errors.Is.
var (
	// ErrFull: MaxSize URLs are waiting; the URL was not added. It is
	// colly.ErrQueueFull, as colly/queue returns.
	ErrFull = colly.ErrQueueFull
	// ErrNotAttached: Run was given a collector that does not send through
	// the queue's controller (adaptive.Attach or adaptive.AttachTo it first).
	ErrNotAttached = errors.New("frontier: the collector is not attached to the queue's controller")
	// ErrLink: AddLink was given an href it cannot follow (empty, a
	// fragment of the same page, unparsable, or not http or https, such as
	// mailto: or javascript:). The error says which href, on which page.
	ErrLink = errors.New("frontier: unusable link")
	// ErrRunning: Run is already running.
	ErrRunning = errors.New("frontier: Run is already running")
)

// Config configures a Queue: a plain value, the zero value of every field
// meaning the stated default.
type Config struct {
	// Threads is how many requests run at once. 0 means 4.
	Threads int
	// MaxSize bounds the requests waiting, over all scopes together:
	// beyond it AddURL and AddRequest fail with ErrFull. 0 means 100,000
	// (colly/queue's default).
	MaxSize int
}

// Queue is a crawl frontier: per scope a FIFO of requests, handed to Run's
// threads when their scope can send. Make one with New; the zero value is
// not usable. Safe for concurrent use: callbacks may add URLs while Run
// runs.
type Queue struct {
	ctrl    *polite.Controller
	threads int
	maxSize int
	kick    chan struct{} // capacity 1: something changed, look again

	mu      sync.Mutex
	subs    map[string]*sub           // guarded by mu: scopes with requests waiting or running
	due     dueHeap                   // guarded by mu: scopes to ask the controller about, soonest first
	size    int                       // guarded by mu: requests waiting
	running int                       // guarded by mu: requests handed out, not done
	served  uint64                    // guarded by mu: counts hand-outs, for round robin
	active  bool                      // guarded by mu: Run is running
	stopped bool                      // guarded by mu: Stop was called
	hooked  map[*colly.Collector]bool // guarded by mu: async collectors given the end callbacks

	amu     sync.Mutex                  // a leaf: taken alone, by Colly's callbacks
	pending map[*colly.Context]*pending // guarded by amu: async requests sent, not ended
}

// pending is an async request a thread waits on: done is closed when
// Colly's last callback for it has run.
type pending struct {
	done    chan struct{}
	started bool // Do returned: Colly's wait group counts it
}

// sub is the FIFO of one scope. Guarded by Queue.mu.
type sub struct {
	key     string
	items   []item
	at      time.Time // when to ask the controller again; zero: now
	served  uint64    // the last hand-out: ties go to the scope served longest ago
	idx     int       // in Queue.due; -1 when not there
	parked  bool      // waits for the controller's Notify
	probing bool      // a request went out unreserved to read robots.txt
	running int
}

// item is one request: marshalled as colly/queue stores it, and its method
// and URL for the controller.
type item struct {
	data []byte
	req  *http.Request
}

// New makes a queue whose requests go through ctrl (the controller the
// collector given to Run is attached to).
func New(ctrl *polite.Controller, cfg Config) (*Queue, error) {
	if ctrl == nil {
		return nil, errors.New("frontier: nil controller")
	}
	if cfg.Threads < 0 || cfg.MaxSize < 0 {
		return nil, fmt.Errorf("frontier: negative Threads (%d) or MaxSize (%d)", cfg.Threads, cfg.MaxSize)
	}
	if cfg.Threads == 0 {
		cfg.Threads = 4
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = 100_000
	}
	return &Queue{
		ctrl: ctrl, threads: cfg.Threads, maxSize: cfg.MaxSize,
		kick: make(chan struct{}, 1),
		subs: make(map[string]*sub), hooked: make(map[*colly.Collector]bool),
		pending: make(map[*colly.Context]*pending),
	}, nil
}

// AddURL adds a GET of rawURL, an absolute http or https URL.
func (q *Queue) AddURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	return q.AddRequest(&colly.Request{URL: u, Method: http.MethodGet})
}

// AddLink adds a GET of href, a link found on the page of from, resolved
// against it as e.Request.Visit resolves it (the page's <base href> first,
// then its URL): the new request's depth is one more than from's and it
// carries from's context values. An href it cannot follow fails with an
// error matching ErrLink; in an OnHTML callback it is usually ignored:
//
//	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
//		q.AddLink(e.Request, e.Attr("href"))
//	})
func (q *Queue) AddLink(from *colly.Request, href string) error {
	if from == nil || from.URL == nil {
		return fmt.Errorf("%w %q: no page to resolve it against", ErrLink, href)
	}
	abs := ""
	if strings.TrimSpace(href) != "" {
		abs = from.AbsoluteURL(href) // "" for a fragment or an unparsable href
	}
	if abs == "" {
		return fmt.Errorf("%w %q on %s: empty, a fragment or unparsable", ErrLink, href, from.URL)
	}
	u, err := url.Parse(abs)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%w %q on %s: not an http or https URL", ErrLink, href, from.URL)
	}
	return q.AddRequest(&colly.Request{URL: u, Method: http.MethodGet, Depth: from.Depth + 1, Ctx: from.Ctx})
}

// AddRequest adds r (its method, URL, headers, body, depth and context
// values, as colly/queue keeps them).
func (q *Queue) AddRequest(r *colly.Request) error {
	if r == nil || r.URL == nil || r.URL.Host == "" || (r.URL.Scheme != "http" && r.URL.Scheme != "https") {
		return errors.New("frontier: a request needs an absolute http or https URL")
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	req := &http.Request{Method: method, URL: r.URL, Host: r.URL.Host, Header: http.Header{}}
	if r.Headers != nil {
		req.Header = r.Headers.Clone()
	}
	q.mu.Lock()
	if q.size >= q.maxSize {
		q.mu.Unlock()
		return ErrFull
	}
	q.mu.Unlock()
	data, err := r.Marshal() // reads the body: outside the lock
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	key := hook.ScopeKey(q.ctrl, req)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.size >= q.maxSize {
		return ErrFull
	}
	s := q.subs[key]
	if s == nil {
		s = &sub{key: key, idx: -1}
		q.subs[key] = s
	}
	s.items = append(s.items, item{data, req})
	q.size++
	q.schedule(s)
	q.nudge()
	return nil
}

// schedule puts s where the dispatcher looks, if it has a request to hand
// out and waits for nothing else. Called with mu held.
func (q *Queue) schedule(s *sub) {
	if len(s.items) == 0 || s.parked || s.probing || s.idx >= 0 {
		return
	}
	s.at = time.Time{}
	heap.Push(&q.due, s)
}

func (q *Queue) nudge() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Size is the number of requests waiting.
func (q *Queue) Size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.size
}

// IsEmpty reports whether no request is waiting.
func (q *Queue) IsEmpty() bool { return q.Size() == 0 }

// Backlog is one scope's part of the queue, a plain value.
type Backlog struct {
	Scope   string
	Queued  int // waiting in the queue
	Running int // handed to a thread, not done
}

// Backlogs returns each scope's backlog, sorted by scope.
func (q *Queue) Backlogs() []Backlog {
	q.mu.Lock()
	out := make([]Backlog, 0, len(q.subs))
	for _, s := range q.subs {
		out = append(out, Backlog{Scope: s.key, Queued: len(s.items), Running: s.running})
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}

// Stop makes Run return once the requests running now are done; the
// requests waiting stay in the queue for the next Run.
func (q *Queue) Stop() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	q.nudge()
}

// job is one request handed to a thread.
type job struct {
	s     *sub
	it    item
	res   hook.Reservation
	probe bool
}

// Run sends the queue's requests through c with Threads threads and
// returns when none is waiting or running (requests added meanwhile
// included), or after Stop. c must be attached to the queue's controller.
//
// A thread holds its request until Colly is done with it, whether c is
// synchronous or Async: with an Async collector, until its last callback
// (OnScraped, OnError, or an OnRequest that aborts it) has run. So at most
// Threads requests of the queue are in flight either way. With an Async
// collector Run also waits, before it returns, for every request c has
// running (c.Wait), so that nothing of the crawl outlives it.
func (q *Queue) Run(c *colly.Collector) error {
	if c == nil || adaptive.ControllerOf(c) != q.ctrl {
		return ErrNotAttached
	}
	async := c.Async
	q.mu.Lock()
	if q.active {
		q.mu.Unlock()
		return ErrRunning
	}
	q.active, q.stopped = true, false
	for _, s := range q.subs { // a Run that was stopped may have left them waiting
		s.parked = false
		q.schedule(s)
	}
	first := async && !q.hooked[c]
	if first {
		q.hooked[c] = true
	}
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.active = false
		q.mu.Unlock()
	}()
	if first { // Colly has no way to take a callback back: once per collector
		c.OnRequest(func(r *colly.Request) {
			if r.IsAbort() {
				q.ended(r.Ctx)
			}
		})
		c.OnError(func(r *colly.Response, _ error) { q.ended(r.Ctx) })
		c.OnScraped(func(r *colly.Response) { q.ended(r.Ctx) })
	}
	stop := hook.Notify(q.ctrl, q.notified)
	defer stop()

	jobs := make(chan job)
	done := make(chan job, q.threads)
	var wg sync.WaitGroup
	for range q.threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if r, err := c.UnmarshalRequest(j.it.data); err == nil {
					if async {
						q.doAsync(r)
					} else {
						_ = r.Do() // failures reach OnError, as with colly/queue
					}
				}
				j.res.Cancel() // unused: a cache hit, a filter, an abort
				done <- j
			}
		}()
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	idle := q.threads
	// drained is closed when a c.Wait begun in a quiet moment returns:
	// every request that was pending then has ended, even one whose end no
	// callback reported. Nothing is handed out meanwhile, since a Do that
	// raised Colly's wait group from zero during the Wait would misuse it.
	var drained chan struct{}
	var draining []*colly.Context
	for {
		q.mu.Lock()
		if q.running == 0 && (q.stopped || q.size == 0) {
			q.mu.Unlock()
			break
		}
		var ready []job
		var next time.Time
		for drained == nil && !q.stopped && idle > len(ready) {
			j, at, ok := q.next(time.Now())
			if !ok {
				next = at
				break
			}
			ready = append(ready, j)
		}
		quiet := async && drained == nil && q.running > 0 && (idle == len(ready) || q.size == 0 || q.stopped)
		q.mu.Unlock()
		for _, j := range ready {
			jobs <- j
			idle--
		}
		var wake <-chan time.Time
		switch {
		case quiet: // no thread can take more: if no request ends for a while, check with c.Wait
			timer.Reset(asyncQuiet)
			wake = timer.C
		case !next.IsZero() && idle > 0 && drained == nil:
			timer.Reset(time.Until(next))
			wake = timer.C
		}
		select {
		case j := <-done:
			q.finish(j)
			idle++
		case <-q.kick:
		case <-wake:
			if quiet {
				draining = q.started()
				drained = make(chan struct{})
				go func(ch chan struct{}) { c.Wait(); close(ch) }(drained)
			}
		case <-drained:
			for _, ctx := range draining {
				q.ended(ctx)
			}
			drained, draining = nil, nil
		}
		timer.Stop()
	}
	close(jobs)
	wg.Wait()
	if async {
		c.Wait()
	}
	return nil
}

// asyncQuiet is how long an Async crawl with no thread free (or nothing
// to hand out) waits for a request to end before it asks Colly's wait
// group whether they all have: what a request that ends unheard (an
// OnRequest registered after Run that aborts it) costs at most, beyond
// the time until the collector's other requests end.
const asyncQuiet = 5 * time.Second

// doAsync sends r through its Async collector and waits until Colly is
// done with it.
func (q *Queue) doAsync(r *colly.Request) {
	p := &pending{done: make(chan struct{})}
	q.amu.Lock()
	q.pending[r.Ctx] = p
	q.amu.Unlock()
	if err := r.Do(); err != nil { // refused before Colly started it: no callback comes
		q.ended(r.Ctx)
		return
	}
	q.amu.Lock()
	p.started = true
	q.amu.Unlock()
	<-p.done
}

// ended is Colly's word that the request of ctx is done.
func (q *Queue) ended(ctx *colly.Context) {
	q.amu.Lock()
	p := q.pending[ctx]
	delete(q.pending, ctx)
	q.amu.Unlock()
	if p != nil {
		close(p.done)
	}
}

// started lists the pending requests Colly's wait group counts.
func (q *Queue) started() []*colly.Context {
	q.amu.Lock()
	defer q.amu.Unlock()
	var out []*colly.Context
	for ctx, p := range q.pending {
		if p.started {
			out = append(out, ctx)
		}
	}
	return out
}

// next hands out the request of the scope that is ready soonest, if one is
// ready at now; otherwise it returns when to look again (zero: when told).
// Called with mu held.
func (q *Queue) next(now time.Time) (job, time.Time, bool) {
	for n := len(q.due); n > 0 && len(q.due) > 0; n-- {
		s := q.due[0]
		if s.at.After(now) {
			return job{}, s.at, false
		}
		cl, w, err := hook.Reserve(q.ctrl, s.items[0].req)
		switch {
		case cl.Held() || err != nil: // a refusal fails at once in Colly's hands, OnError says why
			return q.handOut(s, cl, false), time.Time{}, true
		case w.Probe:
			return q.handOut(s, cl, true), time.Time{}, true
		case !w.Until.IsZero():
			s.at = w.Until
			heap.Fix(&q.due, s.idx)
		default:
			s.parked = true
			heap.Remove(&q.due, s.idx)
		}
	}
	if len(q.due) > 0 {
		return job{}, q.due[0].at, false
	}
	return job{}, time.Time{}, false
}

// handOut takes the head of s for a thread. Called with mu held.
func (q *Queue) handOut(s *sub, cl hook.Reservation, probe bool) job {
	it := s.items[0]
	s.items[0] = item{}
	s.items = s.items[1:]
	if len(s.items) == 0 {
		s.items = nil
	}
	q.size--
	q.running++
	s.running++
	q.served++
	s.served = q.served
	s.probing = s.probing || probe
	heap.Remove(&q.due, s.idx)
	q.schedule(s)
	return job{s: s, it: it, res: cl, probe: probe}
}

// finish accounts for a request that is done.
func (q *Queue) finish(j job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := j.s
	q.running--
	s.running--
	if j.probe {
		s.probing = false
	}
	s.parked = false // a send ended, or never began: ask again
	q.schedule(s)
	if len(s.items) == 0 && s.running == 0 && s.idx < 0 {
		delete(q.subs, s.key)
	}
}

// notified hears from the controller that a scope may send sooner: a
// scope parked on a release, or waiting for a time that a change of rate
// may have moved, is asked again, as a scope's line wakes its head.
func (q *Queue) notified(key string) {
	q.mu.Lock()
	s := q.subs[key]
	switch {
	case s == nil:
	case s.parked:
		s.parked = false
		q.schedule(s)
	case s.idx >= 0 && !s.at.IsZero():
		s.at = time.Time{}
		heap.Fix(&q.due, s.idx)
	}
	q.mu.Unlock()
	if s != nil {
		q.nudge()
	}
}

// dueHeap orders scopes by when to ask again, then by the hand-out they
// had last (round robin among scopes ready at once).
type dueHeap []*sub

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].served < h[j].served
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *dueHeap) Push(x any) {
	s := x.(*sub)
	s.idx = len(*h)
	*h = append(*h, s)
}
func (h *dueHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.idx = -1
	return s
}
