package adaptive

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A retry is counted on its scope (the transport calls Permit.retried for
// each attempt after the first).
func TestRetriesCounted(t *testing.T) {
	c, err := New()
	require.NoError(t, err)
	req, _ := http.NewRequest("GET", "http://a.test/", nil)
	p, err := c.Acquire(context.Background(), req)
	require.NoError(t, err)
	p.retried()
	p.retried()
	p.Drop()
	snap, _ := c.Snapshot("a.test")
	assert.Equal(t, uint64(2), snap.Retries)
	Permit{}.retried() // a zero Permit is a no-op, as Record and Drop are
}

// statusSlot and statusKey agree, and codes outside the list share a slot.
func TestStatusSlots(t *testing.T) {
	for i, code := range statusCodes {
		assert.Equal(t, i, statusSlot(code))
		assert.Equal(t, code, statusKey(i))
	}
	assert.Equal(t, statusSlots-1, statusSlot(418))
	assert.Equal(t, StatusOther, statusKey(statusSlot(599)))
}
