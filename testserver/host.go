package testserver

import (
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// host is one virtual host: its policy, its limiter and its statistics, all
// guarded by mu. It is kept small: a scale run has 10,000 of them.
type host struct {
	name string
	srv  *Server
	pol  Policy // validated, defaults applied

	robotsStatus int
	robotsBody   []byte
	robotsType   string
	robotsSize   int64 // the Content-Length of robots.txt

	mu   sync.Mutex
	step int // index of the Schedule step in force, -1 for pol.Limit
	lim  limiter
	pool pool       // requests in flight and queued
	rng  *rand.Rand // allocated on first use

	rejections ring // recent rejection times, for Ban
	banUntil   time.Duration

	pauses pauses // announced by Retry-After, in arrival times

	requests, robots, violations, banCount int
	othersViolations                       int           // of violations, by clients not told
	othersLate                             time.Duration // the latest of those after its pause began
	byStatus                               map[int]int
	accepted, rejected, latencies          []time.Duration
	clients                                map[string]*ClientStats // with Config.ClientHeader only
	perSecond                              []int
}

func newHost(s *Server, name string, p Policy) *host {
	if p.Site.Pages == 0 {
		p.Site.Pages = defaultPages
	}
	if p.Site.FanOut == 0 {
		p.Site.FanOut = defaultFanOut
	}
	p.Schedule = append([]Step(nil), p.Schedule...) // the caller keeps its slices
	p.Latency.Schedule = append([]CostStep(nil), p.Latency.Schedule...)
	if len(p.Excess.RawRetryAfter) > 0 {
		p.Excess.RawRetryAfter = append([]string(nil), p.Excess.RawRetryAfter...)
	}
	if p.Ban != nil {
		b := *p.Ban
		if b.Within == 0 {
			b.Within = defaultBanWithin
		}
		if b.For == 0 {
			b.For = defaultBanFor
		}
		p.Ban = &b
	}
	h := &host{name: name, srv: s, pol: p, step: -1, lim: newLimiter(p.Limit)}
	h.robotsStatus, h.robotsBody = renderRobots(&p.Robots)
	h.robotsType = p.Robots.ContentType
	if h.robotsType == "" {
		h.robotsType = "text/plain; charset=utf-8"
	}
	h.robotsSize = max(p.Robots.Size, int64(len(h.robotsBody)))
	return h
}

// arrive does the bookkeeping every request shares. h.mu must be held.
func (h *host) arrive(e time.Duration, r *http.Request) {
	h.requests++
	if v := h.pauses.violated(e, h.clientID(r)); v.in {
		h.violations++
		if !v.own {
			h.othersViolations++
			h.othersLate = max(h.othersLate, v.late)
		}
	}
	h.advance(e)
}

// advance puts in force the schedule steps due at e, then gives the
// workers the limit in force has free to queued requests. h.mu must be
// held.
func (h *host) advance(e time.Duration) {
	for sch := h.pol.Schedule; h.step+1 < len(sch) && sch[h.step+1].At <= e; {
		h.step++
		h.lim = newLimiter(sch[h.step].Limit)
	}
	for {
		t, others := h.pool.next(h.lim.workers())
		if t == nil {
			return
		}
		t.delay = h.latency(e, others)
		close(t.ready)
	}
}

// nextStep returns when the next schedule step is due, if there is one.
// h.mu must be held.
func (h *host) nextStep() (at time.Duration, ok bool) {
	if sch := h.pol.Schedule; h.step+1 < len(sch) {
		return sch[h.step+1].At, true
	}
	return 0, false
}

// halves splits the round trip: up is the way to the host, down the way
// back.
func (h *host) halves() (up, down time.Duration) {
	up = h.pol.Latency.RTT / 2
	return up, h.pol.Latency.RTT - up
}

// announce records a pause announced by a response decided at e: pause
// from the response (dated: pause is the time until the date sent). A
// client learns of it when the response arrives, at e + down, and a
// request it sends then arrives at e + RTT: arrivals up to that instant
// were sent before the client could know. The pause ends, in arrival
// times, when a request sent at the deadline the client computes arrives:
// up after the response's arrival + pause, or after the date. h.mu must be
// held.
func (h *host) announce(e, pause time.Duration, dated bool, client string) {
	up, down := h.halves()
	if x := h.pol.Latency.ExternalRTT; x > 0 {
		up, down = up+x/2, down+x-x/2
	}
	deadline := addSat(addSat(e, down), pause)
	if dated {
		deadline = addSat(e, pause)
	}
	h.pauses.add(addSat(e, up+down), addSat(deadline, up), client)
}

// announceDelivered announces the pause of a response decided at e once it
// has been delivered: a client that went away before its answer arrived
// never learned of the pause, and cannot be held to it. (Delivery comes at
// e + RTT/2, before any arrival the pause covers, which starts at e + RTT.)
func (h *host) announceDelivered(r *http.Request, e, pause time.Duration, dated bool) {
	if pause <= 0 || r.Context().Err() != nil {
		return
	}
	h.mu.Lock()
	h.announce(e, pause, dated, h.clientID(r))
	h.mu.Unlock()
}

func (h *host) count(status int) {
	if h.byStatus == nil {
		h.byStatus = make(map[int]int, 4)
	}
	h.byStatus[status]++
}

// reject records a request of client that the limit or a ban refused.
// h.mu must be held.
func (h *host) reject(e time.Duration, status int, client *ClientStats) {
	h.rejected = append(h.rejected, e)
	if client != nil {
		client.Rejected = append(client.Rejected, e)
	}
	h.count(status)
}

// clientID is r's client, Config.ClientHeader's value ("" without the
// header, or when the server does not tell clients apart).
func (h *host) clientID(r *http.Request) string {
	if h.srv.client == "" {
		return ""
	}
	return r.Header.Get(h.srv.client)
}

// client is the record of r's client (Config.ClientHeader), nil without
// the header configured. h.mu must be held.
func (h *host) client(r *http.Request) *ClientStats {
	if h.srv.client == "" {
		return nil
	}
	id := h.clientID(r)
	c := h.clients[id]
	if c == nil {
		if h.clients == nil {
			h.clients = map[string]*ClientStats{}
		}
		c = &ClientStats{}
		h.clients[id] = c
	}
	return c
}

// feedBan feeds the ban counter with a rejection at e. h.mu must be held.
func (h *host) feedBan(e time.Duration) {
	b := h.pol.Ban
	if b == nil {
		return
	}
	h.rejections.init(b.After)
	h.rejections.push(e)
	if h.rejections.full() && e-h.rejections.oldest() < b.Within {
		h.banUntil = e + b.For
		h.banCount++
		h.rejections.reset()
	}
}

// quotaHeaders are computed under the lock and written after it.
type quotaHeaders struct {
	ok   bool // the limit has a quota to state
	q, r int
	w    int64
	t    time.Duration

	lie   QuotaLieMode
	reset string // the lie's X-RateLimit-Reset
}

// quota returns the quota headers of a response at now (offset e). h.mu
// must be held.
func (h *host) quota(now time.Time, e time.Duration) quotaHeaders {
	ex := &h.pol.Excess
	if !ex.QuotaHeaders && ex.QuotaLie == NoQuotaLie {
		return quotaHeaders{}
	}
	q, w, r, t, ok := h.lim.quota(e)
	qh := quotaHeaders{ok: ok, q: q, w: w, r: r, t: t, lie: ex.QuotaLie}
	if qh.lie != NoQuotaLie {
		qh.reset = lieReset(qh.lie, now)
	}
	return qh
}

func (qh *quotaHeaders) write(hdr http.Header) {
	if qh.lie != NoQuotaLie {
		if qh.ok {
			q := strconv.Itoa(qh.q)
			hdr["Ratelimit-Policy"] = []string{`"default";q=` + q + ";w=" + strconv.FormatInt(qh.w, 10)}
			hdr["X-Ratelimit-Limit"] = []string{q}
		}
		hdr["Ratelimit"] = []string{`"default";r=0;t=0`}
		hdr["X-Ratelimit-Remaining"] = []string{"0"}
		hdr["X-Ratelimit-Reset"] = []string{qh.reset}
		return
	}
	if !qh.ok {
		return
	}
	q, r := strconv.Itoa(qh.q), strconv.Itoa(qh.r)
	w, t := strconv.FormatInt(qh.w, 10), strconv.FormatInt(ceilSeconds(qh.t, 0), 10)
	hdr["Ratelimit-Policy"] = []string{`"default";q=` + q + ";w=" + w}
	hdr["Ratelimit"] = []string{`"default";r=` + r + ";t=" + t}
	hdr["X-Ratelimit-Limit"] = []string{q}
	hdr["X-Ratelimit-Remaining"] = []string{r}
	hdr["X-Ratelimit-Reset"] = []string{t}
}

// ceilSeconds rounds d up to whole seconds, and to at least floor.
func ceilSeconds(d time.Duration, floor int64) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, floor)
}

// retryAfter renders the Retry-After of a rejection at now whose
// capacity frees after wait, and the pause it announces (0: none), which
// is the time until the date sent if dated, else from the response.
func (h *host) retryAfter(now time.Time, wait time.Duration) (values []string, pause time.Duration, dated bool) {
	ex := &h.pol.Excess
	if len(ex.RawRetryAfter) > 0 {
		pause, dated := rawPause(ex.RawRetryAfter, now)
		return slices.Clone(ex.RawRetryAfter), pause, dated
	}
	v, pause := h.retryAfterMode(now, wait)
	dated = ex.RetryAfter == RetryAfterHTTPDate
	if v == "" {
		return nil, pause, dated
	}
	return []string{v}, pause, dated
}

// retryAfterMode renders the Retry-After of Excess.RetryAfter.
func (h *host) retryAfterMode(now time.Time, wait time.Duration) (value string, pause time.Duration) {
	ex := &h.pol.Excess
	d := wait
	if ex.FixedRetryAfter > 0 {
		d = ex.FixedRetryAfter
	}
	switch ex.RetryAfter {
	case RetryAfterSeconds:
		s := ceilSeconds(d, 1)
		return strconv.FormatInt(s, 10), time.Duration(s) * time.Second
	case RetryAfterHTTPDate:
		wall := now.Round(0) // the date is wall-clock; so is the deadline
		at := wall.Add(d)
		if t := at.Truncate(time.Second); !t.Equal(at) {
			at = t.Add(time.Second) // the format has whole seconds: never early
		}
		return at.UTC().Format(http.TimeFormat), at.Sub(wall)
	case RetryAfterZero:
		return "0", 0
	case RetryAfterGarbage:
		return garbageRetryAfter, 0
	}
	return "", 0
}

func (h *host) excessStatus() int {
	if s := h.pol.Excess.Status; s != 0 {
		return s
	}
	return h.lim.excessStatus()
}

// latency draws the processing time of a request that starts at e while
// `others` are in flight. h.mu must be held (the PRNG is per host).
func (h *host) latency(e time.Duration, others int) time.Duration {
	l := &h.pol.Latency
	base, jitter := l.Base, l.Jitter
	for _, st := range l.Schedule {
		if st.At > e {
			break
		}
		base, jitter = st.Base, st.Jitter
	}
	d := base + time.Duration(others)*l.PerInFlight
	if jitter > 0 {
		if h.rng == nil {
			f := fnv.New64a()
			f.Write([]byte(h.name))
			h.rng = rand.New(rand.NewPCG(uint64(h.srv.seed), f.Sum64()))
		}
		d += time.Duration(h.rng.Int64N(int64(jitter)))
	}
	return d
}

func (h *host) stats(e time.Duration) Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	maxInFlight, maxQueued := h.pool.peaks()
	st := Stats{
		Requests:                h.requests,
		ByStatus:                make(map[int]int, len(h.byStatus)),
		Accepted:                append([]time.Duration(nil), h.accepted...),
		Rejected:                append([]time.Duration(nil), h.rejected...),
		Latencies:               append([]time.Duration(nil), h.latencies...),
		MaxInFlight:             maxInFlight,
		MaxQueued:               maxQueued,
		PerSecond:               append([]int(nil), h.perSecond...),
		PauseViolations:         h.violations,
		PauseViolationsByOthers: h.othersViolations,
		OthersViolationLate:     h.othersLate,
		Robots:                  h.robots,
		Banned:                  e < h.banUntil,
		BanCount:                h.banCount,
	}
	for k, v := range h.byStatus {
		st.ByStatus[k] = v
	}
	if h.srv.client != "" {
		st.Clients = make(map[string]ClientStats, len(h.clients))
		for id, c := range h.clients {
			st.Clients[id] = ClientStats{Accepted: slices.Clone(c.Accepted), Rejected: slices.Clone(c.Rejected)}
		}
	}
	return st
}

// ServeHTTP answers one request to this host.
func (h *host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.srv
	if !s.enter() {
		abort() // closing: drop the connection, answer nothing
	}
	defer s.leave()
	up, down := h.halves()
	if up > 0 && !s.transit(up) {
		abort()
	}
	if r.URL.Path == "/robots.txt" {
		h.serveRobots(w, r, down)
		return
	}
	rep := h.resolve(r.URL)

	h.mu.Lock()
	now := time.Now() // under the lock, so that arrivals are in time order
	e := now.Sub(s.start)
	h.arrive(e, r)
	if e < h.banUntil {
		h.reject(e, http.StatusForbidden, h.client(r))
		qh := h.quota(now, e)
		h.mu.Unlock()
		s.deliver(r, down)
		qh.write(w.Header())
		writeBody(w, http.StatusForbidden, "text/html; charset=utf-8", blockPage)
		return
	}
	inFlight, queued := h.pool.load()
	ok, wait := h.lim.admit(e, inFlight, queued)
	if !ok {
		status := h.excessStatus()
		ra, pause, dated := h.retryAfter(now, wait)
		h.feedBan(e)
		h.reject(e, status, h.client(r))
		qh := h.quota(now, e)
		h.mu.Unlock()
		s.deliver(r, down)
		h.announceDelivered(r, e, pause, dated)
		hdr := w.Header()
		qh.write(hdr)
		if ra != nil {
			hdr["Retry-After"] = ra
		}
		if h.pol.Excess.CloseConnection {
			closeWithStatus(w, status)
			return
		}
		writeBody(w, status, "text/plain; charset=utf-8", []byte(http.StatusText(status)+"\n"))
		return
	}
	adv := h.pol.Adversary
	h.accepted = append(h.accepted, e)
	if c := h.client(r); c != nil {
		c.Accepted = append(c.Accepted, e)
	}
	sec := int(e / time.Second)
	for len(h.perSecond) <= sec {
		h.perSecond = append(h.perSecond, 0)
	}
	h.perSecond[sec]++
	if adv.Kind != Hang {
		h.count(rep.status) // a hanging host sends no status
	}
	qh := h.quota(now, e)
	t, others := h.pool.enter(h.lim.workers())
	var delay time.Duration
	if t == nil {
		delay = h.latency(e, others)
	}
	h.mu.Unlock()
	if t != nil {
		var ok bool
		if delay, ok = h.await(r, t); !ok {
			abort() // the client gave up in the queue, or the server is closing
		}
	}
	// The request holds its worker (its place in flight) until its answer
	// leaves the origin, the last byte of it for a DripBody.
	held := true
	defer func() {
		if held {
			h.mu.Lock()
			h.pool.leave()
			h.advance(s.Elapsed())
			h.mu.Unlock()
		}
	}()

	if adv.Kind == Hang {
		s.hang(r)
	}
	if delay > 0 && !s.sleep(r, delay) {
		// Closing, or the client gave up: drop the connection rather than
		// let the server send an empty 200.
		abort()
	}
	h.mu.Lock()
	done := s.Elapsed()
	h.latencies = append(h.latencies, done-e)
	if adv.Kind != DripBody {
		held = false
		h.pool.leave()
		h.advance(done)
	}
	h.mu.Unlock()

	s.deliver(r, down)
	hdr := w.Header()
	qh.write(hdr)
	ctype, body := "text/plain; charset=utf-8", []byte(nil)
	switch rep.status {
	case http.StatusOK:
		ctype, body = "text/html; charset=utf-8", renderPage(h.name, rep.page, h.pol.Site)
	case http.StatusFound:
		hdr["Location"] = []string{rep.location}
		body = []byte("302 Found\n")
	case http.StatusBadRequest:
		body = []byte("400 bad request: testserver: " + rep.msg + "\n")
	default:
		body = []byte("404 page not found\n")
	}
	switch adv.Kind {
	case ResetMidBody:
		resetMidBody(w, rep.status, ctype, body, adv.Bytes)
	case DripBody:
		s.drip(w, r, rep.status, ctype, body, adv)
	default:
		writeBody(w, rep.status, ctype, body)
	}
}

// await waits until the queued request of t has a worker and returns its
// service time. It reports false if the client went away or the server
// closed first; the request has then left the queue (or given back
// the worker it was granted at that moment). While it waits, it puts in
// force the schedule steps as they fall due, so that a step that adds
// workers starts queued requests on time.
func (h *host) await(r *http.Request, t *ticket) (delay time.Duration, ok bool) {
	s := h.srv
	for {
		h.mu.Lock()
		at, due := h.nextStep()
		h.mu.Unlock()
		var step <-chan time.Time
		var timer *time.Timer
		if due {
			timer = time.NewTimer(at - s.Elapsed())
			step = timer.C
		}
		var gone bool
		select {
		case <-t.ready:
		case <-step:
			h.mu.Lock()
			h.advance(s.Elapsed())
			h.mu.Unlock()
			continue // the timer has fired: nothing to stop
		case <-r.Context().Done():
			gone = true
		case <-s.done:
			gone = true
		}
		if timer != nil {
			timer.Stop()
		}
		if gone {
			h.mu.Lock()
			if h.pool.cancel(t) {
				h.advance(s.Elapsed())
			}
			h.mu.Unlock()
			return 0, false
		}
		return t.delay, true // written before ready was closed
	}
}

func (h *host) serveRobots(w http.ResponseWriter, r *http.Request, down time.Duration) {
	h.mu.Lock()
	now := time.Now()
	e := now.Sub(h.srv.start)
	h.arrive(e, r)
	h.robots++
	h.count(h.robotsStatus)
	var ra string
	var pause time.Duration
	if d := h.pol.Robots.RetryAfter; d > 0 && (h.robotsStatus < 200 || h.robotsStatus > 299) {
		s := ceilSeconds(d, 1)
		ra = strconv.FormatInt(s, 10)
		pause = time.Duration(s) * time.Second
	}
	qh := h.quota(now, e)
	h.mu.Unlock()
	h.srv.deliver(r, down)
	h.announceDelivered(r, e, pause, false)
	hdr := w.Header()
	qh.write(hdr)
	if ra != "" {
		hdr["Retry-After"] = []string{ra}
	}
	if h.robotsSize == int64(len(h.robotsBody)) {
		writeBody(w, h.robotsStatus, h.robotsType, h.robotsBody)
		return
	}
	hdr["Content-Type"] = []string{h.robotsType}
	hdr["Content-Length"] = []string{strconv.FormatInt(h.robotsSize, 10)}
	w.WriteHeader(h.robotsStatus)
	if _, err := w.Write(h.robotsBody); err != nil {
		return
	}
	rest := h.robotsSize - int64(len(h.robotsBody))
	if b := h.robotsBody; len(b) > 0 && b[len(b)-1] != '\n' {
		if _, err := w.Write(newline); err != nil {
			return
		}
		rest--
	}
	for rest > 0 {
		n := int(min(rest, int64(len(robotsFiller))))
		if _, err := w.Write(robotsFiller[:n]); err != nil {
			return // the client went away, or the server is closing
		}
		rest -= int64(n)
	}
}

var newline = []byte{'\n'}

// parsePath maps "/" to page -1 and "/page/N" to N, N in canonical decimal
// (no sign, no leading zero) and below Site.Pages.
func (h *host) parsePath(p string) (page int, found bool) {
	if p == "/" {
		return -1, true
	}
	digits, ok := strings.CutPrefix(p, "/page/")
	if !ok || digits == "" || len(digits) > 10 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n < h.pol.Site.Pages
}

func writeBody(w http.ResponseWriter, status int, ctype string, body []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = []string{ctype}
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

var blockPage = []byte(`<!DOCTYPE html>
<html><head><title>Access Denied</title></head>
<body><h1>Access Denied</h1>
<p>You have been blocked for sending too many requests.</p></body></html>
`)

// renderPage renders page n of site (n = -1: the index "/").
func renderPage(hostName string, n int, site Site) []byte {
	var b strings.Builder
	b.Grow(160 + 48*site.FanOut)
	title := hostName + " index"
	if n >= 0 {
		title = hostName + " page " + strconv.Itoa(n)
	}
	b.WriteString("<!DOCTYPE html>\n<html><head><title>")
	b.WriteString(title)
	b.WriteString("</title></head>\n<body><h1>")
	b.WriteString(title)
	b.WriteString("</h1>\n<ul>\n")
	links := site.FanOut
	if n < 0 {
		links = min(site.FanOut, site.Pages)
	}
	for i := range links {
		t := i
		if n >= 0 {
			t = (n*site.FanOut + i + 1) % site.Pages
		}
		ts := strconv.Itoa(t)
		b.WriteString(`<li><a href="/page/`)
		b.WriteString(ts)
		b.WriteString(`">page `)
		b.WriteString(ts)
		b.WriteString("</a></li>\n")
	}
	b.WriteString("</ul>\n</body></html>\n")
	return []byte(b.String())
}

// renderRobots returns the status and body of a robots.txt.
func renderRobots(r *Robots) (int, []byte) {
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	if r.Body != "" {
		return status, []byte(r.Body)
	}
	if status < 200 || status > 299 {
		return status, []byte(http.StatusText(status) + "\n")
	}
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	if r.CrawlDelay > 0 {
		b.WriteString("Crawl-delay: ")
		b.WriteString(strconv.FormatFloat(r.CrawlDelay.Seconds(), 'f', -1, 64))
		b.WriteString("\n")
	}
	if len(r.Disallow) == 0 {
		b.WriteString("Disallow:\n")
	}
	for _, d := range r.Disallow {
		b.WriteString("Disallow: ")
		b.WriteString(d)
		b.WriteString("\n")
	}
	return status, []byte(b.String())
}
