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
			ms = append(ms, foldASCII([]byte(m)))
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
	if c0 >= utf8.RuneSelf {
		for i := 0; i+n <= len(s); i++ {
			if bytes.EqualFold(s[i:i+n], sub) {
				return true
			}
		}
		return false
	}
	ascii := isASCII(sub)
	// Jump between occurrences of the first byte, in either case, with
	// IndexByte (vectorised), then compare the window. The Kelvin sign and
	// long s, which fold to 'k' and 's' but are longer in UTF-8, are not
	// matched; neither matters for block-page markers.
	lo, up := c0, c0
	if 'A' <= c0 && c0 <= 'Z' {
		lo = c0 + 'a' - 'A'
	} else if 'a' <= c0 && c0 <= 'z' {
		up = c0 - ('a' - 'A')
	}
	next := func(c byte, from int) int {
		if i := bytes.IndexByte(s[from:], c); i >= 0 {
			return from + i
		}
		return len(s)
	}
	nextLo, nextUp := -1, -1 // positions of the next lo and up at or after from
	for from := 0; from+n <= len(s); {
		if nextLo < from {
			nextLo = next(lo, from)
		}
		i := nextLo
		if up != lo {
			if nextUp < from {
				nextUp = next(up, from)
			}
			i = min(i, nextUp)
		}
		if i+n > len(s) {
			return false
		}
		if ascii && equalLowerASCII(s[i+1:i+n], sub[1:]) || !ascii && bytes.EqualFold(s[i:i+n], sub) {
			return true
		}
		from = i + 1
	}
	return false
}

// foldASCII lower-cases the ASCII letters of b in place.
func foldASCII(b []byte) []byte {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// equalLowerASCII reports whether s equals lower, an ASCII string already
// in lower case, ignoring ASCII case. For an ASCII marker this is exactly
// simple case folding on windows of equal length: no multi-byte rune folds
// to a single ASCII byte.
func equalLowerASCII(s, lower []byte) bool {
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
