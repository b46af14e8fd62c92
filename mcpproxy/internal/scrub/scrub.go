// Package scrub removes secrets from what an upstream MCP server says
// before it reaches a response, a log line or the stored discovery.
package scrub

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
)

// Redacted is the mark that replaces a secret.
const Redacted = "[redacted]"

// minEndpointSecret is the shortest endpoint query value scrubbed on its own.
const minEndpointSecret = 6

// Scrubber removes secrets from upstream error text before it reaches a
// response, a log line or the stored discovery error: every URL loses its
// user info, query and fragment, and every known secret value (the caller's
// Connection.Redact values and the endpoint's own query values, raw and
// URL-escaped) is replaced by "[redacted]". Each text is replaced in one
// pass: a mark is never searched again, so a secret that occurs inside
// "[redacted]" cannot nest marks.
type Scrubber struct {
	secrets  []string          // longest first, without duplicates
	replacer *strings.Replacer // every secret by the mark; nil without secrets
	// live, when set, returns secrets that change between requests (see
	// Live); cached holds the Scrubber of its latest answer.
	live   func() []string
	cached atomic.Pointer[liveScrubber]
}

// liveScrubber is a Scrubber of the static secrets and the live ones
// it was built from.
type liveScrubber struct {
	from []string
	sc   *Scrubber
}

// New returns the Scrubber of an upstream endpoint (nil: none) and the
// caller's extra secret values.
func New(endpoint *url.URL, extra []string) *Scrubber {
	s := forms(extra)
	add := func(v string, minLen int) {
		if len(v) >= minLen {
			s = append(s, forms([]string{v})...)
		}
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
	return build(s)
}

// forms lists each non-empty value raw and URL-escaped.
func forms(values []string) []string {
	var s []string
	for _, v := range values {
		if v != "" {
			s = append(s, v, url.QueryEscape(v), url.PathEscape(v))
		}
	}
	return s
}

// build returns the Scrubber of the secrets s.
func build(s []string) *Scrubber {
	// Longest first, so a secret that contains another is replaced whole
	// (a Replacer tries its pairs in order at each position).
	slices.SortStableFunc(s, func(a, b string) int { return len(b) - len(a) })
	s = slices.Compact(s)
	sc := &Scrubber{secrets: s}
	if len(s) > 0 {
		pairs := make([]string, 0, 2*len(s))
		for _, v := range s {
			pairs = append(pairs, v, Redacted)
		}
		sc.replacer = strings.NewReplacer(pairs...)
	}
	return sc
}

// Live makes sc scrub the values live returns too, asked each time a
// text or value is scrubbed: secrets that change between requests, such
// as the OAuth access tokens a connection's transport sends. It returns
// sc, and must be called before sc is shared.
func (sc *Scrubber) Live(live func() []string) *Scrubber {
	sc.live = live
	return sc
}

// now is sc with the live secrets of the moment; sc itself without any.
func (sc *Scrubber) now() *Scrubber {
	if sc.live == nil {
		return sc
	}
	values := sc.live()
	if len(values) == 0 {
		return sc
	}
	if c := sc.cached.Load(); c != nil && slices.Equal(c.from, values) {
		return c.sc
	}
	c := &liveScrubber{from: slices.Clone(values), sc: build(append(slices.Clone(sc.secrets), forms(values)...))}
	sc.cached.Store(c)
	return c.sc
}

// Scrub returns msg with secrets replaced, then URLs shortened (which
// only removes text, so no mark is searched twice).
func (sc *Scrubber) Scrub(msg string) string {
	return scrubURLs(sc.Replace(msg))
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
			b.WriteString(Redacted)
			continue
		}
		hadQuery := u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?")
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		b.WriteString(u.String())
		if hadQuery {
			b.WriteString("?" + Redacted)
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

// Launder returns v with every secret replaced inside the strings (object
// keys included) of its JSON form, decoded into a new T; v itself when no
// string held one. Upstream content (tool results, tool listings) reaches
// the agent this way, so an upstream that echoes the request headers cannot
// hand over the credential. Working on decoded strings finds a secret
// however the upstream escaped it in its JSON.
func Launder[T any](sc *Scrubber, v *T) (*T, error) {
	sc = sc.now()
	if len(sc.secrets) == 0 {
		return v, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	clean, changed, err := sc.launder(raw)
	if err != nil {
		return nil, err
	}
	if !changed {
		return v, nil
	}
	out := new(T)
	if err := json.Unmarshal(clean, out); err != nil {
		return nil, err
	}
	return out, nil
}

// LaunderJSON is Launder of a JSON value as written: raw itself when no
// string held a secret, else its scrubbed encoding.
func LaunderJSON(sc *Scrubber, raw json.RawMessage) (json.RawMessage, error) {
	sc = sc.now()
	if len(sc.secrets) == 0 {
		return raw, nil
	}
	clean, _, err := sc.launder(raw)
	return clean, err
}

// launder returns raw, a JSON value, when none of its strings holds a
// secret, else its scrubbed encoding (changed).
func (sc *Scrubber) launder(raw []byte) (clean []byte, changed bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers come back byte for byte
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, false, err
	}
	if tree, changed = sc.redactTree(tree); !changed {
		return raw, false, nil
	}
	clean, err = json.Marshal(tree)
	return clean, true, err
}

// redactTree replaces secrets in the strings of a decoded JSON value, in
// place where it can; changed reports whether any was found.
func (sc *Scrubber) redactTree(v any) (out any, changed bool) {
	switch t := v.(type) {
	case string:
		s := sc.Replace(t)
		return s, s != t
	case []any:
		for i, e := range t {
			if n, c := sc.redactTree(e); c {
				t[i], changed = n, true
			}
		}
	case map[string]any:
		renamed := map[string]string{}
		for k, e := range t {
			if n, c := sc.redactTree(e); c {
				t[k], changed = n, true
			}
			if nk := sc.Replace(k); nk != k {
				renamed[k] = nk
			}
		}
		for k, nk := range renamed {
			t[nk] = t[k]
			delete(t, k)
			changed = true
		}
	}
	return v, changed
}

// Replace substitutes every known secret in s in one pass: at each
// position the longest secret that matches there, never inside a mark
// already written.
func (sc *Scrubber) Replace(s string) string {
	sc = sc.now()
	if sc.replacer == nil {
		return s
	}
	return sc.replacer.Replace(s)
}
