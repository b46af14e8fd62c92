package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/upstreamauth"
)

// UpstreamTokens gets the access token of an OAuth connection's account
// (the one serving subject); *upstreamauth.Tokens implements it. Token's
// errors matching upstreamauth.ErrUnavailable are answered 503
// UPSTREAM_AUTH_UNAVAILABLE, those matching upstreamauth.ErrAuthRequired
// 403 UPSTREAM_AUTH_REQUIRED.
type UpstreamTokens interface {
	Token(ctx context.Context, res *credvault.Resolved, subject string) (*credvault.AccessToken, error)
	// Invalidate drops a token the upstream refused with 401.
	Invalidate(res *credvault.Resolved, subject string, token *credvault.AccessToken)
}

// upstreamToken gets the access token for an OAuth connection, or the
// refusal to answer with.
func (h *Handler) upstreamToken(r *http.Request, res *credvault.Resolved) (*credvault.AccessToken, string, error) {
	if h.cfg.UpstreamTokens == nil {
		return nil, "", newError(errcode.ConnectionMisconfigured, errors.New("proxy: an OAuth connection needs Config.UpstreamTokens"))
	}
	var subject string
	if caller, _ := CallerFrom(r.Context()); caller != nil {
		subject = caller.Subject
	}
	tok, err := h.cfg.UpstreamTokens.Token(r.Context(), res, subject)
	if err != nil {
		return nil, "", tokenRefusal(err)
	}
	return tok, subject, nil
}

// tokenRefusal is the answer to a failed Token: what the agent may act on
// (when to retry, what the owner must do), never the provider's answer.
func tokenRefusal(err error) *Error {
	if ue, ok := errors.AsType[*upstreamauth.UnavailableError](err); ok {
		e := newError(errcode.UpstreamAuthUnavailable, err)
		e.retry = ue.RetryAfter
		e.extra = map[string]any{"retry_after_seconds": int64((ue.RetryAfter + time.Second - 1) / time.Second)}
		return e
	}
	if re, ok := errors.AsType[*upstreamauth.AuthRequiredError](err); ok {
		e := newError(errcode.UpstreamAuthRequired, err)
		e.Message = re.Error()[len("upstreamauth: "):]
		e.extra = map[string]any{"connection_id": re.Connection, "needs_reconnecting": re.NeedsReconnecting}
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return newError(errcode.UpstreamTimeout, err)
	}
	return newError(errcode.CredentialUnresolved, err)
}

// tokenRetry sends a request refused with 401 once more with a fresh
// token, when its body can be replayed: the cached token may have been
// revoked or expired early at the provider.
type tokenRetry struct {
	base   http.RoundTripper
	tokens UpstreamTokens
}

func (t *tokenRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	fw, _ := req.Context().Value(forwardKey{}).(*forwarded)
	if fw == nil || fw.target.token == nil || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return resp, nil
	}
	ft := fw.target
	t.tokens.Invalidate(ft.res, ft.subject, ft.token)
	fresh, terr := t.tokens.Token(req.Context(), ft.res, ft.subject)
	if terr != nil || fresh.Value == ft.token.Value {
		return resp, nil // the agent gets the upstream's 401
	}
	out := req.Clone(req.Context())
	if req.GetBody != nil {
		if out.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10) // lets the connection be reused
	_ = resp.Body.Close()
	out.Header.Set("Authorization", credvault.DefaultBearerPrefix+fresh.Value)
	ft.token, ft.redact = fresh, fresh.Redactions
	return t.base.RoundTrip(out)
}

// retryAfter is the Retry-After of a 503 answer: the error's own, else
// the default.
func (e *Error) retryAfter() time.Duration {
	if e.retry > 0 {
		return e.retry
	}
	return retryAfter
}
