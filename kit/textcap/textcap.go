// Package textcap bounds text that an agent, a stranger or an upstream
// chose (a tool or method name, a path, an error message) before it
// reaches a log line, a span attribute or an activity record. Each
// stays at most a fixed number of bytes, so a caller cannot make the
// gateway write or export more per request by sending longer names.
// Handler bounds every value of a slog.Handler at once; Method keeps
// the methods of RFC 9110 and names the rest "_OTHER".
//
//	log.Info("decision", "tool", textcap.Clip(tool, textcap.Name))
package textcap

import (
	"unicode/utf8"
)

// Bounds, in bytes, of the values the servers log and export.
const (
	// Name bounds a name: a tool's, an agent's, a service's, a method's.
	Name = 128
	// Text bounds free text: a path, an upstream's error message.
	Text = 512
)

// Clip returns s as at most max bytes of valid UTF-8 without control
// characters: each control character or invalid byte becomes U+FFFD, and
// the text is cut at a character boundary. Text already so is returned
// as it is, without a copy.
func Clip(s string, max int) string {
	if plain(s, max) {
		return s
	}
	b := make([]byte, 0, min(len(s), max))
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			c = utf8.RuneError
		}
		if len(b)+utf8.RuneLen(c) > max {
			break
		}
		b = utf8.AppendRune(b, c)
	}
	return string(b)
}

// plain reports whether s fits in max bytes and is valid UTF-8 without
// control characters: the common case, which Clip returns as it is.
func plain(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}

// Method returns m when it is a method of RFC 9110 or PATCH, else
// "_OTHER", as OpenTelemetry's HTTP conventions name the rest: a client
// can send any token as a method, and spans, logs and metric labels must
// not grow with it.
func Method(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return m
	}
	return "_OTHER"
}
