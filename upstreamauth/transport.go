package upstreamauth

import (
	"net/http"

	"github.com/idnhq/idn/credvault"
)

// Transport returns an http.RoundTripper that sends each request through
// base (nil means http.DefaultTransport) with an access token of the
// account of res's connection that serves subject, as oauth2.Transport
// does: on a copy, never changing the caller's request. It does not check
// where the request goes: put it under credvault.Vault.Transport, which
// does.
func (t *Tokens) Transport(res *credvault.Resolved, subject string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{tokens: t, res: res, subject: subject, base: base}
}

type transport struct {
	tokens  *Tokens
	res     *credvault.Resolved
	subject string
	base    http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.tokens.Token(req.Context(), t.res, t.subject)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", credvault.DefaultBearerPrefix+tok.Value)
	return t.base.RoundTrip(out)
}
