package redisstore_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/colly-polite/polite/redisstore"
)

// New names, in one line at Warn, the client options that would slow
// every store call while Redis is down or slow, with what to set; a
// client set as the package recommends, or one it cannot read, gives no
// line. The clients point at a port nothing listens on: building one
// needs no server.
func TestNewChecksClient(t *testing.T) {
	const addr = "127.0.0.1:1"
	for _, tc := range []struct {
		name   string
		client func() redis.UniversalClient
		want   []string // in the line; nil: no line
		absent []string
	}{
		{"recommended", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		}, nil, nil},
		{"default", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr})
		}, []string{"MaxRetries=3", "DialerRetries=5", "ContextTimeoutEnabled=false", "ReadTimeout=5s", "WriteTimeout=5s",
			`set="MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true"`}, nil},
		{"MaxRetries 0 is 3", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: 0, DialerRetries: 1})
		}, []string{"MaxRetries=3", `set="MaxRetries: -1"`}, []string{"DialerRetries", "ContextTimeoutEnabled"}},
		{"DialerRetries 0 is 5", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		}, []string{"DialerRetries=5", `set="DialerRetries: 1"`}, []string{"MaxRetries", "ContextTimeoutEnabled"}},
		{"socket timeouts within the bound", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1,
				ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
		}, nil, nil},
		{"no read timeout", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, ReadTimeout: -1, WriteTimeout: time.Second})
		}, []string{"ContextTimeoutEnabled=false", "ReadTimeout=none"}, []string{"WriteTimeout"}},
		{"cluster recommended", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true, DialerRetries: 1})
		}, nil, nil},
		{"cluster default", func() redis.UniversalClient { // no retries by default, but five dials
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
		}, []string{"DialerRetries=5", "ContextTimeoutEnabled=false"}, []string{"MaxRetries"}},
		{"ring recommended", func() redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		}, nil, nil},
		{"ring default", func() redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}})
		}, []string{"MaxRetries=3", "DialerRetries=5", "ContextTimeoutEnabled=false", "ReadTimeout=5s"}, nil},
		{"a client it cannot read", func() redis.UniversalClient {
			return wrapped{redis.NewClient(&redis.Options{Addr: addr})}
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client()
			t.Cleanup(func() { _ = c.Close() })
			var buf bytes.Buffer
			redisstore.New(c, redisstore.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			out := buf.String()
			if tc.want == nil {
				assert.Empty(t, out)
				return
			}
			assert.Equal(t, 1, strings.Count(out, "\n"), "one line:\n%s", out)
			assert.Contains(t, out, "level=WARN")
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			for _, a := range tc.absent {
				assert.NotContains(t, out, a)
			}
		})
	}
}

// wrapped is a client New cannot read the options of.
type wrapped struct{ *redis.Client }
