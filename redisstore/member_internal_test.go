package redisstore

import (
	"strings"
	"testing"
)

// A lease's member names its holder (everything before the last '/'),
// two ids of a process never share one, and the ids the fleet's clients
// make are their own members, at no allocation.
func TestMember(t *testing.T) {
	ids := []string{"p/1", "1", "p/a/b", "a/b", "p/%2F", "%2F", "/", "", "p/", "p", "q/1", "p/%", "p/%25"}
	seen := map[string]string{}
	for _, process := range []string{"p", "a/b", "p/"} {
		for _, id := range ids {
			m := member(process, id)
			if h := m[:strings.LastIndexByte(m, '/')]; h != process {
				t.Errorf("member(%q, %q) = %q: holder %q", process, id, m, h)
			}
			if other, ok := seen[m]; ok {
				t.Errorf("member(%q, %q) = %q, as for %s", process, id, m, other)
			}
			seen[m] = process + " " + id
		}
	}
	if m := member("crawler-1", "crawler-1/42"); m != "crawler-1/42" {
		t.Errorf("a client's id is its own member: %q", m)
	}
	if n := testing.AllocsPerRun(100, func() { _ = member("crawler-1", "crawler-1/42") }); n != 0 {
		t.Errorf("%v allocations for a client's id", n)
	}
}
