package redisstore

import (
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// callBound is how long the controller gives each call to the store
// before it falls back by itself: a client that retries or waits longer
// only delays the send that waits for the call.
const callBound = time.Second

// timings are the options of a go-redis client that decide how long a call
// to a down or slow Redis takes, as the client applies them (its defaults
// filled in).
type timings struct {
	// retries of a failed command: a failed dial is one (go-redis's
	// shouldRetry), each retry dialling again
	retries int
	// dials is the attempts per dial, 100 ms apart by default
	dials int
	// ctxTimeout is ContextTimeoutEnabled: without it, socket reads and
	// writes ignore the call's deadline and wait up to read and write
	ctxTimeout  bool
	read, write time.Duration // <= 0: no limit
}

// timingsOf reads client's timings; ok is false for a client type whose
// options it cannot read (a wrapper, a mock).
func timingsOf(client redis.UniversalClient) (t timings, ok bool) {
	switch c := client.(type) {
	case *redis.Client:
		// Options() has go-redis's defaults filled in (MaxRetries 0 is
		// 3, -1 is 0; DialerRetries <= 0 is 5; ReadTimeout 0 is 5 s)
		o := c.Options()
		return timings{o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout}, true
	case *redis.ClusterClient:
		// filled in too, but MaxRetries 0 is none here, and a negative
		// DialerRetries is left for each node to make 5. MaxRedirects
		// retries a failed dial too, but it also follows MOVED and ASK,
		// which a cluster being resharded needs: it is left alone
		o := c.Options()
		return timings{o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout}, true
	case *redis.Ring:
		// MaxRetries is filled in (its shards never retry); the rest is
		// as written, for each shard to fill in
		o := c.Options()
		read := o.ReadTimeout
		if read == 0 {
			read = 5 * time.Second
		}
		write := o.WriteTimeout
		if write == 0 {
			write = read
		}
		return timings{o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, read, write}, true
	}
	return timings{}, false
}

// advice is the attributes of one log line naming each of t's options that
// makes a call to a down or slow Redis slower than it must be, its value
// and, in "set", what to set instead; nil when there is none.
func (t timings) advice() []any {
	var attrs []any
	var set []string
	if t.retries > 0 {
		attrs = append(attrs, "MaxRetries", t.retries)
		set = append(set, "MaxRetries: -1")
	}
	if t.dials <= 0 {
		t.dials = 5
	}
	if t.dials > 1 {
		attrs = append(attrs, "DialerRetries", t.dials)
		set = append(set, "DialerRetries: 1")
	}
	long := func(d time.Duration) bool { return d <= 0 || d > callBound }
	if !t.ctxTimeout && (long(t.read) || long(t.write)) {
		attrs = append(attrs, "ContextTimeoutEnabled", false)
		for _, o := range []struct {
			name string
			d    time.Duration
		}{{"ReadTimeout", t.read}, {"WriteTimeout", t.write}} {
			if long(o.d) {
				attrs = append(attrs, o.name, timeout(o.d))
			}
		}
		set = append(set, "ContextTimeoutEnabled: true")
	}
	if set == nil {
		return nil
	}
	return append(attrs, "set", strings.Join(set, ", "))
}

func timeout(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return d.String()
}

// checkClient says, in one line at Warn, which of client's options make
// each call to a down or slow Redis slower than the controller's bound
// needs, and what to set.
func checkClient(client redis.UniversalClient, log *slog.Logger) {
	t, ok := timingsOf(client)
	if !ok {
		return
	}
	if attrs := t.advice(); attrs != nil {
		log.Warn("redisstore: client options slow every store call while Redis is down or slow "+
			"(the controller bounds each call to a second and falls back by itself)", attrs...)
	}
}
