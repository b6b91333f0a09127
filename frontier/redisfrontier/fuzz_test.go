package redisfrontier

import (
	"errors"
	"strings"
	"testing"

	"github.com/colly-polite/polite/internal/redistest"
)

// Any reply, of any shape, is read or refused with ErrReply: never a
// panic, never a negative count, never a record where the reply had none.
func FuzzReplies(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Add([]byte{3, 1 << 3, 's', 1 << 3, '2', 1 << 3, '3', 4, 1 << 3, '1', 1 << 3, '0', 1 << 3, '0', 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1 << 4, 'r', 'e', 2})
	// a counts reply of ten parts: a page of one scope, the totals, the
	// leased, no ends, no hold, the scan through, one scope queued, five
	// requests ever added
	f.Add([]byte{3, 11, 's', 11, '2', 11, '3', 4, 11, '1', 11, '0', 11, '0', 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11, '0', 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v := redistest.Values(b)
		for _, reply := range []any{v, b} { // a list, and not one
			if a, err := addedOf(reply, len(v)); err != nil && !errors.Is(err, ErrReply) {
				t.Fatalf("add: %v", err)
			} else if err == nil && len(a) != len(v) {
				t.Fatalf("add: %d of %d", len(a), len(v))
			}
			if l, empty, err := leasedOf(reply, len(v)); err != nil && !errors.Is(err, ErrReply) {
				t.Fatalf("take: %v", err)
			} else if err == nil {
				for i, x := range l {
					if x.Record != nil && v[i] == nil {
						t.Fatalf("take: a record from nil")
					}
					if x.Record != nil && empty[i] {
						t.Fatalf("take: a record from a scope with nothing queued")
					}
				}
			}
			c, next, pending, err := countsOf(reply)
			if err != nil && !errors.Is(err, ErrReply) {
				t.Fatalf("counts: %v", err)
			}
			if err == nil {
				if c.Queued < 0 || c.Leased < 0 || c.Done < 0 || c.Failed < 0 || c.Returned < 0 || c.Held < 0 || c.Added < 0 || pending < 0 {
					t.Fatalf("counts: %+v, %d scopes queued", c, pending)
				}
				if next == "" || strings.Trim(next, "0123456789") != "" {
					t.Fatalf("counts: cursor %q", next)
				}
				for _, e := range c.Ended {
					if len(e) != 16 {
						t.Fatalf("counts: an end of %d bytes", len(e))
					}
				}
				for k, s := range c.Scopes {
					if k == "" || s.Queued <= 0 || s.Ended < 0 {
						t.Fatalf("counts: %q %+v", k, s)
					}
				}
			}
		}
	})
}
