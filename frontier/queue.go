package frontier

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
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
	// ErrSeen: the queue was given this request before (the same method,
	// URL and body), and holds it or has done it: it is not added again
	// (with a file, also after a restart). In an OnHTML callback it is
	// usually ignored.
	ErrSeen = errors.New("frontier: the request was added before")
	// ErrLocked: the queue's file is open in another process (or queue).
	ErrLocked = errors.New("frontier: the queue file is open elsewhere")
	// ErrCorrupt: the queue's file is damaged, truncated or not a queue
	// file. Nothing was read from it: a queue never starts empty in its
	// place.
	ErrCorrupt = errors.New("frontier: the queue file is damaged")
	// ErrFormat: the queue's file was written by another version of the
	// frontier.
	ErrFormat = errors.New("frontier: the queue file is of another version")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("frontier: the queue is closed")
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
	// (colly/queue's default) in memory, no bound with a Path.
	MaxSize int
	// Path is the file the queue lives in (made if absent), so that a
	// crawl survives a crash: its scopes' FIFOs, what is in flight and
	// every request ever added. Empty: the queue is in memory only.
	// A request is in the file when AddURL returns.
	Path string
	// RobotsAhead bounds the robots.txt fetches run ahead of their
	// scopes' turns, holding no thread: with robots.txt on, a scope whose
	// robots.txt is not known yet waits for it in the queue, while the
	// threads serve the others. 0 means 32; negative: none, a scope's
	// first request reads it, holding its thread.
	RobotsAhead int
	// NoSync writes to the file without fsync: a killed process loses
	// nothing (the writes are in the operating system's hands), a crash
	// of the machine may lose the last commits or damage the file.
	NoSync bool
	// Shared makes the queue one that the processes of a fleet consume
	// together (redisfrontier.New): its FIFOs and the set of requests seen
	// are in the shared store, and Run returns when the whole fleet's
	// queue is empty and nothing of it is in flight. Not with a Path.
	Shared Shared
	// LeaseTTL is how long a request taken from a Shared stays this
	// process's without a renewal (renewed every third of it while the
	// process holds it): how long the requests of a process that died
	// wait before the others take them. 0 means 10 s.
	LeaseTTL time.Duration
}

// Queue is a crawl frontier: per scope a FIFO of requests, handed to Run's
// threads when their scope can send. Make one with New; the zero value is
// not usable. Safe for concurrent use: callbacks may add URLs while Run
// runs. A queue with a Path holds its file until Close.
type Queue struct {
	ctrl     *polite.Controller
	threads  int
	maxSize  int
	kick     chan struct{}  // capacity 1: something changed, look again
	st       *store         // nil: in memory only
	sh       *sharedBackend // nil: not shared
	requeued int

	mu      sync.Mutex
	subs    map[string]*sub     // guarded by mu: scopes with requests waiting or running
	due     dueHeap             // guarded by mu: scopes to ask the controller about, soonest first
	size    int                 // guarded by mu: requests waiting
	running int                 // guarded by mu: requests handed out, not done
	served  uint64              // guarded by mu: counts hand-outs, for round robin
	active  bool                // guarded by mu: Run is running
	stopped bool                // guarded by mu: Stop was called
	closed  bool                // guarded by mu: Close was called
	done    int                 // guarded by mu: requests ended without an error
	failed  int                 // guarded by mu: requests ended with one
	meter   meter               // guarded by mu: requests ended, for the rate
	added   meter               // guarded by mu: requests added since the first hand-out
	err     error               // guarded by mu: the file failed; the queue is unusable
	refills []refill            // guarded by mu: scopes of a file whose window is to be read
	seen    map[uint64]struct{} // guarded by mu: without a file, a hash of every request added
	fleet   fleetView           // guarded by mu: with a Shared, the fleet's counts
	adds    uint64              // guarded by mu: with a Shared, counts the adds that reached the store
	seed    maphash.Seed

	robotsAhead int                       // the bound on robots.txt fetches ahead
	robotsWant  []*sub                    // guarded by mu: scopes waiting for a slot to read robots.txt ahead
	robotsBusy  int                       // guarded by mu: robots.txt fetches ahead running
	hooked      map[*colly.Collector]bool // guarded by mu: async collectors given the end callbacks

	amu     sync.Mutex                  // a leaf: taken alone, by Colly's callbacks
	pending map[*colly.Context]*pending // guarded by amu: async requests sent, not ended
}

// pending is an async request a thread waits on: done is closed when
// Colly's last callback for it has run.
type pending struct {
	done    chan struct{}
	started bool // Do returned: Colly's wait group counts it
	failed  bool // written before done is closed
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
	robots  bool      // its robots.txt is being read ahead, or waits for a slot to be
	aheadOf bool      // its robots.txt was read ahead since its last reservation
	running int

	// With a file, items is a window on the scope's FIFO; the rest is
	// in the file only.
	id      uint64 // its id in the file
	disk    int    // requests after the window, in the file only
	cursor  uint64 // the seq of the last request read into the window
	loading bool   // a refill is being read

	done, failed int
	meter        meter
}

// refill is a scope whose window is to be read from the file.
type refill struct {
	s         *sub
	id, after uint64
}

// item is one request: marshalled as colly/queue stores it, and its method
// and URL for the controller.
type item struct {
	data []byte
	req  *http.Request
	// With a file, a window's item holds its record instead (a few dozen
	// bytes, where data and req take hundreds), decoded when it is needed.
	rec   []byte
	key   [16]byte // with a file: its scope's id and its seq
	lease string   // with a Shared: the lease it is held under
}

// decoded is the item with its request and payload: a window's item of a
// file is decoded from its record (its key kept), another is itself.
func (it item) decoded() (item, error) {
	if it.req != nil {
		return it, nil
	}
	d, err := decodeRecord(it.rec)
	d.key, d.lease = it.key, it.lease
	return d, err
}

// New makes a queue whose requests go through ctrl (the controller the
// collector given to Run is attached to).
func New(ctrl *polite.Controller, cfg Config) (*Queue, error) {
	if ctrl == nil {
		return nil, errors.New("frontier: nil controller")
	}
	if cfg.Threads < 0 || cfg.MaxSize < 0 || cfg.LeaseTTL < 0 {
		return nil, fmt.Errorf("frontier: negative Threads (%d), MaxSize (%d) or LeaseTTL (%v)", cfg.Threads, cfg.MaxSize, cfg.LeaseTTL)
	}
	if cfg.Shared != nil && cfg.Path != "" {
		return nil, errors.New("frontier: a queue is in a file (Path) or Shared, not both")
	}
	if cfg.Threads == 0 {
		cfg.Threads = 4
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = 100_000
		if cfg.Path != "" || cfg.Shared != nil {
			cfg.MaxSize = math.MaxInt
		}
	}
	if cfg.RobotsAhead == 0 {
		cfg.RobotsAhead = 32
	}
	q := &Queue{
		ctrl: ctrl, threads: cfg.Threads, maxSize: cfg.MaxSize, robotsAhead: max(cfg.RobotsAhead, 0),
		kick: make(chan struct{}, 1),
		subs: make(map[string]*sub), hooked: make(map[*colly.Collector]bool),
		seen: make(map[uint64]struct{}), seed: maphash.MakeSeed(),
		pending: make(map[*colly.Context]*pending),
	}
	if cfg.Shared != nil {
		ttl := cfg.LeaseTTL
		if ttl == 0 {
			ttl = 10 * time.Second
		}
		q.sh = newSharedBackend(cfg.Shared, max(ttl, 100*time.Millisecond))
		if err := q.pollShared(); err != nil {
			q.sh.shutdown(nil)
			return nil, err
		}
	}
	if cfg.Path != "" {
		st, l, err := openStore(cfg.Path, cfg.NoSync)
		if err != nil {
			return nil, err
		}
		st.apply, st.fail = q.applied, q.broken
		q.st, q.size, q.requeued = st, l.size, l.requeued
		for _, s := range l.scopes {
			if len(s.items) > 0 {
				q.subs[s.key] = s
				q.schedule(s)
			}
		}
	}
	return q, nil
}

// Requeued is how many requests of the queue's file were in flight when
// it was last left without Close (a crash, a kill): handed to a thread,
// or done with their done mark not yet committed (at most twice Threads).
// They are queued again at their scopes' heads, and each may have been
// sent once already.
//
// With a Shared, it is the fleet's count of requests whose lease expired
// (their process died, or could not renew them) and that were queued
// again, as of the last read of the fleet's counts.
func (q *Queue) Requeued() int {
	if q.sh != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		return int(min(q.fleet.c.Returned, math.MaxInt32))
	}
	return q.requeued
}

// Close releases the queue's file, after Run has returned; a queue with a
// Shared stops renewing its leases and sends the ends it has not sent
// yet. A queue in memory only has nothing to release. Close is
// idempotent.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.active {
		q.mu.Unlock()
		return ErrRunning
	}
	was := q.closed
	q.closed = true
	q.mu.Unlock()
	if was {
		return nil
	}
	if q.sh != nil {
		q.sh.shutdown(q.takeHeads()) // none after a Run, which gives them back
		return nil
	}
	if q.st == nil {
		return nil
	}
	return q.st.close()
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
	if err != nil || !webURL(u) {
		return fmt.Errorf("%w %q on %s: not an http or https URL", ErrLink, href, from.URL)
	}
	return q.AddRequest(&colly.Request{URL: u, Method: http.MethodGet, Depth: from.Depth + 1, Ctx: from.Ctx})
}

// AddRequest adds r (its method, URL, headers, body, depth and context
// values, as colly/queue keeps them).
func (q *Queue) AddRequest(r *colly.Request) error {
	a, err := q.prepare(r)
	if err != nil {
		return err
	}
	switch {
	case q.sh != nil:
		return q.addShared([]*op{a})
	case q.st != nil:
		return q.addToFile([]*op{a})
	}
	return q.addInMemory(a)
}

// AddURLs adds a GET of each of rawURLs, absolute http or https URLs, and
// returns how many were added. With a file they are written in one commit
// (the way to add many at a time: see docs/frontier.md), and those seen
// before are left out without an error. A URL that does not parse fails
// the call before anything is added. ErrFull stops it where the queue
// filled (with a file: before anything is added).
func (q *Queue) AddURLs(rawURLs ...string) (int, error) {
	if len(rawURLs) == 0 {
		return 0, nil
	}
	ops := make([]*op, 0, len(rawURLs))
	for _, raw := range rawURLs {
		u, err := url.Parse(raw)
		if err != nil {
			return 0, fmt.Errorf("frontier: %w", err)
		}
		a, err := q.prepare(&colly.Request{URL: u, Method: http.MethodGet})
		if err != nil {
			return 0, fmt.Errorf("%w: %q", err, raw)
		}
		ops = append(ops, a)
	}
	if !q.stored() {
		n := 0
		for _, a := range ops {
			switch err := q.addInMemory(a); {
			case err == nil:
				n++
			case !errors.Is(err, ErrSeen):
				return n, err
			}
		}
		return n, nil
	}
	var err error
	if q.sh != nil {
		err = q.addShared(ops)
	} else {
		err = q.addToFile(ops)
	}
	n := 0
	for _, o := range ops {
		if o.err == nil && !o.dup && (o.seq != 0 || q.sh != nil && err == nil) {
			n++
		}
	}
	if errors.Is(err, ErrSeen) {
		err = nil
	}
	return n, err
}

// prepare makes the op that adds r.
func (q *Queue) prepare(r *colly.Request) (*op, error) {
	if r == nil || !webURL(r.URL) {
		return nil, errors.New("frontier: a request needs an absolute http or https URL")
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
	full := q.size >= q.maxSize
	q.mu.Unlock()
	if full {
		return nil, ErrFull
	}
	var body []byte
	if r.Body != nil { // requests are told apart by their body too
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, fmt.Errorf("frontier: %w", err)
		}
		body = b
		r.Body = bytes.NewReader(b)
	}
	raw := r.URL.String()
	o := &op{kind: opAdd, scope: hook.ScopeKey(q.ctrl, req), seen: seenKey(method, raw, body)}
	if len(o.scope) > maxKey {
		// (a host name is at most 253 bytes: this is no host's scope)
		return nil, fmt.Errorf("frontier: a scope key of %d bytes (at most %d)", len(o.scope), maxKey)
	}
	if q.stored() && method == http.MethodGet && r.Body == nil && (r.Headers == nil || len(*r.Headers) == 0) && r.Host == "" && emptyCtx(r.Ctx) && r.Depth >= 0 && r.Depth <= maxDepth {
		// a plain GET: its URL and depth are the whole record, and the
		// queue takes it in from the file (mem is for the queue in memory)
		o.rec = encodePlain(raw, r.Depth)
		return o, nil
	}
	data, err := r.Marshal() // reads the body: outside the lock
	if err != nil {
		return nil, fmt.Errorf("frontier: %w", err)
	}
	o.mem = item{data: data, req: req}
	if q.stored() {
		o.rec = encodeRecord(data)
	}
	return o, nil
}

// stored reports whether the queue keeps its requests outside memory (a
// file, a Shared): as records.
func (q *Queue) stored() bool { return q.st != nil || q.sh != nil }

// webURL reports whether u is an absolute http or https URL, the only
// kind the queue holds.
func webURL(u *url.URL) bool {
	return u != nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
}

func emptyCtx(ctx *colly.Context) bool {
	if ctx == nil {
		return true
	}
	empty := true
	ctx.ForEach(func(string, any) any { empty = false; return nil })
	return empty
}

// addInMemory adds a to a queue without a file.
func (q *Queue) addInMemory(a *op) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	h := maphash.Bytes(q.seed, a.seen)
	if _, ok := q.seen[h]; ok {
		return ErrSeen
	}
	if q.size >= q.maxSize {
		return ErrFull
	}
	q.seen[h] = struct{}{}
	s := q.sub(a.scope)
	s.items = append(s.items, a.mem)
	q.size++
	q.noteAdded(time.Now())
	q.schedule(s)
	q.nudge()
	return nil
}

// addToFile commits requests to the file; the queue takes them in once
// they are there (applied). ErrSeen if the first was seen before.
func (q *Queue) addToFile(ops []*op) error {
	q.mu.Lock()
	err := q.usable()
	if err == nil && q.size+len(ops) > q.maxSize {
		err = ErrFull
	}
	q.mu.Unlock()
	if err != nil {
		return err
	}
	if err := q.st.do(ops...); err != nil {
		q.broken(err)
		return err
	}
	if ops[0].dup {
		return ErrSeen
	}
	return nil
}

// addShared adds requests to the Shared; the queue counts them at once
// (the next poll reads the fleet's counts). ErrSeen if the first was seen
// before.
func (q *Queue) addShared(ops []*op) error {
	q.mu.Lock()
	err := q.usable()
	q.mu.Unlock()
	if err != nil {
		return err
	}
	scopes := make([]string, len(ops))
	for i, o := range ops {
		scopes[i] = o.scope
	}
	if err := q.sh.add(scopes, ops); err != nil {
		return fmt.Errorf("frontier: the shared queue: %w", err)
	}
	q.mu.Lock()
	for _, o := range ops {
		if o.dup {
			continue
		}
		s := q.sub(o.scope)
		s.disk++
		q.size++
		q.refill(s)
	}
	q.adds++
	q.mu.Unlock()
	q.nudge()
	if ops[0].dup {
		return ErrSeen
	}
	return nil
}

// sub is the scope key's, made if it is new. Called with mu held.
func (q *Queue) sub(key string) *sub {
	s := q.subs[key]
	if s == nil {
		s = &sub{key: key, idx: -1}
		q.subs[key] = s
	}
	return s
}

// refill asks for s's window to be read if it is empty and more waits
// outside it. Called with mu held.
func (q *Queue) refill(s *sub) {
	if len(s.items) == 0 && s.disk > 0 && !s.loading {
		s.loading = true
		q.refills = append(q.refills, refill{s: s, id: s.id, after: s.cursor})
	}
}

// takeHeads empties the windows of a queue with a Shared, their requests
// counted as queued again, and returns their leases.
func (q *Queue) takeHeads() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var heads []string
	for _, s := range q.subs {
		for _, it := range s.items {
			if it.lease != "" {
				heads = append(heads, it.lease)
				s.disk++
			}
		}
		s.items = nil
		if s.idx >= 0 {
			heap.Remove(&q.due, s.idx)
		}
	}
	return heads
}

// fleetView is what a queue with a Shared knows of the fleet's queue.
type fleetView struct {
	c     SharedCounts
	at    time.Time // when c was read (zero: never)
	ended int64     // done and failed, at the last read
	most  int64     // the highest count of requests ever added read
	meter meter     // the fleet's ends
	added meter     // the fleet's adds: the growth of most
	// each scope's ends at the last read, and their meters
	scopes map[string]*fleetScope
}

type fleetScope struct {
	ended int64
	meter meter
}

// pollShared reads the fleet's counts into the queue: each scope's queued
// count (new scopes included), a refill for each whose window is empty,
// the fleet's totals and rates.
//
// The counts are as of the call's start: an add that this process made
// while the call ran may be missing from them, so then they lower no
// count and end no run (fleetIdle).
func (q *Queue) pollShared() error {
	q.mu.Lock()
	adds := q.adds
	q.mu.Unlock()
	asked := time.Now()
	c, err := q.sh.counts()
	if err != nil {
		return fmt.Errorf("frontier: the shared queue: %w", err)
	}
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	raced := q.adds != adds
	f := &q.fleet
	if f.scopes == nil {
		f.scopes = map[string]*fleetScope{}
	}
	ended := c.Done + c.Failed
	if !f.at.IsZero() && ended > f.ended {
		f.meter.addN(now, float64(ended-f.ended))
	}
	if !f.at.IsZero() && c.Added > f.most {
		f.added.addN(now, float64(c.Added-f.most))
	}
	f.meter.begin(now)
	f.added.begin(now)
	f.c, f.ended, f.most = c, ended, max(f.most, c.Added)
	if !raced {
		f.at = asked
	}
	for key, sc := range c.Scopes {
		q.sub(key) // a scope another process added
		fs := f.scopes[key]
		if fs == nil {
			fs = &fleetScope{ended: sc.Ended}
			fs.meter.begin(now)
			f.scopes[key] = fs
		} else if sc.Ended > fs.ended {
			fs.meter.addN(now, float64(sc.Ended-fs.ended))
			fs.ended = sc.Ended
		}
	}
	size := 0
	for key, s := range q.subs {
		if !raced || c.Scopes[key].Queued > s.disk {
			s.disk = c.Scopes[key].Queued
		}
		size += len(s.items) + s.disk
		q.refill(s)
		q.forget(s)
	}
	for key := range f.scopes {
		if _, ok := c.Scopes[key]; !ok && q.subs[key] == nil {
			delete(f.scopes, key)
		}
	}
	q.size = size
	return nil
}

// fleetIdle reports whether the fleet's queue, as last read, is empty with
// nothing leased, and not being built again after a loss (Held). Called
// with mu held.
//
// The leases of this process's own ends not sent yet (the store is away)
// do not count: nothing of them runs, and a run that waited for a store
// down to take them would not end; if they expire, their requests are
// queued again (Requeued).
func (q *Queue) fleetIdle() bool {
	return !q.fleet.at.IsZero() && q.fleet.c.Held == 0 && q.fleet.c.Queued == 0 && q.fleet.c.Leased <= q.sh.unsent() && !q.sh.restoring()
}

// usable is why the queue cannot be used, or nil. Called with mu held.
func (q *Queue) usable() error {
	switch {
	case q.closed:
		return ErrClosed
	case q.err != nil:
		return q.err
	}
	return nil
}

// broken makes a failure of the file the queue's: Run stops and returns
// it, and every later call fails with it.
func (q *Queue) broken(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.stopped = true
	q.mu.Unlock()
	q.nudge()
}

// applied takes in a round of the file's committed ops, in their order:
// an added request joins its scope's window if the window has room and
// nothing of the scope waits in the file before it.
func (q *Queue) applied(round []*op) {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, o := range round {
		if o.kind != opAdd || o.err != nil || o.dup {
			continue
		}
		s := q.sub(o.scope)
		s.id = o.id
		if !s.loading && s.disk == 0 && len(s.items) < window {
			s.items = append(s.items, item{rec: o.rec, key: itemKey(o.id, o.seq)})
			s.cursor = o.seq
		} else {
			s.disk++
		}
		q.size++
		q.noteAdded(now)
		q.schedule(s)
	}
	q.nudge()
}

// refilled takes in what was read of s's FIFO. Called with mu held.
func (q *Queue) refilled(s *sub, got []item) {
	s.loading = false
	s.items = append(s.items, got...)
	s.disk -= len(got)
	if len(got) == 0 {
		s.disk = 0
	} else if q.sh == nil {
		s.cursor = binary.BigEndian.Uint64(got[len(got)-1].key[8:])
	}
	s.disk = max(s.disk, 0) // a Shared's count is the fleet's, read a moment ago
	q.schedule(s)
	q.forget(s)
}

// forget drops s from the queue's map once nothing of it is left.
// Called with mu held.
func (q *Queue) forget(s *sub) {
	if len(s.items) == 0 && s.disk == 0 && !s.loading && s.running == 0 && s.idx < 0 {
		delete(q.subs, s.key)
	}
}

// schedule puts s where the dispatcher looks, if it has a request to hand
// out and waits for nothing else. Called with mu held.
func (q *Queue) schedule(s *sub) {
	if len(s.items) == 0 || s.parked || s.probing || s.robots || s.idx >= 0 {
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
		out = append(out, Backlog{Scope: s.key, Queued: len(s.items) + s.disk, Running: s.running})
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
	s      *sub
	it     item
	res    hook.Reservation
	probe  bool
	failed bool // set by its thread: Colly reported an error
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
	if err := q.usable(); err != nil {
		q.mu.Unlock()
		return err
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
				q.ended(r.Ctx, false)
			}
		})
		c.OnError(func(r *colly.Response, _ error) { q.ended(r.Ctx, true) })
		c.OnScraped(func(r *colly.Response) { q.ended(r.Ctx, false) })
	}
	stop := hook.Notify(q.ctrl, q.notified)
	defer stop()

	// ahead reads robots.txt for scopes waiting in the queue: a clone
	// sends through the same client (the controller's transport, which
	// keeps what robots.txt says), with none of c's callbacks.
	ahead := c.Clone()
	ahead.Async, ahead.IgnoreRobotsTxt, ahead.AllowURLRevisit = false, true, true
	var robotsWG sync.WaitGroup

	jobs := make(chan job)
	done := make(chan job, q.threads)
	var wg sync.WaitGroup
	for range q.threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if q.st != nil && q.sh == nil { // in flight in the file before it is sent; the threads' marks share commits
					if err := q.st.do(&op{kind: opFlight, key: j.it.key}); err != nil {
						q.broken(err) // not sent: it stays queued in the file
						j.res.Cancel()
						done <- j
						continue
					}
				}
				if r, err := c.UnmarshalRequest(j.it.data); err == nil {
					if async {
						j.failed = q.doAsync(r)
					} else {
						j.failed = failed(r.Do()) // failures reach OnError, as with colly/queue
					}
				}
				j.res.Cancel() // unused: a cache hit, a filter, an abort
				switch {
				case q.sh != nil: // ended in the background; the lease is renewed until then
					q.sh.end(j.it.lease, j.failed)
				case q.st != nil:
					// not waited for: it rides in the next commit. Until
					// then the request is in flight in the file, and a
					// crash queues it again (counted: Requeued)
					q.st.post(&op{kind: opDone, key: j.it.key})
				}
				done <- j
			}
		}()
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	idle := q.threads
	idleSince := time.Now()
	reading := false               // a read of windows runs
	read := make(chan struct{}, 1) // it ended
	var readWG sync.WaitGroup
	defer readWG.Wait()
	if q.sh != nil {
		// the fleet's counts, read every pollEvery while Run runs: the
		// scopes the others added, and when the whole fleet is done
		pollStop := make(chan struct{})
		var pollWG sync.WaitGroup
		pollWG.Go(func() {
			t := time.NewTicker(pollEvery)
			defer t.Stop()
			for {
				select {
				case <-pollStop:
					return
				case <-t.C:
				}
				if q.pollShared() == nil {
					q.nudge()
				}
			}
		})
		defer func() { close(pollStop); pollWG.Wait() }()
	}
	// drained is closed when a c.Wait begun in a quiet moment returns:
	// every request that was pending then has ended, even one whose end no
	// callback reported. Nothing is handed out meanwhile, since a Do that
	// raised Colly's wait group from zero during the Wait would misuse it.
	var drained chan struct{}
	var draining []*colly.Context
	for {
		q.mu.Lock()
		if q.running == 0 && (q.stopped || q.size == 0 && (q.sh == nil || q.fleetIdle() && q.fleet.at.After(idleSince))) {
			q.mu.Unlock()
			break
		}
		if q.sh != nil && (q.running > 0 || q.size > 0) {
			idleSince = time.Now() // only a read of the fleet after this moment may end the run
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
		var refills []refill
		if !reading {
			refills, q.refills = q.refills, nil
			reading = len(refills) > 0
		}
		q.readAhead(ahead, &robotsWG)
		q.mu.Unlock()
		if len(refills) > 0 {
			// in the background, one read at a time (those asked
			// meanwhile go in the next): the threads are served from
			// the windows already read while it runs
			readWG.Go(func() {
				q.readWindows(refills)
				read <- struct{}{}
			})
		}
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
		case <-read:
			reading = false
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
				q.ended(ctx, false)
			}
			drained, draining = nil, nil
		}
		timer.Stop()
	}
	close(jobs)
	wg.Wait()
	robotsWG.Wait()
	if async {
		c.Wait()
	}
	if q.st != nil {
		q.st.flush() // what Run did is in the file when it returns
	}
	if q.sh != nil {
		// the heads this process holds go back to the fleet: a process
		// that stopped must not hold them (nor keep the others' runs
		// from ending)
		q.sh.release(q.takeHeads())
		q.sh.flush()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// readAhead starts reading robots.txt for waiting scopes, as many as the
// bound lets run. Called with mu held; nothing it starts takes mu until it
// is released.
func (q *Queue) readAhead(ahead *colly.Collector, wg *sync.WaitGroup) {
	for len(q.robotsWant) > 0 && q.robotsBusy < q.robotsAhead && !q.stopped {
		s := q.robotsWant[0]
		q.robotsWant[0] = nil
		q.robotsWant = q.robotsWant[1:]
		it, err := s.items[0].decoded()
		if err != nil {
			q.robotsDone(s)
			continue
		}
		req := it.req
		q.robotsBusy++
		u := *req.URL
		u.Path, u.RawPath, u.RawQuery, u.Fragment = "/robots.txt", "", "", ""
		wg.Go(func() {
			_ = ahead.Visit(u.String()) // what it says, the controller keeps; a failure, the request meets again
			q.mu.Lock()
			q.robotsBusy--
			q.robotsDone(s)
			q.mu.Unlock()
			q.nudge()
		})
	}
}

// robotsDone puts s back in line after robots.txt was read ahead for it
// (or could not be). Called with mu held.
func (q *Queue) robotsDone(s *sub) {
	s.robots, s.aheadOf = false, true
	q.schedule(s)
}

// readWindows reads the next requests of scopes whose window emptied.
func (q *Queue) readWindows(refills []refill) {
	if len(refills) == 0 {
		return
	}
	var got [][]item
	var err error
	if q.sh != nil {
		if got, err = q.sh.take(refills); err != nil {
			// a fault of the store: the next poll asks again
			q.mu.Lock()
			for _, r := range refills {
				r.s.loading = false
			}
			q.mu.Unlock()
			return
		}
	} else if got, err = q.st.read(refills, window); err != nil {
		q.broken(err)
	}
	q.mu.Lock()
	for i, r := range refills {
		var its []item
		if got != nil {
			its = got[i]
		}
		q.refilled(r.s, its)
	}
	q.mu.Unlock()
	q.nudge()
}

// asyncQuiet is how long an Async crawl with no thread free (or nothing
// to hand out) waits for a request to end before it asks Colly's wait
// group whether they all have: what a request that ends unheard (an
// OnRequest registered after Run that aborts it) costs at most, beyond
// the time until the collector's other requests end.
const asyncQuiet = 5 * time.Second

// doAsync sends r through its Async collector and waits until Colly is
// done with it; it reports whether Colly reported an error.
func (q *Queue) doAsync(r *colly.Request) bool {
	p := &pending{done: make(chan struct{})}
	q.amu.Lock()
	q.pending[r.Ctx] = p
	q.amu.Unlock()
	if err := r.Do(); err != nil { // refused before Colly started it: no callback comes
		q.ended(r.Ctx, false)
		return failed(err)
	}
	q.amu.Lock()
	p.started = true
	q.amu.Unlock()
	<-p.done
	return p.failed
}

// ended is Colly's word that the request of ctx is done, with an error
// or not.
func (q *Queue) ended(ctx *colly.Context, failed bool) {
	q.amu.Lock()
	p := q.pending[ctx]
	delete(q.pending, ctx)
	q.amu.Unlock()
	if p != nil {
		p.failed = failed
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
		it, err := s.items[0].decoded()
		if err != nil && q.sh != nil && s.items[0].lease != "" {
			// a record of the shared queue that does not decode (another
			// program's, another version's): failed, not handed out, and
			// not this process's to stop for
			q.sh.end(s.items[0].lease, true)
			s.items[0] = item{}
			s.items = s.items[1:]
			q.size--
			q.failed++
			heap.Remove(&q.due, s.idx)
			q.refill(s)
			q.schedule(s)
			q.forget(s)
			continue
		}
		if err != nil { // its checksum held when it was read: a bad record, or memory went wrong
			q.err, q.stopped = fmt.Errorf("%w: %v", ErrCorrupt, err), true
			return job{}, time.Time{}, false
		}
		cl, w, err := hook.Reserve(q.ctrl, it.req)
		switch {
		case cl.Held() || err != nil: // a refusal fails at once in Colly's hands, OnError says why
			s.aheadOf = false
			return q.handOut(s, it, cl, false, now), time.Time{}, true
		case w.Probe && q.robotsAhead > 0 && !s.aheadOf: // read it ahead, holding no thread
			s.robots = true
			heap.Remove(&q.due, s.idx)
			q.robotsWant = append(q.robotsWant, s)
		case w.Probe: // not read ahead (off, or it did not take): the request reads it
			return q.handOut(s, it, cl, true, now), time.Time{}, true
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

// noteAdded counts a request added at now, once the crawl has begun (its
// first hand-out): what was queued before it is the crawl's start, not
// what the crawl found. Called with mu held.
func (q *Queue) noteAdded(now time.Time) {
	if !q.added.start.IsZero() {
		q.added.add(now)
	}
}

// handOut takes the head of s for a thread, it decoded. Called with mu
// held.
func (q *Queue) handOut(s *sub, it item, cl hook.Reservation, probe bool, now time.Time) job {
	s.meter.begin(now)
	q.meter.begin(now)
	q.added.begin(now)
	s.items[0] = item{}
	s.items = s.items[1:]
	if len(s.items) == 0 {
		s.items = nil
	}
	q.size--
	q.running++
	s.running++
	q.refill(s)
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
	now := time.Now()
	s.meter.add(now)
	q.meter.add(now)
	if j.failed {
		s.failed++
		q.failed++
	} else {
		s.done++
		q.done++
	}
	if j.probe {
		s.probing = false
	}
	s.parked = false // a send ended, or never began: ask again
	q.schedule(s)
	q.forget(s)
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
