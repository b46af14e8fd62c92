package proxy

import "strings"

// Bounds of RouteTemplate.
const (
	maxRouteSegments = 16
	maxWordSegment   = 40
	maxWordPart      = 20
	maxWordParts     = 6
	maxConsonantRun  = 4
)

// idPlaceholder replaces every segment RouteTemplate does not keep.
const idPlaceholder = "{id}"

// RouteTemplate is the route an activity record keeps of an escaped path
// after the connection. A segment is kept only when it clearly names a
// resource rather than carrying a value: a version (v2, v1.1) or a word
// (wordSegment). Every other segment (a number, an id, a token, a key,
// an address, anything escaped) becomes "{id}"; past 16 segments the
// rest is "/…". The query is never part of it.
func RouteTemplate(rest string) string {
	if rest == "" || rest == "/" {
		return "/"
	}
	var b strings.Builder
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	for i, seg := range segs {
		if i == maxRouteSegments {
			b.WriteString("/…")
			break
		}
		b.WriteByte('/')
		switch {
		case seg == "":
		case versionSegment(seg) || wordSegment(seg):
			b.WriteString(seg)
		default:
			b.WriteString(idPlaceholder)
		}
	}
	return b.String()
}

// wordSegment: at most maxWordSegment bytes of words joined by '-', '_'
// or '.', each word lowercase letters, capitalized or in camelCase
// ("repos", "chat.postMessage", "Microsoft.Compute"). A secret rarely
// reads so: mixed-case tokens have capitals followed by fewer than two
// lowercase letters, random lowercase runs have long consonant runs, a
// hash spelled with a to f only is refused outright, and so is a segment
// led by a known key prefix (sk-live-…).
func wordSegment(s string) bool {
	if len(s) > maxWordSegment || !isLetter(s[0]) || hexLetters(s) || keyPrefixed(s) {
		return false
	}
	parts := 0
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		for _, p := range camelParts(w) {
			if parts++; parts > maxWordParts || !wordPart(p) {
				return false
			}
		}
	}
	return parts > 0
}

// camelParts splits "postMessage" into "post" and "Message". An empty
// part (two capitals in a row, or none at all) is returned as "" so
// wordPart refuses it.
func camelParts(w string) []string {
	var out []string
	start := 0
	for i := 1; i < len(w); i++ {
		if isUpper(w[i]) {
			out = append(out, w[start:i])
			start = i
		}
	}
	return append(out, w[start:])
}

// wordPart: an optional capital, then at least two lowercase letters
// (one or more for a part in lowercase only), at most maxWordPart, with
// a vowel and no more than maxConsonantRun consonants in a row.
func wordPart(p string) bool {
	if p == "" || len(p) > maxWordPart {
		return false
	}
	lower := p
	if isUpper(p[0]) {
		lower = p[1:]
		if len(lower) < 2 {
			return false
		}
	}
	vowel, run := false, 0
	for i := 0; i < len(lower); i++ {
		c := lower[i]
		if c < 'a' || c > 'z' {
			return false
		}
		if strings.IndexByte("aeiouy", c) >= 0 {
			vowel, run = true, 0
		} else if run++; run > maxConsonantRun {
			return false
		}
	}
	// Short parts ("v", "id", "by") need no vowel.
	return vowel || len(p) <= 3
}

// keyPrefixes lead well-known secrets: API keys (sk-live-…, rk_test_…),
// Slack, GitHub, GitLab and webhook tokens.
var keyPrefixes = []string{"sk", "pk", "rk", "xoxa", "xoxb", "xoxp", "xoxr", "xoxs", "ghp", "gho", "ghs", "ghu", "ghr",
	"glpat", "whsec"}

// keyPrefixed: s starts with a key prefix followed by '-' or '_', in any
// case ("Sk-live-…").
func keyPrefixed(s string) bool {
	for _, p := range keyPrefixes {
		if len(s) > len(p)+1 && strings.EqualFold(s[:len(p)], p) && (s[len(p)] == '-' || s[len(p)] == '_') {
			return true
		}
	}
	return false
}

// hexLetters: s has eight or more letters and every one is a to f, as a
// hash or an id spelled with letters only is.
func hexLetters(s string) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if isLetter(s[i]) {
			if c > 'f' {
				return false
			}
			n++
		}
	}
	return n >= 8
}

// versionSegment: v or V, one to three digits, optionally a dot and one
// to three more.
func versionSegment(s string) bool {
	if len(s) < 2 || len(s) > 8 || (s[0] != 'v' && s[0] != 'V') {
		return false
	}
	major, minor, dotted := strings.Cut(s[1:], ".")
	return digits(major, 3) && (!dotted || digits(minor, 3))
}

func digits(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || isUpper(c) }

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
