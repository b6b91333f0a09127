package polite

import (
	"net/http"
	"testing"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// RFC 6265's path-match: an empty request path is "/", and a prefix
// matches only at a "/" boundary.
func TestPathMatch(t *testing.T) {
	for _, tc := range []struct {
		path, cookie string
		want         bool
	}{
		{"", "/", true}, {"/", "/", true}, {"/a", "/", true}, {"/api/x", "/api", true},
		{"/api", "/api", true}, {"/apiary", "/api", false}, {"/api/", "/api/", true},
		{"/b", "/api", false}, {"/x", "", true},
	} {
		if got := pathMatch(tc.path, tc.cookie); got != tc.want {
			t.Errorf("pathMatch(%q, %q) = %v", tc.path, tc.cookie, got)
		}
	}
}
