package polite

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The queue is FIFO and single-file: only the head is nudged; when the head
// leaves (with a send, or giving up) the next one becomes head and is
// nudged; a waiter further back that gives up moves nobody. A nudge never
// blocks and is kept once until taken.
func TestQueueFIFO(t *testing.T) {
	nudged := func(w *waiter) bool {
		select {
		case <-w.ch:
			return true
		default:
			return false
		}
	}
	a, b, c := newWaiter(), newWaiter(), newWaiter()
	var q queue
	assert.Nil(t, q.head())
	q.nudgeHead() // an empty queue: nothing to nudge
	q = append(q, a, b, c)
	assert.Same(t, a, q.head())
	q.nudgeHead()
	q.nudgeHead() // twice: never blocks, kept once
	assert.True(t, nudged(a))
	assert.False(t, nudged(a), "one nudge kept")
	assert.False(t, nudged(b), "only the head")

	q.remove(b) // from the middle: the head stays, nobody is nudged
	assert.Same(t, a, q.head())
	assert.False(t, nudged(a))
	assert.False(t, nudged(c))

	q.pop() // the head leaves with a send: c is head, and told
	assert.Same(t, c, q.head())
	assert.True(t, nudged(c))

	q.remove(c) // the head gives up: the queue is empty, and lets its array go
	assert.Nil(t, q.head())
	assert.Nil(t, q)
}
