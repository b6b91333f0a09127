package classify

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// CloudflareChallenge reports a Cloudflare challenge page: Cloudflare sets
// "cf-mitigated: challenge" on every challenge response (managed, JS or
// interactive), whatever the status code. It reads only the header.
func CloudflareChallenge(o Outcome) bool {
	for _, v := range o.Header["Cf-Mitigated"] {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(trimOWS(tok), "challenge") {
				return true
			}
		}
	}
	return false
}

// BodyMarkers returns a detector that reports whether the outcome's Body
// contains any of markers, compared case-insensitively (Unicode simple
// folding between runs of equal byte length, which covers ASCII and most
// scripts). Empty markers are ignored; with none the detector always
// reports false, as it does when Body is nil.
//
// Choose markers that appear only on block pages ("Access Denied | ",
// "px-captcha", "/cdn-cgi/challenge-platform/"): a marker that an ordinary
// article could contain makes that article a block.
func BodyMarkers(markers ...string) Detector {
	ms := make([][]byte, 0, len(markers))
	for _, m := range markers {
		if m != "" {
			ms = append(ms, []byte(m))
		}
	}
	if len(ms) == 0 {
		return func(Outcome) bool { return false }
	}
	return func(o Outcome) bool {
		if len(o.Body) == 0 {
			return false
		}
		for _, m := range ms {
			if containsFold(o.Body, m) {
				return true
			}
		}
		return false
	}
}

// containsFold reports whether s contains sub under simple case folding.
// It allocates nothing.
func containsFold(s, sub []byte) bool {
	n := len(sub)
	if n > len(s) {
		return false
	}
	c0 := sub[0]
	if c0 < utf8.RuneSelf {
		// Scan for the first byte in either case, then compare the rest.
		lo, up := c0, c0
		if 'A' <= c0 && c0 <= 'Z' {
			lo = c0 + 'a' - 'A'
		} else if 'a' <= c0 && c0 <= 'z' {
			up = c0 - ('a' - 'A')
		}
		// 'k' and 's' fold with the non-ASCII Kelvin sign and long s; the
		// byte scan misses those rare spellings, which is acceptable for
		// marker search.
		for i := 0; i+n <= len(s); i++ {
			if b := s[i]; b != lo && b != up {
				continue
			}
			if bytes.EqualFold(s[i:i+n], sub) {
				return true
			}
		}
		return false
	}
	for i := 0; i+n <= len(s); i++ {
		if bytes.EqualFold(s[i:i+n], sub) {
			return true
		}
	}
	return false
}
