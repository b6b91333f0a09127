package redisstore

import (
	"strings"
	"testing"
)

func TestTag(t *testing.T) {
	for _, tc := range []struct{ scope, readable string }{
		{"a.example.com", "a.example.com"},
		{"A.Example.COM:8080", "a.example.com-80"},
		{"[::1]:8080", "---1--8080"},
		{"{x}", "-x-"},
		{"", ""},
		{strings.Repeat("y", 100_000), strings.Repeat("y", 16)},
	} {
		got := tag(tc.scope)
		if !strings.HasPrefix(got, tc.readable+":") || len(got) != len(tc.readable)+1+22 {
			t.Errorf("tag(%.20q) = %q, want %q, a colon and 22 bytes", tc.scope, got, tc.readable)
		}
	}
	if tag("a.test") == tag("A.TEST") {
		t.Error("scopes that read alike share a tag: the hash must tell them apart")
	}
}

// Any scope gives a tag that fits, never empty, with no brace (which
// would cut Cluster's hash tag short) and the same each time.
func FuzzTag(f *testing.F) {
	f.Add("a.test")
	f.Add("{}")
	f.Add("")
	f.Fuzz(func(t *testing.T, scope string) {
		got := tag(scope)
		if len(got) < 23 || len(got) > 39 || strings.ContainsAny(got, "{}") || got != tag(scope) {
			t.Fatalf("tag(%q) = %q", scope, got)
		}
		i := strings.LastIndexByte(got, ':')
		if i < 0 || i > 16 || strings.Trim(got[:i], "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
			t.Fatalf("tag(%q) = %q: its readable part", scope, got)
		}
	})
}
