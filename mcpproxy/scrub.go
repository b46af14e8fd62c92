package mcpproxy

import (
	"net/url"
	"strings"
)

const redacted = "[redacted]"

// minEndpointSecret is the shortest endpoint query value scrubbed on its own.
const minEndpointSecret = 6

// scrubber removes secrets from upstream error text before it reaches a
// response, a log line or the stored discovery error: every URL loses its
// user info, query and fragment, and every known secret value (the caller's
// Connection.Redact values and the endpoint's own query values, raw and
// URL-escaped) is replaced by "[redacted]".
type scrubber struct {
	secrets []string
}

func newScrubber(endpoint *url.URL, extra []string) *scrubber {
	var s []string
	add := func(v string, minLen int) {
		if len(v) < minLen {
			return
		}
		s = append(s, v, url.QueryEscape(v), url.PathEscape(v))
	}
	for _, v := range extra {
		add(v, 1)
	}
	if endpoint != nil {
		// Values taken from the endpoint are replaced wherever they appear
		// only when long enough to be secrets, so "?v=1" does not mangle
		// every "1"; URLs themselves always lose their whole query.
		add(endpoint.RawQuery, minEndpointSecret)
		for _, vs := range endpoint.Query() {
			for _, v := range vs {
				add(v, minEndpointSecret)
			}
		}
		if endpoint.User != nil {
			add(endpoint.User.String(), 1)
			if pw, ok := endpoint.User.Password(); ok {
				add(pw, 1)
			}
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && len(s[j]) > len(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return &scrubber{secrets: s}
}

// scrub returns msg with URLs shortened and secrets replaced.
func (sc *scrubber) scrub(msg string) string {
	msg = scrubURLs(msg)
	for _, v := range sc.secrets {
		msg = strings.ReplaceAll(msg, v, redacted)
	}
	return msg
}

// scrubURLs rewrites every http(s) URL in msg to scheme://host/path, with
// "?[redacted]" when it had a query. Go's *url.Error quotes the full request
// URL, query credentials included, so this runs on every upstream error.
func scrubURLs(msg string) string {
	var b strings.Builder
	for {
		i := indexURL(msg)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i])
		end := i + strings.IndexFunc(msg[i:], isURLEnd)
		if end < i {
			end = len(msg)
		}
		raw := msg[i:end]
		msg = msg[end:]
		u, err := url.Parse(raw)
		if err != nil {
			b.WriteString(redacted)
			continue
		}
		hadQuery := u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?")
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		b.WriteString(u.String())
		if hadQuery {
			b.WriteString("?" + redacted)
		}
	}
}

func indexURL(s string) int {
	lower := strings.ToLower(s)
	i := strings.Index(lower, "http://")
	if j := strings.Index(lower, "https://"); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	return i
}

func isURLEnd(r rune) bool {
	switch r {
	case ' ', '"', '\'', '`', '<', '>', '\n', '\t', '\r':
		return true
	}
	return false
}
