package adaptive

import (
	"context"
	"sync"
	"time"
)

// Store holds the per-scope state that several collectors, in one process
// or many, must share to be polite together: today the pause gate (a
// throttle, an overload, a quota pause or a timed park seen by one
// collector stops them all; a park until Unpark is not shared). Deadlines
// are wall-clock times without jitter, so that processes on different
// machines can compare them (keep their clocks in sync with NTP); each
// collector adds a jitter of its own when it adopts one. A Redis-backed Store is planned; any
// implementation must be safe for concurrent use and must never return a
// deadline earlier than one it was given ("the longest pause wins").
type Store interface {
	// ExtendPause records that scope is paused until until for reason. A
	// later deadline already stored wins. It returns the deadline in force
	// and its reason.
	ExtendPause(ctx context.Context, scope string, until time.Time, reason Reason) (time.Time, Reason, error)
	// Pause returns the scope's deadline in force and its reason; the zero
	// time when there is none.
	Pause(ctx context.Context, scope string) (time.Time, Reason, error)
}

// MemoryStore is a Store for collectors in one process. Its zero value is
// ready to use; it is safe for concurrent use. Expired deadlines are dropped
// as new ones arrive, so it holds at most the scopes paused right now (plus
// those expired since the last sweep).
type MemoryStore struct {
	mu        sync.Mutex
	m         map[string]storedPause
	lastSweep time.Time
}

type storedPause struct {
	until  time.Time
	reason Reason
}

// ExtendPause implements Store.
func (m *MemoryStore) ExtendPause(_ context.Context, scope string, until time.Time, reason Reason) (time.Time, Reason, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]storedPause)
	}
	now := time.Now()
	if now.Sub(m.lastSweep) > time.Minute {
		m.lastSweep = now
		for k, p := range m.m {
			if !now.Before(p.until) {
				delete(m.m, k)
			}
		}
	}
	cur := m.m[scope]
	if until.After(cur.until) {
		cur = storedPause{until: until, reason: reason}
		m.m[scope] = cur
	}
	return cur.until, cur.reason, nil
}

// Pause implements Store.
func (m *MemoryStore) Pause(_ context.Context, scope string) (time.Time, Reason, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.m[scope]
	return p.until, p.reason, nil
}

// storeTimeout bounds one call to the Store. The shared pause is read
// before every send and written after every pause, outside any lock; a slow
// store delays a send by at most this much, and its errors are logged, never
// fatal (the local gate still holds).
const storeTimeout = time.Second
