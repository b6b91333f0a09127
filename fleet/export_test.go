package fleet

import "time"

// Rewind sets m's clock d back: the times m stored are then in its
// future.
func Rewind(m *MemoryStore, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.now
	m.now = func() time.Time {
		if prev != nil {
			return prev().Add(-d)
		}
		return time.Now().Add(-d)
	}
}
