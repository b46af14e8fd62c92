package mcpproxy

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

const redacted = "[redacted]"

// minEndpointSecret is the shortest endpoint query value scrubbed on its own.
const minEndpointSecret = 6

// scrubber removes secrets from upstream error text before it reaches a
// response, a log line or the stored discovery error: every URL loses its
// user info, query and fragment, and every known secret value (the caller's
// Connection.Redact values and the endpoint's own query values, raw and
// URL-escaped) is replaced by "[redacted]". Each text is replaced in one
// pass: a mark is never searched again, so a secret that occurs inside
// "[redacted]" cannot nest marks.
type scrubber struct {
	secrets  []string          // longest first, without duplicates
	replacer *strings.Replacer // every secret by the mark; nil without secrets
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
	// Longest first, so a secret that contains another is replaced whole
	// (a Replacer tries its pairs in order at each position).
	slices.SortStableFunc(s, func(a, b string) int { return len(b) - len(a) })
	s = slices.Compact(s)
	sc := &scrubber{secrets: s}
	if len(s) > 0 {
		pairs := make([]string, 0, 2*len(s))
		for _, v := range s {
			pairs = append(pairs, v, redacted)
		}
		sc.replacer = strings.NewReplacer(pairs...)
	}
	return sc
}

// scrub returns msg with secrets replaced, then URLs shortened (which
// only removes text, so no mark is searched twice).
func (sc *scrubber) scrub(msg string) string {
	return scrubURLs(sc.replace(msg))
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

// launder returns v with every secret replaced inside the strings (object
// keys included) of its JSON form, decoded into a new T; v itself when no
// string held one. Upstream content (tool results, tool listings) reaches
// the agent this way, so an upstream that echoes the request headers cannot
// hand over the credential. Working on decoded strings finds a secret
// however the upstream escaped it in its JSON.
func launder[T any](sc *scrubber, v *T) (*T, error) {
	if len(sc.secrets) == 0 {
		return v, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers come back byte for byte
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	tree, changed := sc.redactTree(tree)
	if !changed {
		return v, nil
	}
	if raw, err = json.Marshal(tree); err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}

// redactTree replaces secrets in the strings of a decoded JSON value, in
// place where it can; changed reports whether any was found.
func (sc *scrubber) redactTree(v any) (out any, changed bool) {
	switch t := v.(type) {
	case string:
		s := sc.replace(t)
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
			if nk := sc.replace(k); nk != k {
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

// replace substitutes every known secret in s in one pass: at each
// position the longest secret that matches there, never inside a mark
// already written.
func (sc *scrubber) replace(s string) string {
	if sc.replacer == nil {
		return s
	}
	return sc.replacer.Replace(s)
}

// cleanDiscovery replaces secrets in what the upstream said in a
// discovery (server name and version, protocol version, each tool's name,
// title, description and input schema) and never in the gateway's own
// field names: laundering the Discovery's JSON form would also rewrite a
// key such as "tools", and a short secret would empty the catalogue.
func (sc *scrubber) cleanDiscovery(d *Discovery) error {
	if len(sc.secrets) == 0 {
		return nil
	}
	for _, f := range []*string{&d.ServerName, &d.ServerVersion, &d.ProtocolVersion} {
		*f = sc.replace(*f)
	}
	for i := range d.Tools {
		t := &d.Tools[i]
		t.Name, t.Title, t.Description = sc.replace(t.Name), sc.replace(t.Title), sc.replace(t.Description)
		schema, err := launder(sc, &t.InputSchema) // a schema is upstream JSON throughout, keys included
		if err != nil {
			return err
		}
		t.InputSchema = *schema
	}
	return nil
}
