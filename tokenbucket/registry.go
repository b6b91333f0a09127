package tokenbucket

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrInvalidConfig is wrapped by the error New returns for a Config it
// cannot use.
var ErrInvalidConfig = errors.New("tokenbucket: invalid config")

// DefaultIdleTTL is the IdleTTL of a Config that leaves it zero.
const DefaultIdleTTL = 10 * time.Minute

// sweepBatch is how many due keys a new key examines. Above 1, so that
// eviction outpaces insertion; see the package documentation for the bound
// it gives.
const sweepBatch = 4

// Config configures a Registry. The zero value of every field but Rate
// means the stated default.
type Config struct {
	// Rate is the rate of every new key, in tokens per second. It has no
	// default: it must be above 0, or rate.Inf for buckets that only
	// enforce drains and the rates given by SetRateAt.
	Rate rate.Limit

	// Burst is the bucket size of every new key. Zero means 1.
	Burst int

	// IdleTTL is how long a key must go untouched before it may be evicted.
	// A key is evicted only when, besides, its bucket is full, it is not
	// drained and nobody waits on it, so that the fresh bucket a later
	// access creates behaves the same, except that a rate set by SetRateAt
	// reverts to Rate. Zero means DefaultIdleTTL (10 minutes).
	IdleTTL time.Duration

	// MaxKeys, if above zero, is a hard bound on the number of keys. A new
	// key beyond it evicts the least recently placed key, preferring one
	// that is neither drained nor waited on, even if it is not idle:
	// that key forgets its drain and its rate. Size MaxKeys well above the
	// number of scopes in use at once. Zero means no bound by count; the
	// IdleTTL still bounds memory.
	MaxKeys int
}

// A Registry holds one Bucket per key (a scope: host, proxy, API key),
// created on first use with the Config's rate and burst, and evicts keys that
// go idle. Eviction is amortised over the creation of new keys, with no
// background goroutine, so a Registry needs no Close; EvictAt sweeps all keys
// at once.
//
// Every method taking a key and now touches that key (resets its idle
// clock), and so do the methods of a Bucket from Get.
//
// The zero value is not usable; use New. A Registry is safe for concurrent
// use.
type Registry struct {
	rate    rate.Limit
	burst   int
	ttl     int64 // nanoseconds
	maxKeys int

	mu   sync.RWMutex
	keys map[string]*Bucket
	// Buckets in the order they took their place, oldest first, each with
	// its placed time: the sweep order. A Bucket found idle-looking but in
	// use is re-placed at the back, so placed times stay sorted and a sweep
	// can stop at the first Bucket placed within the IdleTTL.
	head, tail *Bucket
	peak       int // the largest len(keys) since keys was last rebuilt

	// epoch is the first time the Registry saw; idle times are kept as
	// nanoseconds since it. Written once, under mu, before the first
	// Bucket exists, and only read after.
	epoch    time.Time
	hasEpoch bool
}

// New returns an empty Registry. It reports an error wrapping
// ErrInvalidConfig for a Rate that is zero, negative or NaN, or a negative
// Burst, IdleTTL or MaxKeys.
func New(cfg Config) (*Registry, error) {
	switch {
	case math.IsNaN(float64(cfg.Rate)) || cfg.Rate < 0:
		return nil, fmt.Errorf("%w: Rate %v is negative or NaN", ErrInvalidConfig, float64(cfg.Rate))
	case cfg.Rate == 0:
		return nil, fmt.Errorf("%w: Rate is 0; give a rate above 0, or rate.Inf for no limit", ErrInvalidConfig)
	case cfg.Burst < 0:
		return nil, fmt.Errorf("%w: Burst %d is negative", ErrInvalidConfig, cfg.Burst)
	case cfg.IdleTTL < 0:
		return nil, fmt.Errorf("%w: IdleTTL %v is negative", ErrInvalidConfig, cfg.IdleTTL)
	case cfg.MaxKeys < 0:
		return nil, fmt.Errorf("%w: MaxKeys %d is negative", ErrInvalidConfig, cfg.MaxKeys)
	}
	r := &Registry{
		rate:    min(cfg.Rate, rate.Inf),
		burst:   cfg.Burst,
		ttl:     int64(cfg.IdleTTL),
		maxKeys: cfg.MaxKeys,
		keys:    make(map[string]*Bucket),
	}
	if r.burst == 0 {
		r.burst = 1
	}
	if r.ttl == 0 {
		r.ttl = int64(DefaultIdleTTL)
	}
	return r, nil
}

// since converts now to nanoseconds since the epoch, saturating.
func (r *Registry) since(now time.Time) int64 { return int64(now.Sub(r.epoch)) }

// Get is shorthand for GetAt(key, time.Now()).
func (r *Registry) Get(key string) *Bucket { return r.GetAt(key, time.Now()) }

// GetAt returns the Bucket of key, creating it if need be, and touches it.
//
// The Bucket stays the key's Bucket until it is evicted, which happens only
// once nobody has touched it for IdleTTL (or under MaxKeys pressure). A
// caller keeping it longer keeps a working Bucket that the Registry no longer
// knows, while the key gets a fresh one: look the key up again rather than
// holding on to a Bucket through long idle periods.
func (r *Registry) GetAt(key string, now time.Time) *Bucket {
	b := r.lock(key, now)
	b.touchLocked(now)
	b.mu.Unlock()
	return b
}

// Allow is shorthand for AllowAt(key, time.Now()).
func (r *Registry) Allow(key string) bool { return r.AllowAt(key, time.Now()) }

// AllowAt reports whether an event for key may happen at now, and if so
// takes its token; see Bucket.AllowAt.
func (r *Registry) AllowAt(key string, now time.Time) bool {
	b := r.lock(key, now)
	ok := b.allowLocked(now)
	b.mu.Unlock()
	return ok
}

// Reserve is shorthand for ReserveAt(key, time.Now()).
func (r *Registry) Reserve(key string) Reservation { return r.ReserveAt(key, time.Now()) }

// ReserveAt takes one token of key for the earliest time it can be had; see
// Bucket.ReserveAt.
func (r *Registry) ReserveAt(key string, now time.Time) Reservation {
	b := r.lock(key, now)
	res := b.reserveAtLocked(now)
	b.mu.Unlock()
	return res
}

// Wait blocks until key grants a token; see Bucket.Wait.
func (r *Registry) Wait(ctx context.Context, key string) error {
	for {
		now := time.Now()
		if err := r.bucket(key, now).wait(ctx, now, true); err != errEvicted {
			return err
		}
	}
}

// SetRate is shorthand for SetRateAt(key, time.Now(), lim, burst).
func (r *Registry) SetRate(key string, lim rate.Limit, burst int) {
	r.SetRateAt(key, time.Now(), lim, burst)
}

// SetRateAt changes the rate and bucket size of key; see Bucket.SetRateAt.
// The change lasts until the key is evicted.
func (r *Registry) SetRateAt(key string, now time.Time, lim rate.Limit, burst int) {
	lim, burst = sanitize(lim, burst)
	b := r.lock(key, now)
	b.setRateLocked(now, lim, burst)
	b.mu.Unlock()
}

// Drain is shorthand for DrainAt(key, time.Now(), until).
func (r *Registry) Drain(key string, until time.Time) { r.DrainAt(key, time.Now(), until) }

// DrainAt empties the bucket of key and blocks it until until; see
// Bucket.DrainAt. A drained key is not evicted before until.
func (r *Registry) DrainAt(key string, now, until time.Time) {
	until = now.Add(until.Sub(now))
	b := r.lock(key, now)
	b.drainLocked(now, until)
	b.mu.Unlock()
}

// Resume is shorthand for ResumeAt(key, time.Now()).
func (r *Registry) Resume(key string) { r.ResumeAt(key, time.Now()) }

// ResumeAt ends the drain of key early; see Bucket.ResumeAt.
func (r *Registry) ResumeAt(key string, now time.Time) {
	b := r.lock(key, now)
	b.resumeLocked(now)
	b.mu.Unlock()
}

// Len returns the number of keys held.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.keys)
}

// Evict is shorthand for EvictAt(time.Now()).
func (r *Registry) Evict() int { return r.EvictAt(time.Now()) }

// EvictAt evicts every key that is idle at now (untouched for IdleTTL, full,
// not drained and not waited on) and returns how many it evicted. It is
// never needed for the memory bound, which eviction on access keeps; it
// frees memory at once, after a crawl, say.
func (r *Registry) EvictAt(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.hasEpoch {
		return 0
	}
	t := r.since(now)
	evicted := 0
	b := r.head
	r.head, r.tail = nil, nil
	for b != nil {
		next := b.next
		b.next = nil
		if b.evictIfIdle(now, t, r.ttl) {
			delete(r.keys, b.key)
			evicted++
		} else {
			r.pushBack(b) // keeps the placed order
		}
		b = next
	}
	r.shrinkLocked()
	return evicted
}

// lock returns the live Bucket of key with its mu held.
func (r *Registry) lock(key string, now time.Time) *Bucket {
	for {
		b := r.bucket(key, now)
		b.mu.Lock()
		if !b.dead {
			return b
		}
		b.mu.Unlock()
	}
}

// bucket returns the Bucket of key, creating it if need be. The Bucket may
// be evicted by the time the caller locks it.
func (r *Registry) bucket(key string, now time.Time) *Bucket {
	r.mu.RLock()
	b := r.keys[key]
	r.mu.RUnlock()
	if b != nil {
		return b
	}
	return r.insert(key, now)
}

func (r *Registry) insert(key string, now time.Time) *Bucket {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.keys[key]; b != nil {
		return b
	}
	if !r.hasEpoch {
		r.epoch, r.hasEpoch = now, true
	}
	t := r.since(now)
	r.sweepLocked(now, t)
	if r.maxKeys > 0 {
		for len(r.keys) >= r.maxKeys {
			r.evictForRoomLocked(now, t)
		}
	}
	// Clone: a key sliced from a large buffer (a URL, a response) must not
	// keep the buffer alive.
	b := &Bucket{reg: r, key: strings.Clone(key), touched: t, placed: t}
	b.fill(r.rate, r.burst)
	r.keys[b.key] = b
	r.pushBack(b)
	r.shrinkLocked()
	return b
}

// sweepLocked examines, oldest first, up to sweepBatch keys placed at least
// IdleTTL ago: it evicts the idle ones and re-places the others (touched
// since, drained, waited on or still refilling) at the back.
func (r *Registry) sweepLocked(now time.Time, t int64) {
	for range sweepBatch {
		b := r.head
		if b == nil || t-b.placed < r.ttl {
			return // every later key was placed later
		}
		r.popFront()
		if b.evictIfIdle(now, t, r.ttl) {
			delete(r.keys, b.key)
			continue
		}
		b.placed = t
		r.pushBack(b)
	}
}

// evictForRoomLocked evicts one key to make room under MaxKeys: the oldest
// placed among the first few that is neither drained nor waited on, or else
// the oldest placed.
func (r *Registry) evictForRoomLocked(now time.Time, t int64) {
	for range sweepBatch {
		b := r.popFront()
		if b.evictIfQuiet(now) {
			delete(r.keys, b.key)
			return
		}
		b.placed = t
		r.pushBack(b)
	}
	b := r.popFront()
	b.mu.Lock()
	b.dead = true
	b.mu.Unlock()
	delete(r.keys, b.key)
}

// evictIfIdle marks b evicted if it is idle at now (t in Registry time).
func (b *Bucket) evictIfIdle(now time.Time, t, ttl int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t-b.touched < ttl || b.q != nil || now.Before(b.until) || !b.fullLocked(now) {
		return false
	}
	b.dead = true
	return true
}

// evictIfQuiet marks b evicted if nothing would be lost but its tokens and
// rate: it is neither drained nor waited on.
func (b *Bucket) evictIfQuiet(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.q != nil || now.Before(b.until) {
		return false
	}
	b.dead = true
	return true
}

func (r *Registry) pushBack(b *Bucket) {
	if r.tail == nil {
		r.head = b
	} else {
		r.tail.next = b
	}
	r.tail = b
}

func (r *Registry) popFront() *Bucket {
	b := r.head
	r.head = b.next
	if r.head == nil {
		r.tail = nil
	}
	b.next = nil
	return b
}

// shrinkLocked rebuilds the map once it holds a quarter of its peak: Go maps
// do not give memory back on delete, so a past burst of keys would otherwise
// stay allocated.
func (r *Registry) shrinkLocked() {
	n := len(r.keys)
	if n > r.peak {
		r.peak = n
		return
	}
	if r.peak < 1024 || n > r.peak/4 {
		return
	}
	m := make(map[string]*Bucket, n)
	for k, b := range r.keys {
		m[k] = b
	}
	r.keys, r.peak = m, n
}
