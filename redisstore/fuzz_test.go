package redisstore

import (
	"errors"
	"testing"

	"github.com/colly-polite/polite/internal/redistest"
)

// Any reply, of any shape, is read or refused with ErrReply: never a panic,
// never a negative wait or pause.
func FuzzReply(f *testing.F) {
	f.Add([]byte{1 << 3, 'l', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1 << 3, '1', 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1 << 3, '3', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 0, 255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		res := redistest.Values(b)
		g, err := leaseOf(res)
		if err != nil && !errors.Is(err, ErrReply) {
			t.Fatalf("acquire: %v is not ErrReply", err)
		}
		if err == nil && (g.Delay < 0 || g.Paused < 0 || g.Live < 0 || g.Held < 0) {
			t.Fatalf("acquire: %+v", g)
		}
		st, err := settlementOf(res)
		if err != nil && !errors.Is(err, ErrReply) {
			t.Fatalf("release: %v is not ErrReply", err)
		}
		if err == nil && st.Paused < 0 {
			t.Fatalf("release: %+v", st)
		}
	})
}

// A message from the channel (anyone may publish there) is read or
// ignored: a pause (a positive length, a reason byte, a scope) or a turn
// (a process, a scope).
func FuzzParseNotice(f *testing.F) {
	f.Add("p\n3000000\n1\na.test")
	f.Add("p\n5\n2\na\nb\n")
	f.Add("p\n-1\n1\n")
	f.Add("p\n9223372036854775807\n300\nx")
	f.Add("t\nhost-1-ab\na.test")
	f.Add("t\n\na")
	f.Fuzz(func(t *testing.T, p string) {
		n, ok := parseNotice(p)
		if !ok {
			return
		}
		if (n.Turn == "") == (n.Pause <= 0) {
			t.Fatalf("%q: neither or both a turn and a pause: %+v", p, n)
		}
		if len(n.Scope) >= len(p) {
			t.Fatalf("%q: scope %q", p, n.Scope)
		}
	})
}

func TestParseNotice(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scope string
		turn  string
		ok    bool
	}{
		{"p\n3000000\n1\na.test", "a.test", "", true},
		{"p\n2000\n3\na\nb", "a\nb", "", true}, // a scope may hold newlines: it comes last
		{"p\n2000\n3\n", "", "", true},         // the empty scope is a scope
		{"p\n0\n1\na", "", "", false},
		{"p\n-5\n1\na", "", "", false},
		{"p\n5\n256\na", "", "", false},
		{"p\n5\na", "", "", false},
		{"p\n1e3\n1\na", "", "", false},
		{"p\n9223372036854775807\n1\na", "", "", false}, // over the longest time.Duration
		{"t\nproc-1\na.test", "a.test", "proc-1", true},
		{"t\nproc-1\na\nb", "a\nb", "proc-1", true},
		{"t\n\na", "", "", false}, // a turn for nobody
		{"t\nproc", "", "", false},
		{"x\n1\n1\na", "", "", false},
		{"a.test", "", "", false},
	} {
		n, ok := parseNotice(tc.in)
		if ok != tc.ok || (ok && (n.Scope != tc.scope || n.Turn != tc.turn)) {
			t.Errorf("parseNotice(%q) = %+v, %v; want scope %q turn %q, %v", tc.in, n, ok, tc.scope, tc.turn, tc.ok)
		}
	}
}
