package polite

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ReadEnv sets c's fields from environment variables, in Colly's COLLY_*
// manner; only the variables that are set count, and they override what c
// holds (the environment overrides the code, as deployments expect):
//
//	COLLY_POLITE_RATE             the default rule's rate ceiling, requests per second
//	COLLY_POLITE_INITIAL_RATE     the default rule's slow-start rate, requests per second
//	COLLY_POLITE_MAX_CONCURRENCY  the default rule's concurrency ceiling
//	COLLY_POLITE_MAX_RETRIES      retries per request (negative: none)
//	COLLY_POLITE_MAX_BACKOFF      e.g. 60s
//	COLLY_POLITE_MAX_PAUSE        e.g. 120s
//	COLLY_POLITE_ROBOTS           true or false
//
// A malformed value gets the most conservative value of its field (a rate
// the minimum rate, a concurrency 1, retries none, robots on), so that a
// typo never lifts a ceiling; a malformed duration (MAX_BACKOFF,
// MAX_PAUSE) leaves the field as the code set it, since neither bound has
// a safe extreme (the longest would hold a request for a century). The
// error (wrapping ErrConfig) names every variable that was malformed.
//
//	cfg := polite.Config{Default: polite.Rule{Rate: 10}}
//	if err := cfg.ReadEnv(); err != nil {
//		log.Print(err) // the crawl still runs, more conservatively
//	}
func (c *Config) ReadEnv() error { return c.applyEnv(os.Getenv) }

func (c *Config) applyEnv(get func(string) string) error {
	var errs []string
	bad := func(name, v, why string) { errs = append(errs, fmt.Sprintf("%s=%q (%s)", name, v, why)) }
	// a value that cannot be read gets the most conservative value of its
	// field (fallback), so a typo never lifts a ceiling
	rate := func(name string, set func(float64), fallback float64) {
		if v := strings.TrimSpace(get(name)); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			switch {
			case err != nil:
				bad(name, v, "not a number")
				set(fallback)
			case rateProblem(f) != "":
				bad(name, v, rateProblem(f))
				set(fallback)
			default:
				set(f)
			}
		}
	}
	integer := func(name string, neg bool, set func(int), fallback int) {
		if v := strings.TrimSpace(get(name)); v != "" {
			n, err := strconv.Atoi(v)
			switch {
			case err != nil:
				bad(name, v, "not an integer")
				set(fallback)
			case n < 0 && !neg:
				bad(name, v, "negative")
				set(fallback)
			default:
				set(n)
			}
		}
	}
	dur := func(name string, set func(time.Duration)) {
		if v := strings.TrimSpace(get(name)); v != "" {
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				bad(name, v, "not a duration such as 60s")
			case d < 0:
				bad(name, v, "negative")
			default:
				set(d)
			}
		}
	}
	rate("COLLY_POLITE_RATE", func(f float64) { c.Default.Rate = f }, defaultMinRate)
	rate("COLLY_POLITE_INITIAL_RATE", func(f float64) { c.Default.InitialRate = f }, defaultMinRate)
	integer("COLLY_POLITE_MAX_CONCURRENCY", false, func(n int) { c.Default.MaxConcurrency = n }, 1)
	integer("COLLY_POLITE_MAX_RETRIES", true, func(n int) { c.Default.MaxRetries = n }, -1)
	dur("COLLY_POLITE_MAX_BACKOFF", func(d time.Duration) { c.MaxBackoff = d })
	dur("COLLY_POLITE_MAX_PAUSE", func(d time.Duration) { c.MaxPause = d })
	if v := strings.TrimSpace(get("COLLY_POLITE_ROBOTS")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("COLLY_POLITE_ROBOTS", v, "not true or false")
			b = true
		}
		c.Robots = &b
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: malformed environment: %s", ErrConfig, strings.Join(errs, ", "))
	}
	return nil
}
