package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults for the zero Config.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 64 << 10
	DefaultRefreshAhead     = time.Minute
)

var (
	errRedirect  = errors.New("upstreamauth: the token endpoint redirected; redirects are not followed")
	errMalformed = errors.New("upstreamauth: malformed response")
)

// responseTooLargeError reports a provider answer over the limit.
type responseTooLargeError struct{ limit int64 }

func (e *responseTooLargeError) Error() string {
	return fmt.Sprintf("upstreamauth: the provider's answer is longer than %d bytes", e.limit)
}

// newClient returns the client for the provider's endpoints: base's
// transport (nil means http.DefaultTransport), an overall timeout, no
// redirects (a redirected POST could carry the client secret elsewhere),
// and bodies cut at max bytes with an error.
func newClient(base *http.Client, timeout time.Duration, max int64) *http.Client {
	rt := http.DefaultTransport
	if base != nil && base.Transport != nil {
		rt = base.Transport
	}
	return &http.Client{
		Transport: &limitTransport{base: rt, max: max},
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errRedirect
		},
	}
}

type limitTransport struct {
	base http.RoundTripper
	max  int64
}

// noteKey carries a *note through a request's context: oauth2 formats a
// body's read error with %v, so its type would not reach classify.
type noteKey struct{}

// note records what the transport saw of one exchange.
type note struct{ tooLarge atomic.Bool }

func withNote(ctx context.Context) (context.Context, *note) {
	n := &note{}
	return context.WithValue(ctx, noteKey{}, n), n
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	n, _ := req.Context().Value(noteKey{}).(*note)
	if resp.ContentLength > t.max {
		_ = resp.Body.Close()
		if n != nil {
			n.tooLarge.Store(true)
		}
		return nil, &responseTooLargeError{limit: t.max}
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, max: t.max, note: n}
	return resp, nil
}

// limitedBody fails a read that would pass the limit, so a parser never
// sees a truncated answer as a whole one.
type limitedBody struct {
	rc        io.ReadCloser
	left, max int64
	note      *note
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		if b.note != nil {
			b.note.tooLarge.Store(true)
		}
		return 0, &responseTooLargeError{limit: b.max}
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// withForm returns c sending params in the form of each token request
// too: x/oauth2 adds none of its own to a refresh, where RFC 8707 wants
// resource again.
func withForm(c *http.Client, params url.Values) *http.Client {
	out := *c
	out.Transport = formTransport{base: c.Transport, params: params}
	return &out
}

type formTransport struct {
	base   http.RoundTripper
	params url.Values
}

func (t formTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	form := url.Values{}
	if req.Body != nil {
		// x/oauth2's own form, a few hundred bytes.
		body, err := io.ReadAll(io.LimitReader(req.Body, 64<<10))
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		if form, err = url.ParseQuery(string(body)); err != nil {
			return nil, err
		}
	}
	for k, v := range t.params {
		form[k] = v
	}
	enc := form.Encode()
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(strings.NewReader(enc)), int64(len(enc))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(enc)), nil }
	return t.base.RoundTrip(out)
}
