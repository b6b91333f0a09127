package testserver

import "time"

// pauses are the pauses a host announced, as open spans (from, until) of
// arrival times at the host: a request arriving strictly inside one ignored
// an announced Retry-After. The spans are disjoint and sorted; the host
// adds them in order of from and asks about arrivals in time order, so a
// span is dropped as soon as an arrival passes its end.
//
// Its zero value has no pause. It is not safe for concurrent use: the
// host's mutex guards it, and only this file touches its fields.
type pauses struct {
	spans []span
}

type span struct{ from, until time.Duration }

// add records the pause (from, until). from must not be below the from of
// a pause added before. A pause that starts before the last one ends
// extends it; an empty one is ignored.
func (p *pauses) add(from, until time.Duration) {
	if until <= from {
		return
	}
	if n := len(p.spans); n > 0 && from < p.spans[n-1].until {
		p.spans[n-1].until = max(p.spans[n-1].until, until)
		return
	}
	p.spans = append(p.spans, span{from, until})
}

// violated reports whether a request arriving at a falls inside a pause.
// Arrivals must come in time order.
func (p *pauses) violated(a time.Duration) bool {
	for len(p.spans) > 0 && p.spans[0].until <= a {
		p.spans = p.spans[1:]
	}
	if len(p.spans) == 0 {
		p.spans = nil
		return false
	}
	return p.spans[0].from < a
}
