package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// Outcome is what one request attempt produced.
//
// Status is the response status code, 0 if no response arrived. Header is
// the response header (nil if none). Body is an optional prefix of the
// response body for block-page detectors; nil means "not read", and
// detectors that need it then report false. Err is the error the client
// returned, if any.
//
// Status and Err may both be set: Colly reports statuses >= 203 as errors,
// and a body read can fail after the status arrived. A status >= 400 is the
// server's answer and decides the class whatever Err says; below 400 a
// recognised transport error (timeout, reset, EOF, cancellation) wins,
// because the response never fully arrived.
//
// The zero value is an outcome with no response and no error (Neutral).
type Outcome struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
}

func (o *Outcome) hasResponse() bool {
	return o.Status != 0 || len(o.Header) != 0 || o.Body != nil
}

// Detector reports whether an outcome is a block or challenge page. It must
// be safe for concurrent use, must not retain o or its fields, and should
// return false quickly when the parts it needs (Header, Body) are nil.
type Detector func(o Outcome) bool

// DefaultDetectors are the detectors a [Classifier] with nil Detectors
// uses. It is read on every classification: change it only before any
// classification runs.
var DefaultDetectors = []Detector{CloudflareChallenge}

// Classifier maps outcomes to classes with a configurable set of
// block-page detectors and status overrides.
//
// The zero value (and a nil *Classifier) is ready to use: it runs
// [DefaultDetectors] and the built-in status table. A Classifier is safe
// for concurrent use as long as its fields are not modified while in use.
type Classifier struct {
	// Detectors recognise block pages; the first that reports true makes
	// the outcome Blocked, whatever the status or error. They run only when
	// the outcome carries a response (a status, a header or a body).
	// nil means DefaultDetectors; an empty non-nil slice disables
	// detection.
	Detectors []Detector

	// Statuses overrides the class of individual status codes, for example
	// {500: Overloaded} for an origin known to fail with 500 under load, or
	// {401: Blocked}. nil means no overrides. It is consulted wherever the
	// status decides the class, after detectors. A value that is none of
	// the classes above (Class(9)) is no override: the status decides as
	// if it were absent.
	Statuses map[int]Class
}

// Classify returns the class of o.
//
// The order of decisions is: a detector match gives Blocked; a status of
// 400 or more decides by status; otherwise a recognised error decides
// (context.Canceled, then DNS and TLS errors, then timeouts, refused or
// reset connections and EOF); an unrecognised error with no response is
// Neutral; and what is left decides by status.
func (c *Classifier) Classify(o Outcome) Class {
	if o.hasResponse() {
		ds := DefaultDetectors
		if c != nil && c.Detectors != nil {
			ds = c.Detectors
		}
		for _, d := range ds {
			if d != nil && d(o) {
				return Blocked
			}
		}
	}
	if o.Err != nil && o.Status < 400 {
		if k, ok := errorClass(o.Err); ok {
			return k
		}
		if o.Status == 0 {
			return Neutral
		}
	}
	return c.status(o.Status, o.Header)
}

func (c *Classifier) status(status int, h http.Header) Class {
	if c != nil && c.Statuses != nil {
		if k, ok := c.Statuses[status]; ok && k.Valid() {
			return k
		}
	}
	return statusClass(status, h)
}

// statusClass is the built-in status table.
func statusClass(status int, h http.Header) Class {
	switch {
	case status >= 200 && status < 400:
		return Success
	case status == http.StatusTooManyRequests:
		return Throttled
	case status == http.StatusForbidden:
		if throttled403(h) {
			return Throttled
		}
		return Blocked
	case status == http.StatusBadGateway,
		status == http.StatusServiceUnavailable,
		status == http.StatusGatewayTimeout,
		status >= 520 && status <= 529:
		return Overloaded
	default:
		// 1xx (never final for a client), other 4xx and 5xx, and codes
		// outside 100–599: an answer about this request only.
		return Neutral
	}
}

// throttled403 recognises the 403s that are rate limits in disguise:
// GitHub answers an exhausted primary limit with 403 and
// x-ratelimit-remaining: 0, and its secondary limits with 403 and
// Retry-After. Blocking a scope for them would be wrong; slowing down is
// right.
func throttled403(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	if _, ok := RetryAfter(h, time.Time{}); ok {
		return true
	}
	q, ok := ParseQuota(h, time.Time{})
	return ok && q.Remaining == 0
}

var zeroClassifier Classifier

// Classify classifies o with the zero [Classifier].
func Classify(o Outcome) Class {
	return zeroClassifier.Classify(o)
}

// Response classifies what http.Client.Do (or a RoundTripper) returned. It
// does not read or close resp.Body; pass an [Outcome] with Body to use
// body detectors.
func Response(resp *http.Response, err error) Class {
	if resp == nil {
		return zeroClassifier.Classify(Outcome{Err: err})
	}
	return zeroClassifier.Classify(Outcome{Status: resp.StatusCode, Header: resp.Header, Err: err})
}

// Status classifies a status code, response header and error, as Colly's
// OnError and OnResponse callbacks report them. status is 0 when no
// response arrived.
func Status(status int, h http.Header, err error) Class {
	return zeroClassifier.Classify(Outcome{Status: status, Header: h, Err: err})
}

// errorClass classifies an error; ok is false for errors it does not
// recognise. It walks the error tree once with a type switch rather than
// calling errors.As per type: no reflection and no allocation, even for a
// storm of refused connections.
func errorClass(err error) (Class, bool) {
	if errors.Is(err, context.Canceled) {
		return Canceled, true
	}
	var found errKind
	walk(err, 0, func(e error) bool {
		found |= kindOf(e)
		return false
	})
	switch {
	case found&kindNeutral != 0:
		// DNS, certificate and TLS protocol failures say nothing about the
		// origin's load: the resolver failed, or the certificate will be
		// just as wrong at any pace. A DNS timeout is a resolver timeout.
		return Neutral, true
	case found&kindTransport != 0,
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF):
		return TransportFailure, true
	}
	return 0, false
}

type errKind uint8

const (
	kindNeutral errKind = 1 << iota
	kindTransport
)

// kindOf classifies one error of a chain, ignoring what it wraps.
func kindOf(e error) errKind {
	switch e {
	case context.DeadlineExceeded, io.EOF, io.ErrUnexpectedEOF:
		return kindTransport
	}
	switch e.(type) {
	case *net.DNSError,
		*tls.CertificateVerificationError, tls.RecordHeaderError, *tls.RecordHeaderError,
		tls.AlertError, *tls.ECHRejectionError,
		x509.UnknownAuthorityError, x509.HostnameError, x509.CertificateInvalidError,
		x509.SystemRootsError, x509.ConstraintViolationError,
		x509.UnhandledCriticalExtension, x509.InsecureAlgorithmError:
		return kindNeutral
	}
	if isConnErrno(e) {
		return kindTransport
	}
	// *url.Error and *net.OpError only ask their direct cause for Timeout;
	// walking every node also finds a timeout wrapped by fmt.Errorf.
	if t, ok := e.(interface{ Timeout() bool }); ok && t.Timeout() {
		return kindTransport
	}
	return 0
}

// maxDepth bounds the walk over pathological (cyclic or very deep) error
// chains.
const maxDepth = 64

func walk(err error, depth int, f func(error) bool) bool {
	for ; err != nil && depth < maxDepth; depth++ {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, depth+1, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
