package testserver

import (
	"slices"
	"time"
)

// pauses are the pauses a host announced, as open spans (from, until) of
// arrival times at the host: a request arriving strictly inside one ignored
// an announced Retry-After. The spans are disjoint and sorted; the host
// adds them in order of from and asks about arrivals in time order, so a
// span is dropped as soon as an arrival passes its end. Each span keeps the
// clients it was announced to (Config.ClientHeader's values), so that a
// request of a client that was never told can be told apart.
//
// Its zero value has no pause. It is not safe for concurrent use: the
// host's mutex guards it, and only this file touches its fields.
type pauses struct {
	spans []span
}

type span struct {
	from, until time.Duration
	by          []string // the clients told, at most maxTold
	many        bool     // more clients were told than by holds
}

// maxTold bounds the clients a span keeps. Past it, every request inside
// the span counts as its own client's: the split errs towards the
// stricter count.
const maxTold = 8

// hit is what violated found for an arrival: in a pause or not; own, the
// pause was announced to the arriving request's client (a response to one
// of its own requests), or to more clients than a span keeps; late, how
// long after the pause's start it arrived.
type hit struct {
	in, own bool
	late    time.Duration
}

// add records the pause (from, until) announced to client. from must not
// be below the from of a pause added before. A pause that starts before
// the last one ends extends it, and client is told of it too; an empty
// one is ignored.
func (p *pauses) add(from, until time.Duration, client string) {
	if until <= from {
		return
	}
	if n := len(p.spans); n > 0 && from < p.spans[n-1].until {
		s := &p.spans[n-1]
		s.until = max(s.until, until)
		switch {
		case slices.Contains(s.by, client):
		case len(s.by) < maxTold:
			s.by = append(s.by, client)
		default:
			s.many = true
		}
		return
	}
	p.spans = append(p.spans, span{from: from, until: until, by: []string{client}})
}

// violated reports whether a request of client arriving at a falls inside
// a pause, and whose pause it was. Arrivals must come in time order.
func (p *pauses) violated(a time.Duration, client string) hit {
	for len(p.spans) > 0 && p.spans[0].until <= a {
		p.spans = p.spans[1:]
	}
	if len(p.spans) == 0 {
		p.spans = nil
		return hit{}
	}
	s := &p.spans[0]
	if s.from >= a {
		return hit{}
	}
	return hit{in: true, own: s.many || slices.Contains(s.by, client), late: a - s.from}
}
