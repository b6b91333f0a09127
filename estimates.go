package polite

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/colly-polite/polite/internal/law"
)

// estimateHalfLife is how fast a remembered estimate loses trust: a scope
// created again starts at the estimate halved for each hour since it was
// measured (TCP keeps its metrics cache in the same spirit), and probes up
// from there.
const estimateHalfLife = time.Hour

func decayed(est float64, age time.Duration) float64 {
	if age <= 0 {
		return est
	}
	return est * math.Exp2(-age.Hours()/estimateHalfLife.Hours())
}

// estimatesFile is the JSON of ExportEstimates.
type estimatesFile struct {
	Version int                      `json:"version"`
	Scopes  map[string]scopeEstimate `json:"scopes"`
}

type scopeEstimate struct {
	Rate     float64   `json:"rate"`  // capacity estimate, req/s
	Limit    float64   `json:"limit"` // concurrency limit
	Measured time.Time `json:"measured"`
}

// maxImport bounds what ImportEstimates reads: a file is untrusted input.
const maxImport = 8 << 20

// ExportEstimates returns what the controller has learned of each scope's
// capacity, live scopes and remembered ones, as a small JSON document, so
// that a crawl started later can start warm (ImportEstimates): no slow
// start, the estimate trusted less the older it is. Safe for concurrent
// use.
func (c *Controller) ExportEstimates() ([]byte, error) {
	f := estimatesFile{Version: 1, Scopes: map[string]scopeEstimate{}}
	c.known.estimates(func(scope string, est, limit float64, at time.Duration) {
		f.Scopes[scope] = scopeEstimate{Rate: est, Limit: limit, Measured: c.at(at).UTC()}
	})
	now := c.now()
	c.mu.RLock()
	for k, s := range c.scopes {
		s.mu.Lock()
		if est, limit := s.core.estimate(); est > 0 {
			f.Scopes[k] = scopeEstimate{Rate: est, Limit: limit, Measured: c.at(now).UTC()}
		}
		s.mu.Unlock()
	}
	c.mu.RUnlock()
	return json.MarshalIndent(f, "", " ")
}

// clockSkew is how far ahead of this clock an imported measurement may be
// (the file may come from another machine) and still count, as of now.
const clockSkew = time.Minute

// ImportEstimates takes what ExportEstimates wrote (by this process or
// another): scopes created from now on start at the estimate, halved for
// each hour since it was measured, instead of slow-starting. Live scopes
// keep what they measured. A file is untrusted: an entry whose rate is not
// finite and positive, whose limit is negative or not finite, or whose
// measurement is dated more than a minute ahead of this clock is refused
// with an error, and nothing is imported then; a rate above
// law.MaxRate (1,000 req/s) is taken as that, and a scope starts under
// every ceiling in force for it and with a concurrency limit of at most
// its rule's MaxConcurrency.
func (c *Controller) ImportEstimates(data []byte) error {
	if len(data) > maxImport {
		return fmt.Errorf("%w: estimates: %d bytes, more than %d", ErrConfig, len(data), maxImport)
	}
	var f estimatesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%w: estimates: %v", ErrConfig, err)
	}
	if f.Version != 1 {
		return fmt.Errorf("%w: estimates: version %d, want 1", ErrConfig, f.Version)
	}
	latest := time.Now().Add(clockSkew)
	for k, e := range f.Scopes {
		if k == "" || !(e.Rate > 0) || math.IsInf(e.Rate, 0) || e.Limit < 0 || math.IsNaN(e.Limit) || math.IsInf(e.Limit, 0) || e.Measured.IsZero() {
			return fmt.Errorf("%w: estimates: scope %q: rate %v, limit %v, measured %v", ErrConfig, k, e.Rate, e.Limit, e.Measured)
		}
		if e.Measured.After(latest) {
			return fmt.Errorf("%w: estimates: scope %q: measured %v, in the future", ErrConfig, k, e.Measured)
		}
	}
	now := c.now()
	for k, e := range f.Scopes {
		// the age on the wall clock, which saturates: an ancient date
		// (year 1000) read on the controller's clock overflowed to a
		// negative age, and the estimate was taken as new
		age := max(time.Since(e.Measured), 0)
		if age > 64*estimateHalfLife {
			continue // decayed to nothing: no estimate, slow start
		}
		c.known.keepEstimate(k, math.Min(e.Rate, law.MaxRate), e.Limit, now-age)
	}
	return nil
}
