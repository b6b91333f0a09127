package polite_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/colly-polite/polite"
	"github.com/colly-polite/polite/adaptive"
	"github.com/colly-polite/polite/classify"
)

func TestNewRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	cfg := func(c polite.Config) []polite.Config { return []polite.Config{c} }
	def := func(r polite.Rule) []polite.Config { return []polite.Config{{Default: r}} }
	tests := []struct {
		name string
		opts []polite.Config
		want []string // each in the error text
	}{
		{"negative rate", []polite.Config{{Default: polite.Rule{Rate: -1}}}, []string{"Default", "Rate -1"}},
		{"NaN rate", []polite.Config{{Default: polite.Rule{Rate: math.NaN()}}}, []string{"Default", "Rate NaN"}},
		{"+Inf rate", []polite.Config{{Default: polite.Rule{Rate: math.Inf(1)}}}, []string{"Rate +Inf"}},
		{"-Inf rate", []polite.Config{{Default: polite.Rule{Rate: math.Inf(-1)}}}, []string{"Rate -Inf"}},
		{"rate too small to pace", []polite.Config{{Default: polite.Rule{Rate: 1e-300}}}, []string{"Rate 1e-300", "minimum"}},
		{"negative initial rate", def(polite.Rule{InitialRate: -2}), []string{"InitialRate -2"}},
		{"NaN initial rate", def(polite.Rule{InitialRate: math.NaN()}), []string{"InitialRate NaN"}},
		{"Inf initial rate", def(polite.Rule{InitialRate: math.Inf(1)}), []string{"InitialRate +Inf"}},
		{"negative min rate", def(polite.Rule{MinRate: -0.1}), []string{"MinRate -0.1"}},
		{"NaN min rate", def(polite.Rule{MinRate: math.NaN()}), []string{"MinRate NaN"}},
		{"min rate above rate", def(polite.Rule{Rate: 1, MinRate: 2}), []string{"MinRate 2 above Rate 1"}},
		{"negative start concurrency", def(polite.Rule{StartConcurrency: -1}), []string{"StartConcurrency -1"}},
		{"negative min concurrency", def(polite.Rule{MinConcurrency: -1}), []string{"MinConcurrency -1"}},
		{"negative max concurrency", def(polite.Rule{MaxConcurrency: -1}), []string{"MaxConcurrency -1"}},
		{"min concurrency above max", def(polite.Rule{MinConcurrency: 8, MaxConcurrency: 4}), []string{"MinConcurrency 8 above MaxConcurrency 4"}},
		{"bad glob", []polite.Config{{Rules: []polite.Rule{{Domain: "[a-"}}}}, []string{"Rules[0]", `Domain "[a-"`}},
		{"bad glob in a later rule", []polite.Config{{Rules: []polite.Rule{{Domain: "ok.example"},
			{Domain: `*.example\`}}},
		}, []string{"Rules[1]", "Domain"}},
		{"rule without domain", []polite.Config{{Rules: []polite.Rule{{Rate: 1}}}}, []string{"Rules[0]", "Domain", "DomainRegexp"}},
		{"invalid rule names its domain", []polite.Config{{Rules: []polite.Rule{{Domain: "*.example.com", Rate: -1}}}}, []string{`Rules[0] ("*.example.com")`, "Rate -1"}},
		{"invalid regexp rule names its regexp", []polite.Config{{Rules: []polite.Rule{{DomainRegexp: regexp.MustCompile(`example\.org$`), MaxConcurrency: -3}}}}, []string{`Rules[0] ("example\\.org$")`, "MaxConcurrency -3"}},
		{"negative MaxPause", []polite.Config{{MaxPause: -time.Second}}, []string{"MaxPause"}},
		{"negative MinRetryAfter", cfg(polite.Config{MinRetryAfter: -1}), []string{"MinRetryAfter"}},
		{"negative Backoff", cfg(polite.Config{Backoff: -1}), []string{"Backoff"}},
		{"negative MaxBackoff", cfg(polite.Config{MaxBackoff: -1}), []string{"MaxBackoff"}},
		{"negative OverloadHold", cfg(polite.Config{OverloadHold: -1}), []string{"OverloadHold"}},
		{"negative BreakerCooldown", cfg(polite.Config{BreakerCooldown: -1}), []string{"BreakerCooldown"}},
		{"negative MaxCrawlDelay", cfg(polite.Config{MaxCrawlDelay: -1}), []string{"MaxCrawlDelay"}},
		{"negative RobotsTTL", cfg(polite.Config{RobotsTTL: -1}), []string{"RobotsTTL"}},
		{"negative RobotsFailDelay", cfg(polite.Config{RobotsFailDelay: -1}), []string{"RobotsFailDelay"}},
		{"negative RobotsRetry", cfg(polite.Config{RobotsRetry: -1}), []string{"RobotsRetry"}},
		{"negative IdleTTL", cfg(polite.Config{IdleTTL: -1}), []string{"IdleTTL"}},
		{"negative AttemptTimeout", []polite.Config{{AttemptTimeout: -time.Second}}, []string{"AttemptTimeout"}},
		{"MaxBackoff below Backoff", cfg(polite.Config{Backoff: 2 * time.Second, MaxBackoff: time.Second}), []string{"MaxBackoff 1s below Backoff 2s"}},
		{"MaxBackoff below the default Backoff", cfg(polite.Config{MaxBackoff: 500 * time.Millisecond}), []string{"MaxBackoff 500ms below Backoff 1s"}},
		{"negative EventBuffer", cfg(polite.Config{EventBuffer: -1}), []string{"EventBuffer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				c   *polite.Controller
				err error
			)
			require.NotPanics(t, func() { c, err = polite.New(cfgOf(tt.opts...)) })
			require.ErrorIs(t, err, polite.ErrConfig)
			assert.Nil(t, c)
			assert.True(t, strings.HasPrefix(err.Error(), "polite: "), err.Error())
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// Values that look odd but are documented as meaningful.
func TestNewAcceptsDocumentedValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []polite.Config
	}{
		{"zero config", nil},
		{"no retries", []polite.Config{{Default: polite.Rule{MaxRetries: -1}}}},
		{"never park", []polite.Config{{Default: polite.Rule{BlockThreshold: -1}}}},
		{"park until Unpark", []polite.Config{{Default: polite.Rule{ParkFor: -1}}}},
		{"no jitter, no breaker", []polite.Config{{Jitter: -1, BreakerThreshold: -1}}},
		{"MaxBackoff equal to Backoff", []polite.Config{{Backoff: time.Second, MaxBackoff: time.Second}}},
		{"Backoff above the default MaxBackoff", []polite.Config{{Backoff: 2 * time.Minute}}},
		{"MinConcurrency above the default MaxConcurrency", []polite.Config{{Default: polite.Rule{MinConcurrency: 100}}}},
		{"slowest rate", []polite.Config{{Default: polite.Rule{Rate: 1e-6}}}},
		{"huge rate", []polite.Config{{Default: polite.Rule{Rate: 1e300}}}},
		{"regexp rule ignores Domain", []polite.Config{{Rules: []polite.Rule{{Domain: "[", DomainRegexp: regexp.MustCompile("x")}}}}},
		{"seed and rate", []polite.Config{{JitterSeed: 1, Default: polite.Rule{Rate: 3}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := polite.New(cfgOf(tt.opts...))
			require.NoError(t, err)
			require.NotNil(t, c)
			assert.NoError(t, c.Err())
		})
	}
}

// cfgFirstSnapshot sends one request to rawURL under c (acquire, record a
// 200) and returns the state of its scope.
func cfgFirstSnapshot(t *testing.T, c *polite.Controller, rawURL string) polite.Snapshot {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	require.NoError(t, err)
	p, err := c.Acquire(context.Background(), req)
	require.NoError(t, err)
	p.Record(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req}, nil)
	key := polite.ScopeHost(req)
	s, ok := c.Snapshot(key)
	require.True(t, ok, "no scope %q", key)
	return s
}

func TestRulesAndDefaults(t *testing.T) {
	t.Parallel()
	type probe struct {
		url   string
		limit int
		rate  float64
	}
	tests := []struct {
		name   string
		opts   []polite.Config
		probes []probe
	}{
		{"defaults: limit 4, slow start at 2/s", nil, []probe{{"https://example.com/", 4, 2}}},
		{"Rate caps the initial rate", []polite.Config{{Default: polite.Rule{Rate: 1}}}, []probe{{"https://example.com/", 4, 1}}},
		{"Rate caps an explicit initial rate", []polite.Config{{Default: polite.Rule{Rate: 0.5, InitialRate: 3}}}, []probe{{"https://example.com/", 4, 0.5}}},
		{"Rate above the initial rate is only a ceiling", []polite.Config{{Default: polite.Rule{Rate: 10}}}, []probe{{"https://example.com/", 4, 2}}},
		{"InitialRate", []polite.Config{{Default: polite.Rule{InitialRate: 5}}}, []probe{{"https://example.com/", 4, 5}}},
		{"MinRate raises the initial rate", []polite.Config{{Default: polite.Rule{MinRate: 3}}}, []probe{{"https://example.com/", 4, 3}}},
		{"MaxConcurrency caps the start", []polite.Config{{Default: polite.Rule{MaxConcurrency: 2}}}, []probe{{"https://example.com/", 2, 2}}},
		{"MinConcurrency raises the start", []polite.Config{{Default: polite.Rule{MinConcurrency: 8}}}, []probe{{"https://example.com/", 8, 2}}},
		{"MinConcurrency above the default ceiling", []polite.Config{{Default: polite.Rule{MinConcurrency: 100}}}, []probe{{"https://example.com/", 100, 2}}},
		{"StartConcurrency", []polite.Config{{Default: polite.Rule{StartConcurrency: 10}}}, []probe{{"https://example.com/", 10, 2}}},
		{"rules by glob; the first match wins; the default covers the rest", []polite.Config{{Default: polite.Rule{InitialRate: 7}, Rules: []polite.Rule{{Domain: "*.example.com", Rate: 1, MaxConcurrency: 2},
			{Domain: "a.example.com", Rate: 0.5},
			{Domain: "example.com", Rate: 0.25}}},
		}, []probe{
			{"https://a.example.com/", 2, 1},
			{"https://b.example.com/x", 2, 1},
			{"https://example.com/", 4, 0.25},
			{"https://example.org/", 4, 7},
			{"https://a.example.com.evil.test/", 4, 7},
		}},
		{"rules match the host without port, case or trailing dot", []polite.Config{{Rules: []polite.Rule{{Domain: "*.example.com", Rate: 1}}}}, []probe{
			{"http://a.example.com:8080/", 4, 1},
			{"https://B.Example.COM/", 4, 1},
			{"https://c.example.com./", 4, 1},
		}},
		{"regexp rules", []polite.Config{{Rules: []polite.Rule{{DomainRegexp: regexp.MustCompile(`^(.+\.)?example\.org$`), Rate: 0.25},
			{Domain: "*", Rate: 1.5}}},
		}, []probe{
			{"https://example.org/", 4, 0.25},
			{"https://www.example.org/", 4, 0.25},
			{"https://example.org.test/", 4, 1.5},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := polite.New(cfgOf(tt.opts...))
				require.NoError(t, err)
				for _, p := range tt.probes {
					s := cfgFirstSnapshot(t, c, p.url)
					assert.Equal(t, p.limit, s.Limit, "%s: limit", p.url)
					assert.Equal(t, p.rate, s.Rate, "%s: rate", p.url)
				}
			})
		})
	}
}

// A rate at the lowest accepted value still paces: the second request is
// not sent at once, it fails fast (a gap of 11.6 days is longer than
// MaxPause).
func TestSlowestRatePaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := polite.New(polite.Config{Default: polite.Rule{Rate: 1e-6}})
		require.NoError(t, err)
		start := time.Now()
		sent := 0
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/", nil)
			p, err := c.Acquire(ctx, req)
			cancel()
			if err != nil {
				assert.ErrorIs(t, err, polite.ErrPaused)
				var se *polite.ScopeError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, polite.CeilingConfigured, se.Ceiling)
				continue
			}
			sent++
			p.Record(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req}, nil)
		}
		assert.Equal(t, 1, sent)
		// the refusals were immediate: the wait would pass the deadline
		assert.Zero(t, time.Since(start))
	})
}

// cfgServer answers every request with status and header, counting requests
// by path.
type cfgServer struct {
	mu     sync.Mutex
	status int
	header http.Header
	paths  []string
}

func (s *cfgServer) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paths = append(s.paths, r.URL.Path)
	return &http.Response{
		StatusCode: s.status, Header: s.header.Clone(), Request: r,
		Body: io.NopCloser(strings.NewReader("")),
	}, nil
}

func (s *cfgServer) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

func TestInvalidOptionFallsBackToDefaults(t *testing.T) {
	t.Run("Attach", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var ctrl *polite.Controller
			require.NotPanics(t, func() {
				ctrl = adaptive.Attach(colly.NewCollector(), polite.Config{Default: polite.Rule{Rate: math.NaN()}})
			})
			require.NotNil(t, ctrl)
			require.ErrorIs(t, ctrl.Err(), polite.ErrConfig)
			assert.ErrorContains(t, ctrl.Err(), "Rate NaN")
			s := cfgFirstSnapshot(t, ctrl, "https://example.com/")
			assert.Equal(t, 4, s.Limit)
			assert.Equal(t, 0.05, s.Rate, "an unreadable rate ceiling becomes the minimum rate")
		})
	})
	t.Run("NewTransport", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &cfgServer{status: http.StatusOK}
			var tr *polite.Transport
			require.NotPanics(t, func() {
				tr = polite.NewTransport(srv, polite.Config{Rules: []polite.Rule{{Domain: "[", Rate: 1}}})
			})
			ctrl := tr.Controller()
			require.ErrorIs(t, ctrl.Err(), polite.ErrConfig)
			assert.ErrorContains(t, ctrl.Err(), "Rules[0]")
			// the transport still works, under the defaults
			resp, err := (&http.Client{Transport: tr}).Get("https://example.com/")
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, []string{"/"}, srv.sent(), "robots.txt stays off for NewTransport")
			s, ok := ctrl.Snapshot("example.com")
			require.True(t, ok)
			assert.Equal(t, 4, s.Limit)
			assert.Equal(t, 2.0, s.Rate)
		})
	})
	t.Run("valid options", func(t *testing.T) {
		assert.NoError(t, polite.NewTransport(nil, polite.Config{Default: polite.Rule{Rate: 1}}).Controller().Err())
		assert.NoError(t, adaptive.Attach(colly.NewCollector(), polite.Config{Default: polite.Rule{Rate: 1}}).Err())
	})
}

var envVars = []string{
	"COLLY_POLITE_RATE",
	"COLLY_POLITE_INITIAL_RATE",
	"COLLY_POLITE_MAX_CONCURRENCY",
	"COLLY_POLITE_MAX_RETRIES",
	"COLLY_POLITE_MAX_BACKOFF",
	"COLLY_POLITE_MAX_PAUSE",
	"COLLY_POLITE_ROBOTS",
}

// fromEnv is parts merged with the environment read on top, as a caller
// does: cfg.ReadEnv() after the code's settings.
func fromEnv(parts ...polite.Config) (polite.Config, error) {
	c := cfgOf(parts...)
	err := c.ReadEnv()
	return c, err
}

// newFromEnv is New of fromEnv, the environment's error and New's joined.
func newFromEnv(parts ...polite.Config) (*polite.Controller, error) {
	c, envErr := fromEnv(parts...)
	ctrl, err := polite.New(c)
	if err = errors.Join(envErr, err); err != nil {
		return nil, err
	}
	return ctrl, nil
}

// envTransport is NewTransport of fromEnv, for a well-formed environment.
func envTransport(t *testing.T, next http.RoundTripper, parts ...polite.Config) *polite.Transport {
	t.Helper()
	c, err := fromEnv(parts...)
	require.NoError(t, err)
	return polite.NewTransport(next, c)
}

// setEnv clears every variable ReadEnv reads, then sets kv ("NAME=value").
func setEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, name := range envVars {
		t.Setenv(name, "")
	}
	for _, s := range kv {
		name, v, ok := strings.Cut(s, "=")
		require.True(t, ok, s)
		t.Setenv(name, v)
	}
}

func TestReadEnvMalformed(t *testing.T) {
	tests := []struct{ name, value string }{
		{"COLLY_POLITE_RATE", "fast"},
		{"COLLY_POLITE_RATE", "-1"},
		{"COLLY_POLITE_RATE", "NaN"},
		{"COLLY_POLITE_RATE", "inf"},
		{"COLLY_POLITE_RATE", "1e-300"},
		{"COLLY_POLITE_INITIAL_RATE", "2/s"},
		{"COLLY_POLITE_INITIAL_RATE", "-3"},
		{"COLLY_POLITE_MAX_CONCURRENCY", "many"},
		{"COLLY_POLITE_MAX_CONCURRENCY", "2.5"},
		{"COLLY_POLITE_MAX_CONCURRENCY", "1e300"},
		{"COLLY_POLITE_MAX_CONCURRENCY", "-4"},
		{"COLLY_POLITE_MAX_RETRIES", "three"},
		{"COLLY_POLITE_MAX_RETRIES", "1.5"},
		{"COLLY_POLITE_MAX_BACKOFF", "60"},
		{"COLLY_POLITE_MAX_BACKOFF", "-1s"},
		{"COLLY_POLITE_MAX_PAUSE", "2 minutes"},
		{"COLLY_POLITE_MAX_PAUSE", "-5s"},
		{"COLLY_POLITE_ROBOTS", "yes"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			setEnv(t, tt.name+"="+tt.value)
			c, err := newFromEnv()
			require.ErrorIs(t, err, polite.ErrConfig)
			assert.Nil(t, c)
			assert.ErrorContains(t, err, tt.name)

			// the field falls back to its most conservative value: the
			// configuration read is one that works
			cfg, err := fromEnv()
			require.ErrorIs(t, err, polite.ErrConfig)
			tr := polite.NewTransport(nil, cfg)
			assert.NoError(t, tr.Controller().Err())
		})
	}

	t.Run("every malformed variable is named", func(t *testing.T) {
		setEnv(t, "COLLY_POLITE_RATE=x", "COLLY_POLITE_ROBOTS=maybe")
		_, err := newFromEnv()
		require.ErrorIs(t, err, polite.ErrConfig)
		assert.ErrorContains(t, err, `COLLY_POLITE_RATE="x"`)
		assert.ErrorContains(t, err, `COLLY_POLITE_ROBOTS="maybe"`)
	})
}

func TestReadEnvRatesAndConcurrency(t *testing.T) {
	tests := []struct {
		name  string
		env   []string
		opts  []polite.Config // the code's, before the environment
		limit int
		rate  float64
	}{
		{"unset: defaults", nil, nil, 4, 2},
		{"unset: earlier options stand", nil, []polite.Config{{Default: polite.Rule{InitialRate: 5, MaxConcurrency: 3}}}, 3, 5},
		{"empty counts as unset", []string{"COLLY_POLITE_RATE=", "COLLY_POLITE_MAX_CONCURRENCY=  "}, nil, 4, 2},
		{"RATE", []string{"COLLY_POLITE_RATE=1"}, nil, 4, 1},
		{"RATE with spaces", []string{"COLLY_POLITE_RATE= 0.5 "}, nil, 4, 0.5},
		{"RATE over an option", []string{"COLLY_POLITE_RATE=1"}, []polite.Config{{Default: polite.Rule{Rate: 10}}}, 4, 1},
		{"INITIAL_RATE", []string{"COLLY_POLITE_INITIAL_RATE=3"}, nil, 4, 3},
		{"INITIAL_RATE under RATE", []string{"COLLY_POLITE_INITIAL_RATE=3", "COLLY_POLITE_RATE=1.5"}, nil, 4, 1.5},
		{"MAX_CONCURRENCY", []string{"COLLY_POLITE_MAX_CONCURRENCY=2"}, nil, 2, 2},
		{"MAX_CONCURRENCY above the start", []string{"COLLY_POLITE_MAX_CONCURRENCY=100"}, nil, 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env...)
			synctest.Test(t, func(t *testing.T) {
				c, err := newFromEnv(tt.opts...)
				require.NoError(t, err)
				s := cfgFirstSnapshot(t, c, "https://example.com/")
				assert.Equal(t, tt.limit, s.Limit, "limit")
				assert.Equal(t, tt.rate, s.Rate, "rate")
			})
		})
	}

	t.Run("the environment overrides the code", func(t *testing.T) {
		setEnv(t, "COLLY_POLITE_RATE=1")
		synctest.Test(t, func(t *testing.T) {
			c, err := newFromEnv(polite.Config{Default: polite.Rule{Rate: 0.25}})
			require.NoError(t, err)
			assert.Equal(t, 1.0, cfgFirstSnapshot(t, c, "https://example.com/").Rate)
		})
	})
}

// Attempts the transport makes for one GET that is always throttled.
func TestReadEnvMaxRetries(t *testing.T) {
	tests := []struct {
		env      []string
		attempts int
	}{
		{nil, 4}, // 3 retries by default
		{[]string{"COLLY_POLITE_MAX_RETRIES=1"}, 2},
		{[]string{"COLLY_POLITE_MAX_RETRIES=0"}, 4}, // 0 means the default
		{[]string{"COLLY_POLITE_MAX_RETRIES=-1"}, 1},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.env, " "), func(t *testing.T) {
			setEnv(t, tt.env...)
			synctest.Test(t, func(t *testing.T) {
				srv := &cfgServer{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"1"}}}
				tr := envTransport(t, srv)
				require.NoError(t, tr.Controller().Err())
				resp, err := (&http.Client{Transport: tr}).Get("https://example.com/")
				require.NoError(t, err)
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				require.NoError(t, resp.Body.Close())
				assert.Len(t, srv.sent(), tt.attempts)
			})
		})
	}
}

// throttle acquires a slot for example.com and records a 429 with header.
// It returns how long the scope is paused for.
func throttle(t *testing.T, c *polite.Controller, header http.Header) time.Duration {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://example.com/", nil)
	require.NoError(t, err)
	p, err := c.Acquire(context.Background(), req)
	require.NoError(t, err)
	p.Record(&http.Response{StatusCode: http.StatusTooManyRequests, Header: header, Request: req}, nil)
	s, ok := c.Snapshot("example.com")
	require.True(t, ok)
	return s.PausedUntil.Sub(time.Now())
}

func TestReadEnvMaxBackoff(t *testing.T) {
	tests := []struct {
		env  []string
		want []time.Duration // pauses after throttles in a row, no Retry-After
	}{
		{nil, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{[]string{"COLLY_POLITE_MAX_BACKOFF=1500ms"}, []time.Duration{time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.env, " "), func(t *testing.T) {
			setEnv(t, tt.env...)
			synctest.Test(t, func(t *testing.T) {
				c, err := newFromEnv(polite.Config{Jitter: -1})
				require.NoError(t, err)
				var got []time.Duration
				for range tt.want {
					got = append(got, throttle(t, c, http.Header{}))
				}
				assert.Equal(t, tt.want, got)
			})
		})
	}
	t.Run("below Backoff", func(t *testing.T) {
		setEnv(t, "COLLY_POLITE_MAX_BACKOFF=500ms")
		_, err := newFromEnv()
		require.ErrorIs(t, err, polite.ErrConfig)
		assert.ErrorContains(t, err, "MaxBackoff")
	})
}

// A Retry-After of 10 s: waited out under the default MaxPause of 120 s,
// refused at once under COLLY_POLITE_MAX_PAUSE=5s.
func TestReadEnvMaxPause(t *testing.T) {
	tests := []struct {
		env    []string
		paused bool
	}{
		{nil, false},
		{[]string{"COLLY_POLITE_MAX_PAUSE=10s"}, false},
		{[]string{"COLLY_POLITE_MAX_PAUSE=5s"}, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.env, " "), func(t *testing.T) {
			setEnv(t, tt.env...)
			synctest.Test(t, func(t *testing.T) {
				c, err := newFromEnv(polite.Config{Jitter: -1})
				require.NoError(t, err)
				require.Equal(t, 10*time.Second, throttle(t, c, http.Header{"Retry-After": {"10"}}))
				start := time.Now()
				req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
				p, err := c.Acquire(context.Background(), req)
				if tt.paused {
					require.ErrorIs(t, err, polite.ErrPaused)
					assert.Zero(t, time.Since(start))
					return
				}
				require.NoError(t, err)
				p.Drop()
				// waited the pause out (then for a token at the cut rate)
				assert.GreaterOrEqual(t, time.Since(start), 10*time.Second)
			})
		})
	}
}

func TestReadEnvRobots(t *testing.T) {
	tests := []struct {
		name   string
		env    []string
		opts   []polite.Config // before ReadEnv
		robots bool
	}{
		{"unset: off for NewTransport", nil, nil, false},
		{"unset: the Config stands", nil, []polite.Config{{Robots: new(true)}}, true},
		{"true", []string{"COLLY_POLITE_ROBOTS=true"}, nil, true},
		{"1", []string{"COLLY_POLITE_ROBOTS=1"}, nil, true},
		{"false over the Config", []string{"COLLY_POLITE_ROBOTS=false"}, []polite.Config{{Robots: new(true)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env...)
			synctest.Test(t, func(t *testing.T) {
				srv := &cfgServer{status: http.StatusOK}
				tr := envTransport(t, srv, tt.opts...)
				require.NoError(t, tr.Controller().Err())
				resp, err := (&http.Client{Transport: tr}).Get("https://example.com/page")
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				want := []string{"/page"}
				if tt.robots {
					want = []string{"/robots.txt", "/page"}
				}
				assert.Equal(t, want, srv.sent())
			})
		})
	}
}

// A malformed setting keeps every valid one and gets the most conservative
// value of its own field, reported by Err.
func TestMalformedSettingFailsSafe(t *testing.T) {
	first := func(t *testing.T, tr *polite.Transport) polite.Snapshot {
		t.Helper()
		resp, err := (&http.Client{Transport: tr}).Get("http://a.test/")
		require.NoError(t, err)
		_ = resp.Body.Close()
		s, ok := tr.Controller().Snapshot("a.test")
		require.True(t, ok)
		return s
	}
	t.Run("env rate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			setEnv(t, "COLLY_POLITE_RATE=abc", "COLLY_POLITE_MAX_CONCURRENCY=7")
			cfg, err := fromEnv()
			require.ErrorIs(t, err, polite.ErrConfig)
			assert.ErrorContains(t, err, "COLLY_POLITE_RATE")
			tr := polite.NewTransport(page(200, "ok"), cfg)
			s := first(t, tr)
			assert.Equal(t, 0.05, s.Rate, "an unreadable rate ceiling becomes the minimum rate")
		})
	})
	t.Run("env concurrency and retries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			setEnv(t, "COLLY_POLITE_MAX_CONCURRENCY=many", "COLLY_POLITE_MAX_RETRIES=x", "COLLY_POLITE_RATE=3")
			var sends atomic.Int64
			cfg, err := fromEnv()
			require.ErrorIs(t, err, polite.ErrConfig)
			tr := polite.NewTransport(scripted(&sends, 503, 200), cfg)
			resp, err := (&http.Client{Transport: tr}).Get("http://a.test/")
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, 503, resp.StatusCode, "unreadable retries: none")
			assert.Equal(t, int64(1), sends.Load())
			s, _ := tr.Controller().Snapshot("a.test")
			assert.Equal(t, 1, s.Limit, "unreadable concurrency ceiling: 1")
			assert.LessOrEqual(t, s.Rate, 3.0, "the valid rate ceiling is kept")
		})
	})
	t.Run("field", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr := polite.NewTransport(page(200, "ok"), polite.Config{MaxPause: time.Second, Default: polite.Rule{Rate: -5, MaxConcurrency: -2}})
			require.ErrorIs(t, tr.Controller().Err(), polite.ErrConfig)
			s := first(t, tr)
			assert.Equal(t, 0.05, s.Rate)
			assert.Equal(t, 1, s.Limit)
		})
	})
	t.Run("robots", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			setEnv(t, "COLLY_POLITE_ROBOTS=maybe")
			srv := &cfgServer{status: http.StatusOK}
			cfg, err := fromEnv()
			require.ErrorIs(t, err, polite.ErrConfig)
			tr := polite.NewTransport(srv, cfg)
			resp, err := (&http.Client{Transport: tr}).Get("http://a.test/")
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, []string{"/robots.txt", "/"}, srv.sent(), "unreadable robots switch: on")
		})
	})
}

// A Classifier status override that is no class is a configuration error
// for New; NewTransport and Attach go on without it (fail safe), and a
// response of that status is counted by its own class, not a panic.
func TestInvalidClassifierStatus(t *testing.T) {
	cfg := polite.Config{Robots: new(false), Classifier: &classify.Classifier{Statuses: map[int]classify.Class{200: classify.Class(9)}}}
	_, err := polite.New(cfg)
	require.ErrorIs(t, err, polite.ErrConfig)
	tr := polite.NewTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}), cfg)
	require.Error(t, tr.Controller().Err())
	status, err := get(context.Background(), &http.Client{Transport: tr}, "http://a.test/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	snap, ok := tr.Controller().Snapshot("a.test")
	require.True(t, ok)
	assert.Equal(t, uint64(1), snap.Counts[classify.Success])
}
