package polite

// The line of callers waiting on one scope. Waiting is FIFO and
// single-file: only the head waits for the scope (a pause, a free slot, the
// pacer), so a rate cut or a pause reaches the very next send; the others
// wait for the head to go. Every waiter has a channel of capacity one: a
// nudge to look again, which never blocks the sender.

type waiter struct {
	ch chan struct{}
}

func newWaiter() *waiter { return &waiter{ch: make(chan struct{}, 1)} }

func (w *waiter) nudge() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// queue is the FIFO of a scope's waiters. Not safe for concurrent use:
// scope.mu guards it.
type queue []*waiter

// head is the waiter at the front, or nil.
func (l queue) head() *waiter {
	if len(l) == 0 {
		return nil
	}
	return l[0]
}

// nudgeHead wakes the head to look again (something changed).
func (l queue) nudgeHead() {
	if len(l) > 0 {
		l[0].nudge()
	}
}

// pop removes the head, which is leaving with a send, and passes the head
// role on.
func (l *queue) pop() {
	*l = (*l)[1:]
	if len(*l) == 0 {
		*l = nil // let the backing array go with the crowd
	}
	l.nudgeHead()
}

// remove takes w out of the line (it gave up), passing the head role on if
// it had it.
func (l *queue) remove(w *waiter) {
	for i, q := range *l {
		if q == w {
			*l = append((*l)[:i], (*l)[i+1:]...)
			if len(*l) == 0 {
				*l = nil
			}
			if i == 0 {
				l.nudgeHead()
			}
			return
		}
	}
}
