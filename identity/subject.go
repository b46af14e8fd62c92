package identity

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// displayStringPrefix opens an RFC 9651 Display String (§3.3.8).
const displayStringPrefix = `%"`

// EncodeSubject returns the idn-subject header value that carries subject.
// A subject of printable ASCII travels as itself; any other, and one that
// begins with `%"`, travels as an RFC 9651 Display String: `%"…"` with
// '%', '"' and every byte outside printable ASCII percent-encoded in lower
// hex. Header values are bytes that clients send as Latin-1 or refuse, so
// UTF-8 cannot travel raw.
func EncodeSubject(subject string) string {
	if !needsDisplayString(subject) {
		return subject
	}
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(subject) + 3)
	b.WriteString(displayStringPrefix)
	for i := 0; i < len(subject); i++ {
		c := subject[i]
		if c == '%' || c == '"' || c < 0x20 || c > 0x7e {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

func needsDisplayString(s string) bool {
	if strings.HasPrefix(s, displayStringPrefix) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return false
}

// errDisplayString is the reason a `%"…"` value is refused; the verifier
// wraps it in httpsig.ErrIdentityInvalid.
var errDisplayString = errors.New("identity: idn-subject is not a valid RFC 9651 display string")

// DecodeSubject returns the subject an idn-subject header value carries: a
// value that begins with `%"` is parsed strictly as an RFC 9651 Display
// String (lower-case hex escapes, valid UTF-8); any other value is the
// subject itself, so raw UTF-8 from earlier signers still reads. It does
// not apply the subject rules; the Verifier does, on the decoded subject.
func DecodeSubject(value string) (string, error) {
	if !strings.HasPrefix(value, displayStringPrefix) {
		return value, nil
	}
	if len(value) < len(displayStringPrefix)+1 || value[len(value)-1] != '"' {
		return "", errDisplayString
	}
	inner := value[len(displayStringPrefix) : len(value)-1]
	out := make([]byte, 0, len(inner))
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '%':
			if i+2 >= len(inner) {
				return "", errDisplayString
			}
			hi, ok1 := lowerHex(inner[i+1])
			lo, ok2 := lowerHex(inner[i+2])
			if !ok1 || !ok2 {
				return "", errDisplayString
			}
			out = append(out, hi<<4|lo)
			i += 2
		case c == '"' || c < 0x20 || c > 0x7e:
			return "", errDisplayString
		default:
			out = append(out, c)
		}
	}
	if !utf8.Valid(out) {
		return "", errDisplayString
	}
	return string(out), nil
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
