package httpsig

import (
	"strings"
	"unicode/utf8"
)

// appendQueryParam appends the "@query-param" value named encodedName
// (RFC 9421 §2.2.8): the query is parsed as application/x-www-form-urlencoded
// (WHATWG URL §5.1), and names and values are re-encoded with "percent-encode
// after encoding" using the application/x-www-form-urlencoded percent-encode
// set (WHATWG URL §5.2), so a space becomes %20. A name that is absent or
// occurs more than once is an error.
func appendQueryParam(b []byte, rawQuery, encodedName string) ([]byte, error) {
	var value string
	found := 0
	for rawQuery != "" {
		var seq string
		seq, rawQuery, _ = strings.Cut(rawQuery, "&")
		if seq == "" {
			continue
		}
		n, v, _ := strings.Cut(seq, "=")
		if formEncode(formDecode(n)) != encodedName {
			continue
		}
		found++
		value = v
	}
	switch found {
	case 0:
		return b, newError(ErrComponentsInvalid, "query parameter "+quoteForError(encodedName)+" is absent")
	case 1:
		return append(b, formEncode(formDecode(value))...), nil
	}
	return b, newError(ErrComponentsInvalid, "query parameter "+quoteForError(encodedName)+" occurs more than once")
}

// formDecode replaces '+' with a space, percent-decodes (leaving malformed
// escapes as they are), and decodes UTF-8 replacing invalid sequences with
// U+FFFD (WHATWG URL §5.1 steps 3.4-3.5).
func formDecode(s string) string {
	if !strings.ContainsAny(s, "+%") && utf8.ValidString(s) {
		return s
	}
	raw := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
		}
		raw = append(raw, c)
	}
	return decodeUTF8(raw)
}

// decodeUTF8 implements the WHATWG Encoding "UTF-8 decode without BOM":
// each maximal invalid subsequence becomes one U+FFFD.
func decodeUTF8(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	out := make([]byte, 0, len(p)+8)
	var cp rune
	needed, seen := 0, 0
	lower, upper := byte(0x80), byte(0xBF)
	for i := 0; i < len(p); i++ {
		c := p[i]
		if needed == 0 {
			switch {
			case c <= 0x7F:
				out = append(out, c)
			case 0xC2 <= c && c <= 0xDF:
				needed, cp = 1, rune(c&0x1F)
			case 0xE0 <= c && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				} else if c == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, rune(c&0x0F)
			case 0xF0 <= c && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				} else if c == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, rune(c&0x07)
			default:
				out = utf8.AppendRune(out, utf8.RuneError)
			}
			continue
		}
		if c < lower || c > upper {
			needed, seen, cp = 0, 0, 0
			lower, upper = 0x80, 0xBF
			out = utf8.AppendRune(out, utf8.RuneError)
			i-- // the byte starts over
			continue
		}
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(c&0x3F)
		seen++
		if seen == needed {
			out = utf8.AppendRune(out, cp)
			needed, seen, cp = 0, 0, 0
		}
	}
	if needed != 0 {
		out = utf8.AppendRune(out, utf8.RuneError)
	}
	return string(out)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// formEncode percent-encodes every byte outside ASCII alphanumerics and
// "*-._" with upper-case hex digits.
func formEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !formSafe(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if formSafe(c) {
			out = append(out, c)
			continue
		}
		out = append(out, '%', hex[c>>4], hex[c&15])
	}
	return string(out)
}

func formSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '*' || c == '-' || c == '.' || c == '_'
}
