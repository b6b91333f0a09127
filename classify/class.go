package classify

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrUnknownClass is returned (wrapped) when text or a value names no
// defined [Class].
var ErrUnknownClass = errors.New("classify: unknown class")

// Class is the meaning of one request outcome for a politeness controller.
//
// The zero value is Success. Class is a plain value, safe for concurrent use.
type Class uint8

// The classes, in no order of severity.
const (
	// Success: a 2xx or 3xx response.
	Success Class = iota
	// Neutral: an answer about the request, not about the server's load:
	// 401, 404, 410 and the other 4xx except 403 and 429; 5xx other than
	// the overload family (500 is usually one broken page, not a busy
	// server); DNS failures; TLS certificate and handshake errors;
	// errors this package does not recognise.
	//
	// 401 is Neutral: it says the credentials are missing or wrong, which
	// no change of pace will fix, and it is often scoped to some paths of a
	// site that is otherwise open, so parking the whole scope (the Blocked
	// policy) would be wrong. Use [Classifier.Statuses] to treat it
	// differently.
	Neutral
	// Throttled: 429, or a 403 that carries Retry-After or a quota header
	// announcing zero remaining (GitHub's rate-limit 403).
	Throttled
	// Blocked: 403, or any response a [Detector] recognises as a block or
	// challenge page, whatever its status.
	Blocked
	// Overloaded: 502, 503, 504 and 520–529 (the gateway and CDN family of
	// "origin is down or too slow").
	Overloaded
	// TransportFailure: no usable answer because of the network path to a
	// possibly struggling server: timeouts (net.Error.Timeout,
	// context.DeadlineExceeded), connection refused, reset or aborted,
	// broken pipe, and io.EOF / io.ErrUnexpectedEOF (the connection closed
	// before or during the response).
	TransportFailure
	// Canceled: the caller canceled the request (context.Canceled). It
	// says nothing about the server.
	Canceled
)

var classNames = [...]string{
	Success:          "success",
	Neutral:          "neutral",
	Throttled:        "throttled",
	Blocked:          "blocked",
	Overloaded:       "overloaded",
	TransportFailure: "transport-failure",
	Canceled:         "canceled",
}

// String returns the class's lower-case name, such as "throttled", or
// "Class(N)" for a value outside the defined set.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// Valid reports whether c is one of the defined classes.
func (c Class) Valid() bool { return int(c) < len(classNames) }

// Signal reports whether the class says something about server load:
// Throttled, Overloaded and TransportFailure. The others must not move a
// rate or concurrency limit.
func (c Class) Signal() bool {
	return c == Throttled || c == Overloaded || c == TransportFailure
}

// MarshalText encodes the class as its name, so that classes read well as
// JSON values and map keys.
func (c Class) MarshalText() ([]byte, error) {
	if int(c) >= len(classNames) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownClass, uint8(c))
	}
	return []byte(classNames[c]), nil
}

// UnmarshalText decodes a name produced by MarshalText.
func (c *Class) UnmarshalText(text []byte) error {
	for i, n := range classNames {
		if string(text) == n {
			*c = Class(i)
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownClass, text)
}
