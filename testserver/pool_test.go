package testserver

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pool alone, driven step by step: each op changes it, and the load
// after the op is checked.
func TestPool(t *testing.T) {
	type op struct {
		do       string // enter, next, leave, cancel
		workers  int    // for enter and next
		ticket   int    // for enter (the ticket it gets, 0: starts) and next, cancel
		others   int    // enter (when it starts) and next: other requests in flight
		freed    bool   // cancel
		inFlight int
		queued   int
	}
	for _, tc := range []struct {
		name       string
		ops        []op
		maxFlight  int
		maxQueued  int
		queueEmpty bool
	}{
		{"starts while workers are free, then queues", []op{
			{do: "enter", workers: 2, inFlight: 1},
			{do: "enter", workers: 2, others: 1, inFlight: 2},
			{do: "enter", workers: 2, ticket: 1, inFlight: 2, queued: 1},
			{do: "enter", workers: 2, ticket: 2, inFlight: 2, queued: 2},
			{do: "next", workers: 2, inFlight: 2, queued: 2}, // no free worker
			{do: "leave", inFlight: 1, queued: 2},
			{do: "next", workers: 2, ticket: 1, others: 1, inFlight: 2, queued: 1},
			{do: "next", workers: 2, inFlight: 2, queued: 1},
		}, 2, 2, false},
		{"FIFO, and no overtaking while someone waits", []op{
			{do: "enter", workers: 1, inFlight: 1},
			{do: "enter", workers: 1, ticket: 1, inFlight: 1, queued: 1},
			{do: "leave", inFlight: 0, queued: 1},
			// A worker is free, but ticket 1 waits for it: a newcomer queues.
			{do: "enter", workers: 1, ticket: 2, inFlight: 0, queued: 2},
			{do: "next", workers: 1, ticket: 1, inFlight: 1, queued: 1},
			{do: "leave", inFlight: 0, queued: 1},
			{do: "next", workers: 1, ticket: 2, inFlight: 1, queued: 0},
		}, 1, 2, true},
		{"a cancelled ticket leaves the queue and frees nothing", []op{
			{do: "enter", workers: 1, inFlight: 1},
			{do: "enter", workers: 1, ticket: 1, inFlight: 1, queued: 1},
			{do: "enter", workers: 1, ticket: 2, inFlight: 1, queued: 2},
			{do: "cancel", ticket: 1, inFlight: 1, queued: 1},
			{do: "cancel", ticket: 1, inFlight: 1, queued: 1}, // twice: no effect
			{do: "leave", inFlight: 0, queued: 1},
			{do: "next", workers: 1, ticket: 2, inFlight: 1, queued: 0},
		}, 1, 2, true},
		{"a ticket cancelled once granted frees its worker", []op{
			{do: "enter", workers: 1, inFlight: 1},
			{do: "enter", workers: 1, ticket: 1, inFlight: 1, queued: 1},
			{do: "leave", inFlight: 0, queued: 1},
			{do: "next", workers: 1, ticket: 1, inFlight: 1},
			{do: "cancel", ticket: 1, freed: true, inFlight: 0},
		}, 1, 1, true},
		{"more workers start several queued requests", []op{
			{do: "enter", workers: 1, inFlight: 1},
			{do: "enter", workers: 1, ticket: 1, inFlight: 1, queued: 1},
			{do: "enter", workers: 1, ticket: 2, inFlight: 1, queued: 2},
			{do: "next", workers: 3, ticket: 1, others: 1, inFlight: 2, queued: 1},
			{do: "next", workers: 3, ticket: 2, others: 2, inFlight: 3, queued: 0},
		}, 3, 2, true},
		{"without workers everything starts", []op{
			{do: "enter", workers: noWorkers, inFlight: 1},
			{do: "enter", workers: noWorkers, others: 1, inFlight: 2},
			{do: "enter", workers: noWorkers, others: 2, inFlight: 3},
		}, 3, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pool
			tickets := map[int]*ticket{}
			for i, o := range tc.ops {
				switch o.do {
				case "enter":
					tk, others := p.enter(o.workers)
					if o.ticket == 0 {
						require.Nil(t, tk, "op %d", i)
						assert.Equal(t, o.others, others, "op %d: others", i)
					} else {
						require.NotNil(t, tk, "op %d", i)
						tickets[o.ticket] = tk
					}
				case "next":
					tk, others := p.next(o.workers)
					if o.ticket == 0 {
						require.Nil(t, tk, "op %d", i)
					} else {
						require.Same(t, tickets[o.ticket], tk, "op %d", i)
						assert.Equal(t, o.others, others, "op %d: others", i)
					}
				case "leave":
					p.leave()
				case "cancel":
					assert.Equal(t, o.freed, p.cancel(tickets[o.ticket]), "op %d: freed", i)
				}
				inFlight, queued := p.load()
				assert.Equal(t, o.inFlight, inFlight, "op %d (%s): in flight", i, o.do)
				assert.Equal(t, o.queued, queued, "op %d (%s): queued", i, o.do)
			}
			maxFlight, maxQueued := p.peaks()
			assert.Equal(t, tc.maxFlight, maxFlight)
			assert.Equal(t, tc.maxQueued, maxQueued)
			if tc.queueEmpty {
				p.next(0)
				assert.Nil(t, p.queue, "cancelled tickets do not linger")
			}
		})
	}
}

// Pauses, alone: open spans of arrival times, merged when they overlap.
func TestPauses(t *testing.T) {
	type probe struct {
		at   time.Duration
		want bool
	}
	for _, tc := range []struct {
		name   string
		spans  [][2]time.Duration // added first, in order
		probes []probe            // in time order
	}{
		{"none", nil, []probe{{0, false}, {time.Hour, false}}},
		{"open at both ends", [][2]time.Duration{{10, 20}},
			[]probe{{5, false}, {10, false}, {11, true}, {19, true}, {20, false}, {21, false}}},
		{"empty span ignored", [][2]time.Duration{{10, 10}, {20, 15}}, []probe{{10, false}, {16, false}}},
		{"overlap extends, keeping the start", [][2]time.Duration{{10, 20}, {15, 30}, {16, 25}},
			[]probe{{10, false}, {12, true}, {25, true}, {29, true}, {30, false}}},
		{"touching spans stay apart", [][2]time.Duration{{10, 20}, {20, 30}},
			[]probe{{19, true}, {20, false}, {21, true}}},
		{"a gap between spans", [][2]time.Duration{{10, 20}, {25, 30}},
			[]probe{{15, true}, {22, false}, {25, false}, {26, true}, {31, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pauses
			for _, s := range tc.spans {
				p.add(s[0], s[1], "")
			}
			for _, pr := range tc.probes {
				assert.Equal(t, pr.want, p.violated(pr.at, "").in, "arrival at %d", pr.at)
			}
		})
	}
}

// A pause knows the clients it was told to: a request of another client
// inside it is not its own client's; an extension tells one more; past
// maxTold clients every request counts as told. late is the arrival's time
// after the pause's start.
func TestPausesTold(t *testing.T) {
	var p pauses
	p.add(10, 20, "a")
	assert.Equal(t, hit{in: true, own: true, late: 1}, p.violated(11, "a"))
	assert.Equal(t, hit{in: true, own: false, late: 2}, p.violated(12, "b"))
	p.add(15, 30, "b") // extends the span, and b is told
	assert.Equal(t, hit{in: true, own: true, late: 6}, p.violated(16, "b"))
	assert.Equal(t, hit{in: true, own: false, late: 7}, p.violated(17, "c"))
	assert.Equal(t, hit{}, p.violated(30, "c"), "at its end")

	p.add(40, 50, "0")
	for i := 1; i < maxTold; i++ {
		p.add(41, 50, strconv.Itoa(i))
	}
	assert.False(t, p.violated(42, "x").own, "%d clients told: x is not one", maxTold)
	p.add(43, 50, "y")
	assert.True(t, p.violated(44, "x").own, "more than %d told: every request counts as told", maxTold)
	assert.Len(t, p.spans[0].by, maxTold, "bounded")
}
