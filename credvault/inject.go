package credvault

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Inject puts a connection's upstream credential on req, in place:
//
//	bearer:      Authorization: <auth_prefix><secret>
//	header_key:  <auth_header_name>: <auth_prefix><secret>
//	query_param: <auth_query_param>=<secret>, replacing any value the
//	             request already had for that parameter
//
// A connection without an auth mode, in an OAuth mode (whose token
// package upstreamauth gets), or with an empty secret, leaves req
// unchanged. Inject does not check req's destination; Vault.Transport does.
func Inject(req *http.Request, c *Connection, secret string) {
	if secret == "" {
		return
	}
	switch c.AuthMode {
	case AuthBearer:
		req.Header.Set("Authorization", c.AuthPrefix+secret)
	case AuthHeaderKey:
		name := c.AuthHeaderName
		if name == "" {
			name = DefaultAuthHeaderName
		}
		req.Header.Set(name, c.AuthPrefix+secret)
	case AuthQueryParam:
		name := c.AuthQueryParam
		if name == "" {
			name = DefaultAuthQueryParam
		}
		req.URL.RawQuery = setQueryParam(req.URL.RawQuery, name, secret)
	}
}

// setQueryParam drops every occurrence of name from a raw query and appends
// name=value, keeping the other parameters byte for byte and in order.
func setQueryParam(raw, name, value string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == name {
			continue
		}
		b.WriteString(part)
		b.WriteByte('&')
	}
	b.WriteString(url.QueryEscape(name))
	b.WriteByte('=')
	b.WriteString(url.QueryEscape(value))
	return b.String()
}

// UpstreamBase returns the connection's upstream root: base_url with
// path_prefix appended. A reverse proxy joins the inbound path to it.
func (c *Connection) UpstreamBase() (*url.URL, error) {
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("credvault: connection %q: base_url does not parse", c.ID)
	}
	if c.PathPrefix != "" {
		u = u.JoinPath(c.PathPrefix)
	}
	if u.Path != "" && u.Path[0] != '/' { // JoinPath on an empty base path drops the leading slash
		u.Path = "/" + u.Path
		u.RawPath = ""
	}
	return u, nil
}

// transport injects a connection's credential into requests bound for the
// connection's upstream.
type transport struct {
	v    *Vault
	id   string
	base http.RoundTripper
}

// ErrCredentialDestination is returned by a Vault.Transport asked to send a
// request to a host other than the connection's upstream: the credential is
// never sent there (redirects to other hosts included).
var ErrCredentialDestination = errors.New("credvault: request is not bound for the connection's upstream; credential withheld")

// Transport returns an http.RoundTripper that, for each request, looks the
// connection up in the current snapshot (so rotations apply at once),
// checks that the request goes to the connection's upstream (the scheme and
// host of base_url, or of a URL Config.Extensions.Destinations names for
// it), and sends a clone of it with the credential injected through base
// (nil means http.DefaultTransport). The caller's request is never
// modified, the returned Response.Request is the caller's request, and
// errors never contain the credential or a URL carrying it.
func (v *Vault) Transport(id string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{v: v, id: id, base: base}
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
	}
	r, ok := t.v.Lookup(t.id)
	if !ok {
		closeBody()
		return nil, fmt.Errorf("%w: %q", ErrNotFound, t.id)
	}
	secret, err := r.Secret()
	if err != nil {
		closeBody()
		return nil, err
	}
	if !t.v.upstreamOrigin(r.Connection, req.URL) {
		closeBody()
		return nil, ErrCredentialDestination
	}
	out := req.Clone(req.Context())
	Inject(out, r.Connection, secret)
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		return nil, redact(err, secret)
	}
	resp.Request = req
	return resp, nil
}

// upstreamOrigin reports whether u goes to the scheme and host of c's
// base_url or of one of its Extensions.Destinations.
func (v *Vault) upstreamOrigin(c *Connection, u *url.URL) bool {
	same := func(raw string) bool {
		b, err := url.Parse(raw)
		return err == nil && b.Host != "" && strings.EqualFold(b.Scheme, u.Scheme) && strings.EqualFold(b.Host, u.Host)
	}
	if same(c.BaseURL) {
		return true
	}
	if v.ext.Destinations != nil {
		return slices.ContainsFunc(v.ext.Destinations(c), same)
	}
	return false
}

// redactedError hides a secret in an error's text while keeping the
// original reachable through Unwrap for errors.Is/As (timeouts, context
// cancellation).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every form of secret (raw, query-escaped,
// path-escaped) replaced by [redacted]; a *url.Error keeps its type with a
// redacted URL.
func redact(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	scrub := func(s string) string {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			s = strings.ReplaceAll(s, form, "[redacted]")
		}
		return s
	}
	if ue, ok := err.(*url.Error); ok {
		inner := ue.Err
		if msg := scrub(inner.Error()); msg != inner.Error() {
			inner = &redactedError{msg: msg, err: inner}
		}
		return &url.Error{Op: ue.Op, URL: scrub(ue.URL), Err: inner}
	}
	if msg := scrub(err.Error()); msg != err.Error() {
		return &redactedError{msg: msg, err: err}
	}
	return err
}

// referencedValues returns the values of the variables that a secret
// template references, those of at least MinSecretLen bytes: shorter ones
// are more likely identifiers than secrets.
func referencedValues(template string, vars map[string]string) []string {
	keys, _ := TemplateReferences(template)
	var out []string
	for _, k := range keys {
		if v := vars[k]; len(v) >= MinSecretLen {
			out = append(out, v)
		}
	}
	return out
}

// redactions lists the forms of secret (and of fragments) that Inject puts
// on the wire or that an upstream is likely to echo, longest first.
func redactions(c *Connection, secret string, fragments []string) []string {
	if secret == "" {
		return nil
	}
	var forms []string
	for _, v := range append([]string{secret}, fragments...) {
		forms = append(forms, wireForms(v)...)
	}
	if (c.AuthMode == AuthBearer || c.AuthMode == AuthHeaderKey) && c.AuthPrefix != "" {
		forms = append(forms, c.AuthPrefix+secret)
	}
	slices.SortFunc(forms, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(forms)
}

// wireForms returns v as it appears raw, in a query or path (escaped by Go,
// or re-escaped by an upstream that writes lower-case hex), and inside a JSON
// string (escaped as Go does, as most encoders do, and with "\/" as PHP does).
func wireForms(v string) []string {
	forms := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	for _, f := range forms[1:] {
		if strings.Contains(f, "%") {
			forms = append(forms, lowerHex(f))
		}
	}
	plain := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v)
	goJSON, _ := json.Marshal(v) // a string always encodes
	return append(forms, plain, strings.ReplaceAll(plain, "/", `\/`), string(goJSON[1:len(goJSON)-1]))
}

// lowerHex rewrites the hex digits of every percent-escape in s to lower
// case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lower(b[i+1]), lower(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}
