package polite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colly-polite/polite/classify"
)

// Transport is an http.RoundTripper that sends every request through its
// Controller: it waits politely for a slot, sends, records the outcome, and
// retries throttled, overloaded and failed attempts of idempotent requests.
// The slot is held until the response body is read to the end or closed, so
// callers must close bodies, as net/http requires anyway. Safe for
// concurrent use.
type Transport struct {
	c    *Controller
	next http.RoundTripper
	// attemptTimeout bounds each attempt from the moment it is sent:
	// Config.AttemptTimeout, or (under Attach) the collector's timeout
	attemptTimeout time.Duration
}

// NewTransport makes a controller from cfg (at most one; none means
// Config{}) and gives it to any http.Client, API clients as well as
// crawlers:
//
//	client := &http.Client{Transport: polite.NewTransport(http.DefaultTransport)}
//
// robots.txt is off unless cfg.Robots says otherwise. An invalid setting
// fails safe (its most conservative value, every valid one kept) and
// Controller().Err() reports it; New returns the error instead.
func NewTransport(next http.RoundTripper, cfg ...Config) *Transport {
	return failSafe(cfg).Transport(next)
}

// Transport returns a RoundTripper that sends through next under this
// controller; nil next means http.DefaultTransport. A controller may have
// many transports (one per client, say): they share its scopes. Safe for
// concurrent use.
func (c *Controller) Transport(next http.RoundTripper) *Transport {
	return c.transport(next, c.st.AttemptTimeout)
}

func (c *Controller) transport(next http.RoundTripper, attemptTimeout time.Duration) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{c: c, next: next, attemptTimeout: attemptTimeout}
}

// Controller returns the controller behind t: its snapshots, events and
// errors.
func (t *Transport) Controller() *Controller { return t.c }

// RoundTrip implements http.RoundTripper: it waits politely, sends,
// retries what may be retried, and returns the answer or a refusal (a
// *ScopeError). Safe for concurrent use.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if m, ok := req.Context().Value(sendingKey{}).(*sending); ok && m.c == t.c && !m.over.Load() {
		// an attempt of this controller's, come back through a wrapper
		// of one of its transports (a transport set on top of Attach's
		// that holds the controller's own): it holds its slot already,
		// and waiting for another would wait on itself
		return t.next.RoundTrip(req)
	}
	cl := t.c.resolve(req)
	if t.c.st.robots && isRobots(req) {
		return t.teeRobots(req, cl)
	}
	f, err := t.robotsFor(req.Context(), req, cl.key)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if err := t.c.disallowed(req, cl.key, &f); err != nil {
		closeBody(req)
		return nil, err
	}
	cl.crawlDelay = f.delay
	retries := 0
	if retryable(req) {
		retries = cl.rule.retries
	}
	return t.roundTrip(req, cl, retries, t.attemptTimeout)
}

// sendingKey marks the context of an attempt a controller sends (its
// value a *sending).
type sendingKey struct{}

// sending is an attempt of a controller's under way: its mark holds only
// until the attempt ends (its body's end, or its error), so that a
// request built later on the attempt's context (a follow-up made from a
// response's Request) is no attempt, and goes through the controller.
type sending struct {
	c    *Controller
	over atomic.Bool
}

// closeBody closes the body of a request that never reached the transport
// below (a refusal, a context ended while it waited): a RoundTripper
// closes the request's body, errors included, and net/http's client does
// not when RoundTrip fails (an io.Pipe's writer would wait forever).
func closeBody(req *http.Request) {
	if req.Body != nil && req.Body != http.NoBody {
		_ = req.Body.Close()
	}
}

// isRobots: req asks for a robots.txt.
func isRobots(req *http.Request) bool {
	return req.URL != nil && req.URL.Path == "/robots.txt" && (req.Method == "" || req.Method == http.MethodGet)
}

// origin is the scheme and normalised host of req.
func origin(req *http.Request) string {
	return reqScheme(req) + "://" + normalizeHost(reqScheme(req), reqHost(req))
}

// disallowed returns the error of a request that robots.txt facts f
// forbid (with RobotsDisallow on), or nil.
func (c *Controller) disallowed(req *http.Request, key string, f *robotsFacts) error {
	if !c.st.disallow || req.URL == nil || f.group == nil && !f.disallowAll || f.allows(req.URL.RequestURI()) {
		return nil
	}
	e := &ScopeError{Scope: key, Err: ErrDisallowed}
	if f.disallowAll {
		until := c.known.robotsExpiry(origin(req))
		if until > 0 {
			e.Until = c.at(until)
		}
	}
	return e
}

// robotsPolicy is the settings fetchRobots needs.
func (c *Controller) robotsPolicy() robotsPolicy {
	st := c.st
	return robotsPolicy{ttl: st.RobotsTTL, failDelay: st.RobotsFailDelay, retry: st.RobotsRetry, maxDelay: st.MaxCrawlDelay, disallow: st.disallow, logger: st.Logger}
}

// robotsFor makes sure the robots.txt of req's origin has been read, and
// returns what it says (nothing when robots.txt is off). A missing or stale
// entry is fetched, through the same politeness, by the first caller; the
// others wait for it. The fetch ends with its caller's context: then it is
// abandoned, not cached, and the next caller asks again.
func (t *Transport) robotsFor(ctx context.Context, req *http.Request, key string) (robotsFacts, error) {
	if !t.c.st.robots || req.URL == nil || req.URL.Path == "/robots.txt" {
		return robotsFacts{}, nil
	}
	origin := origin(req)
	for {
		e, mine := t.c.known.robots(origin, t.c.now())
		if !mine {
			select {
			case <-e.done:
				if e.abandoned {
					continue
				}
				return t.c.known.factsOf(e), nil
			case <-ctx.Done():
				return robotsFacts{}, ctx.Err()
			}
		}
		return t.fetchRobots(ctx, req, e, origin, key)
	}
}

// fetchRobots reads origin's robots.txt for entry e, which this caller
// fetches. However it ends (a panic of the transport below included), the
// entry is done: abandoned unless read, so that the callers waiting on it
// go on and the next one asks again.
func (t *Transport) fetchRobots(ctx context.Context, req *http.Request, e *originFacts, origin, key string) (robotsFacts, error) {
	settled := false
	defer func() {
		if !settled {
			t.c.known.robotsDone(e, origin, key, robotsFacts{}, t.c.now(), true)
			t.c.notify(key)
		}
	}()
	timeout := t.robotsTimeout()
	send := func(r *http.Request) (*http.Response, error) {
		return t.roundTrip(r, t.c.resolve(r), 0, timeout) // no retries: unavailable at once
	}
	f, ttl, err := fetchRobots(ctx, send, origin, req.Header.Get("User-Agent"), t.c.robotsPolicy())
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	settled = true
	t.c.known.robotsDone(e, origin, key, f, t.c.now()+ttl, err != nil)
	t.c.notify(key)
	if err != nil {
		return robotsFacts{}, err
	}
	return f, nil
}

// teeRobots sends a request for a robots.txt that comes from above (Colly's
// own robots.txt handling, IgnoreRobotsTxt = false) and, when the
// controller does not know that origin's robots.txt yet, reads the answer
// as its own fetch would, so that robots.txt is fetched once for both. The
// caller still reads the whole body. A redirect is left to the caller; the
// controller then reads robots.txt itself when it needs it.
func (t *Transport) teeRobots(req *http.Request, cl call) (*http.Response, error) {
	origin := origin(req)
	e, mine := t.c.known.robots(origin, t.c.now())
	if !mine {
		return t.roundTrip(req, cl, 0, t.attemptTimeout)
	}
	settled := false
	done := func(f robotsFacts, ttl time.Duration, abandoned bool) {
		settled = true
		t.c.known.robotsDone(e, origin, cl.key, f, t.c.now()+ttl, abandoned)
		t.c.notify(cl.key)
	}
	defer func() {
		if !settled { // the transport below panicked: nothing learned
			done(robotsFacts{}, 0, true)
		}
	}()
	// bounded as the controller's own fetch is: the origin's other
	// requests wait on this one
	resp, err := t.roundTrip(req, cl, 0, t.robotsTimeout())
	if err != nil {
		f, ttl := t.c.robotsPolicy().unreadable()
		se := (*ScopeError)(nil)
		done(f, ttl, req.Context().Err() != nil || errors.As(err, &se)) // a refusal of ours: nothing learned
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		done(robotsFacts{}, 0, true)
		return resp, nil
	}
	b, readErr := io.ReadAll(io.LimitReader(resp.Body, robotsMaxBytes))
	f, ttl := t.c.robotsPolicy().from(origin, resp.StatusCode, b, readErr, req.Header.Get("User-Agent"))
	done(f, ttl, readErr != nil && req.Context().Err() != nil)
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	return resp, nil
}

// crawlDelayNow is the Crawl-delay of req's origin as robots.txt is known
// now, without reading it (0 when it is not known fresh: the scope's
// remembered Crawl-delay still holds).
func (t *Transport) crawlDelayNow(req *http.Request) time.Duration {
	if !t.c.st.robots || isRobots(req) {
		return 0
	}
	f, state := t.c.known.robotsState(origin(req), t.c.now())
	if state != robotsKnown {
		return 0
	}
	return f.delay
}

// robotsTimeout bounds one robots.txt attempt: the attempt's timeout, or
// robotsTimeout when there is none.
func (t *Transport) robotsTimeout() time.Duration {
	if t.attemptTimeout == 0 {
		return robotsTimeout
	}
	return t.attemptTimeout
}

var idempotent = map[string]bool{"": true, "GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true, "PUT": true, "DELETE": true}

// retryable: idempotent requests (or with an idempotency key) whose body
// can be sent again.
func retryable(req *http.Request) bool {
	if !idempotent[req.Method] && req.Header.Get("Idempotency-Key") == "" && req.Header.Get("X-Idempotency-Key") == "" {
		return false
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// roundTrip sends req under cl's scope, retrying up to retries times; each
// attempt is bounded by timeout (0: none) from the moment it is sent.
func (t *Transport) roundTrip(req *http.Request, cl call, retries int, timeout time.Duration) (*http.Response, error) {
	ctx := req.Context()
	var cookies []string // the Set-Cookie lines of the refusals retried
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// the Crawl-delay in force now: robots.txt may have been
			// read again since the first attempt (the ceiling an origin's
			// Crawl-delay sets only ever tightens, and a stale one would
			// hold until the next read)
			cl.crawlDelay = t.crawlDelayNow(req)
		}
		p, err := t.c.acquire(ctx, cl)
		if err != nil {
			if attempt == 0 {
				closeBody(req) // it never reached the transport below
			}
			return nil, err
		}
		r := req
		if attempt > 0 {
			p.retried()
			r = req.Clone(ctx)
			if req.GetBody != nil {
				if r.Body, err = req.GetBody(); err != nil {
					p.Drop()
					return nil, err
				}
			}
			withCookies(r, cookies)
		}
		resp, o, err := t.attempt(p, r, timeout)
		last := attempt >= retries
		switch o.class {
		case classify.Throttled, classify.Overloaded:
			if o.hasRA && o.retryAfter > t.c.st.MaxPause {
				discard(resp)
				return nil, &ScopeError{Scope: cl.key, Pause: PauseRetryAfter, Until: time.Now().Add(min(o.retryAfter, longestPause)), Err: ErrPaused}
			}
			if !last {
				if resp != nil {
					cookies = append(cookies, resp.Header.Values("Set-Cookie")...)
				}
				discard(resp)
				continue
			}
		case classify.TransportFailure:
			if !last && ctx.Err() == nil {
				discard(resp)
				continue
			}
		}
		if resp != nil && len(cookies) > 0 {
			// the client's cookie jar reads the answer it is given:
			// the cookies the refusals set come first, the answer's own
			// after (a later one of a name wins)
			resp.Header["Set-Cookie"] = append(cookies, resp.Header["Set-Cookie"]...)
		}
		return resp, err
	}
}

// withCookies gives a retry the cookies the refusals before it set (a
// challenge's token on a 429, a load balancer's session), as the client's
// jar would have had it been asked between them: each replaces one of the
// same name, if it applies to the request (its path, its Secure flag).
func withCookies(r *http.Request, lines []string) {
	if len(lines) == 0 {
		return
	}
	set := (&http.Response{Header: http.Header{"Set-Cookie": lines}}).Cookies()
	keep := r.Cookies()
	r.Header.Del("Cookie")
	fresh := make(map[string]*http.Cookie, len(set))
	for _, c := range set {
		if c.Secure && r.URL.Scheme != "https" || !pathMatch(r.URL.Path, c.Path) {
			continue
		}
		fresh[c.Name] = c // the last of a name wins
	}
	for _, c := range keep {
		if fresh[c.Name] == nil {
			r.AddCookie(c)
		}
	}
	for _, c := range set {
		if f := fresh[c.Name]; f == c {
			if c.MaxAge < 0 || !c.Expires.IsZero() && c.Expires.Before(time.Now()) {
				continue // deleted
			}
			r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
}

// pathMatch is RFC 6265's path-match of a request's path (empty: "/") and
// a cookie's Path (empty: any).
func pathMatch(path, cookie string) bool {
	if path == "" {
		path = "/"
	}
	switch {
	case cookie == "" || path == cookie:
		return true
	case strings.HasPrefix(path, cookie):
		return strings.HasSuffix(cookie, "/") || path[len(cookie)] == '/'
	}
	return false
}

// The bodies the transport reads and does not hand on whole (a refusal it
// retries or gives up on, the part of a refusal's body the detectors see)
// are bounded in bytes and in time: a body that drips would otherwise hold
// the request, and its scope's slot, for as long as the server likes.
// Past the bound the body is closed where it stands, which drops its
// connection rather than wait on it.
const (
	discardBytes = 64 << 10
	// bodyBound is how long such a read may take from the headers on:
	// enough for 64 KiB over a slow path, far less than any wait a caller
	// would accept for an answer that has already said no.
	bodyBound = time.Second
)

// errBodyCut ends a refusal's body that did not arrive within bodyBound.
var errBodyCut = fmt.Errorf("polite: the body of a refusal did not arrive within %v of its headers: its connection was closed: %w", bodyBound, io.ErrUnexpectedEOF)

// discard drains a little of a body that will not be used, so the
// connection can be reused, and closes it. Its outcome is recorded first
// (which releases the slot): the answer is in, and a pause it asks for
// starts now, not when a slow body ends. The attempt's context ends only
// at the Close: net/http closes a connection whose request is cancelled
// before its body was read to the end.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	if b, ok := resp.Body.(*body); ok {
		b.record(nil)
	}
	cut := time.AfterFunc(bodyBound, func() { _ = resp.Body.Close() })
	// one byte more than the bound, so that a chunked body of exactly
	// discardBytes reads its last chunk and ends cleanly
	_, _ = io.CopyN(io.Discard, resp.Body, discardBytes+1)
	cut.Stop()
	_ = resp.Body.Close()
}

// attempt sends one attempt under permit p. The attempt's timeout starts
// here, after the polite wait. Every way out releases the slot exactly
// once: at once for an error (a body that fails inside the part the
// detectors see included) or a panic of the transport below; for a
// response, when its body ends.
func (t *Transport) attempt(p Permit, req *http.Request, timeout time.Duration) (resp *http.Response, o outcome, err error) {
	parent, asked := req.Context(), req
	cancel := context.CancelFunc(func() {})
	mark := &sending{c: t.c}
	ctx := context.WithValue(parent, sendingKey{}, mark)
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	req = req.WithContext(ctx)
	handed := false
	defer func() {
		if !handed { // the transport below panicked
			mark.over.Store(true)
			cancel()
			t.c.finish(p, &outcome{class: classify.Canceled}, nil, nil, t.c.now())
		}
	}()
	resp, err = t.next.RoundTrip(req)
	now := t.c.now()
	if err == nil && resp.Body == nil {
		resp.Body = http.NoBody // (a RoundTripper may leave it nil; net/http's client allows it)
	}
	if err == nil && resp.Request == req {
		resp.Request = asked // the caller's, not the attempt's marked copy
	}
	var prefix []byte
	if err == nil && t.c.peekBody && resp.StatusCode < 500 {
		// a page's body is the caller's to wait for; a refusal's is not
		bound := time.Duration(0)
		if resp.StatusCode >= 400 {
			bound = bodyBound
		}
		if prefix, err = peek(resp, bound); err != nil && resp.StatusCode >= 400 {
			// a refusal's status says what it is (a 429 and its
			// Retry-After stand): the part read goes on, then the error
			err = nil
		} else if err != nil {
			_ = resp.Body.Close()
			resp = nil
		}
	}
	if err != nil {
		handed = true
		mark.over.Store(true)
		cancel()
		o = t.c.outcomeOf(nil, err, nil)
		if parent.Err() != nil {
			o.class = classify.Canceled
		}
		t.c.finish(p, &o, nil, err, now)
		return nil, o, err
	}
	o = t.c.outcomeOf(resp, nil, prefix)
	o.rtt = now - p.t.Sent
	resp.Body = &body{rc: resp.Body, t: t, p: p, o: o, resp: resp, cancel: cancel, parent: parent, mark: mark}
	handed = true
	return resp, o, nil
}

// body releases its slot exactly once: at EOF, at a read error (a transport
// failure mid-body unless the caller cancelled) or at Close.
type body struct {
	rc     io.ReadCloser
	t      *Transport
	p      Permit
	o      outcome
	resp   *http.Response
	cancel context.CancelFunc
	parent context.Context
	mark   *sending
	once   sync.Once
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		if errors.Is(err, io.EOF) {
			b.finish(nil)
		} else {
			b.finish(err)
		}
	}
	return n, err
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.finish(nil)
	return err
}

// finish records the body's outcome (once) and ends the attempt's
// context.
func (b *body) finish(readErr error) {
	b.record(readErr)
	b.cancel()
}

// record records the body's outcome, once, and releases the slot.
func (b *body) record(readErr error) {
	b.once.Do(func() {
		b.mark.over.Store(true)
		o := b.o
		if readErr != nil && b.resp.StatusCode < 400 {
			// (a refusal's class is its status's, however its body ends:
			// a 403 page that drips is still a block, a 404 no overload)
			if b.parent.Err() != nil {
				o.class = classify.Canceled
			} else if c := b.t.c.st.Classifier.Classify(classify.Outcome{Err: readErr}); c == classify.TransportFailure {
				o.class = c
			}
		}
		b.t.c.finish(b.p, &o, b.resp, readErr, b.t.c.now())
	})
}

// peekBytes is how much of a body block-page detectors see.
const peekBytes = 16 << 10

// peek reads the first peekBytes of resp's body for the detectors and puts
// them back in front of the rest, so the caller still reads the whole body.
// A body shorter than peekBytes is fine; one that fails (a connection reset,
// a Content-Length it does not reach, a stall past the attempt's timeout)
// returns the error. (io.ReadFull cannot tell the two apart: it reports a
// short body as io.ErrUnexpectedEOF, which is also what a truncated body
// says.) With bound > 0, a body whose first peekBytes take longer is closed
// at the bound: what was read is returned, the body then reads errBodyCut,
// and so does peek.
func peek(resp *http.Response, bound time.Duration) ([]byte, error) {
	buf := make([]byte, peekBytes)
	var cut *time.Timer
	if bound > 0 {
		cut = time.AfterFunc(bound, func() { _ = resp.Body.Close() })
	}
	n := 0
	var err error
	for n < len(buf) && err == nil {
		var k int
		k, err = resp.Body.Read(buf[n:])
		n += k
	}
	buf = buf[:n]
	// the bound fell due: the body is closed, or about to be
	closed := cut != nil && !cut.Stop()
	var rest io.Reader = resp.Body
	switch {
	case errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		// all of it: nothing is left to read
		rest, err = eofReader{}, nil
	case closed:
		rest, err = errReader{errBodyCut}, errBodyCut
	case err != nil && bound > 0:
		// a refusal's body that failed: what was read, then the error
		rest = errReader{err}
	case err != nil:
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), rest), resp.Body}
	return buf, err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
