package redisstore

import (
	"encoding/binary"
	"errors"
	"testing"
)

// values decodes fuzz bytes into a script reply as go-redis hands it over:
// int64s, strings, nils and nested lists.
func values(b []byte, depth int) ([]any, []byte) {
	var out []any
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		switch tag % 5 {
		case 0:
			var n int64
			if len(b) >= 8 {
				n, b = int64(binary.LittleEndian.Uint64(b)), b[8:]
			}
			out = append(out, n)
		case 1:
			n := min(int(tag>>3), len(b))
			out, b = append(out, string(b[:n])), b[n:]
		case 2:
			out = append(out, nil)
		case 3:
			if depth < 3 {
				var sub []any
				sub, b = values(b, depth+1)
				out = append(out, sub)
			}
		case 4:
			return out, b
		}
	}
	return out, b
}

// Any reply, of any shape, is read or refused with ErrReply: never a panic,
// never a negative wait or pause.
func FuzzReply(f *testing.F) {
	f.Add([]byte{1 << 3, 'l', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1 << 3, '1', 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1 << 3, '3', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 0, 255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		res, _ := values(b, 0)
		g, err := leaseOf(res)
		if err != nil && !errors.Is(err, ErrReply) {
			t.Fatalf("acquire: %v is not ErrReply", err)
		}
		if err == nil && (g.Delay < 0 || g.Paused < 0 || g.Live < 0) {
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

// A pause message from the channel (anyone may publish there) is read or
// ignored: a scope, a positive pause, a reason byte.
func FuzzParsePause(f *testing.F) {
	f.Add("a.test\n3000000\n1")
	f.Add("a\nb\n\n5\n2")
	f.Add("\n-1\n1")
	f.Add("x\n9223372036854775807\n300")
	f.Fuzz(func(t *testing.T, p string) {
		scope, d, _, ok := parsePause(p)
		if !ok {
			return
		}
		if d <= 0 {
			t.Fatalf("%q: pause %v", p, d)
		}
		if len(scope) >= len(p) {
			t.Fatalf("%q: scope %q", p, scope)
		}
	})
}

func TestParsePause(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scope string
		ok    bool
	}{
		{"a.test\n3000000\n1", "a.test", true},
		{"a\nb\n2000\n3", "a\nb", true}, // a scope may hold newlines: the last two fields are the numbers
		{"a\n0\n1", "", false},
		{"a\n-5\n1", "", false},
		{"a\n5\n256", "", false},
		{"a\n5", "", false},
		{"a\n1e3\n1", "", false},
		{"a\n9223372036854775807\n1", "", false}, // over the longest time.Duration
	} {
		scope, _, _, ok := parsePause(tc.in)
		if ok != tc.ok || scope != tc.scope {
			t.Errorf("parsePause(%q) = %q, %v; want %q, %v", tc.in, scope, ok, tc.scope, tc.ok)
		}
	}
}
