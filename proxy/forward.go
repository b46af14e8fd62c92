package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// forwarded carries what Rewrite and the response hooks need about one
// request through the ReverseProxy.
type forwarded struct {
	target *forwardTarget
	start  time.Time
}

type forwardTarget struct {
	conn   *credvault.Connection
	secret string
	url    *url.URL
	redact []string // credvault.Resolved.Redactions, or the token's

	// OAuth connections only: the access token and what it was got for.
	token   *credvault.AccessToken
	res     *credvault.Resolved
	subject string
}

type forwardKey struct{}

// strippedHeaders never reach an upstream: the signature, the identity
// headers, the digest that covered them, and the agent's own credentials.
var strippedHeaders = []string{
	"Signature", "Signature-Input", "Content-Digest",
	"Idn-Namespace", "Idn-Subject", "Idn-Agent-Key", "Idn-Agent-Cert",
	"Authorization", "Cookie", "Proxy-Authorization",
}

func (h *Handler) forward(w http.ResponseWriter, r *http.Request, rt route, res *credvault.Resolved) {
	_, span := h.tracer.Start(r.Context(), "gateway.credential", trace.SpanKindInternal)
	secret, err := res.Secret()
	if err != nil {
		tracing.Fail(span, errcode.CredentialUnresolved.String())
	}
	span.End()
	if err != nil {
		h.logger.ErrorContext(r.Context(), "connection credential unresolved", "request_id", apierror.RequestIDFrom(r.Context()),
			"connection_id", res.Connection.ID, "code", errcode.CredentialUnresolved.String(), "error", err)
		h.fail(w, r, newError(errcode.CredentialUnresolved, err), nil)
		return
	}
	c := res.Connection
	if h.cfg.RotationEnforcement == credvault.RotationWarn && c.RotationOverdue(h.now(), h.cfg.RotationGrace) {
		w.Header().Set("Idn-Rotation-Warning", "credential rotation overdue for connection "+c.ID)
		h.logger.Warn("credential rotation overdue", "connection_id", c.ID, "due", c.NextRotationDueAt)
	}
	base, err := res.UpstreamBase()
	if err != nil {
		h.logger.ErrorContext(r.Context(), "connection has no usable base URL", "request_id", apierror.RequestIDFrom(r.Context()),
			"connection_id", c.ID, "code", errcode.ConnectionMisconfigured.String(), "error", err)
		h.fail(w, r, newError(errcode.ConnectionMisconfigured, err), nil)
		return
	}
	u, err := joinUpstream(base, rt.rest, r.URL.RawQuery)
	if err != nil {
		h.fail(w, r, newError(errcode.ValidationError, err), nil)
		return
	}
	target := &forwardTarget{conn: c, secret: secret, url: u, redact: res.Redactions()}
	if c.OAuth() {
		tok, subject, err := h.upstreamToken(r, res)
		if err != nil {
			h.logger.WarnContext(r.Context(), "no access token for an OAuth connection", "request_id", apierror.RequestIDFrom(r.Context()),
				"connection_id", c.ID, "code", classify(err).code.String())
			caller, _ := CallerFrom(r.Context())
			h.fail(w, r, err, caller)
			return
		}
		target.token, target.res, target.subject, target.redact = tok, res, subject, tok.Redactions
	}
	fw := &forwarded{target: target, start: time.Now()}
	ctx, span := h.tracer.Start(r.Context(), "gateway.forward", trace.SpanKindClient)
	defer span.End()
	if span.IsRecording() {
		// The upstream's scheme and host only: its path and query may
		// carry a credential (credvault's query placement).
		span.SetAttributes(attribute.String("server.address", u.Hostname()), attribute.String("url.scheme", u.Scheme))
	}
	h.rp.ServeHTTP(informational{w, fw.target}, r.WithContext(context.WithValue(ctx, forwardKey{}, fw)))
}

// rewrite is the ReverseProxy's Rewrite hook (never Director: golang/go#50580).
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	fw := pr.In.Context().Value(forwardKey{}).(*forwarded)
	t := fw.target
	u := *t.url
	pr.Out.URL = &u
	pr.Out.Host = ""
	for _, name := range strippedHeaders {
		if name == "Cookie" && t.conn.AllowUpstreamCookies {
			continue // the agent returns the upstream's own cookies
		}
		pr.Out.Header.Del(name)
	}
	if id := apierror.RequestIDFrom(pr.In.Context()); id != "" {
		pr.Out.Header.Set("X-Request-Id", id)
	}
	if len(t.redact) > 0 {
		// The agent must not pick an encoding the redactor cannot read
		// (an echo of the credential inside a gzip body would pass). With
		// no Accept-Encoding, Go's transport asks for gzip itself and
		// hands the body on decoded, so it is redacted like any other.
		pr.Out.Header.Del("Accept-Encoding")
	}
	// The forward span continues the agent's trace; off, the agent's own
	// traceparent and tracestate pass through untouched.
	h.tracer.Inject(pr.Out.Context(), pr.Out.Header)
	credvault.Inject(pr.Out, t.conn, t.secret)
	if t.token != nil {
		pr.Out.Header.Set("Authorization", credvault.DefaultBearerPrefix+t.token.Value)
	}
}

func outcomeOf(status int) string {
	switch {
	case status >= 500:
		return "server_error"
	case status >= 400:
		return "client_error"
	}
	return "success"
}

// upstreamResponded records the upstream answer; the body then streams to
// the client (ReverseProxy flushes event streams and unknown-length bodies
// at once).
func (h *Handler) upstreamResponded(resp *http.Response) error {
	// Only the gateway marks an envelope as its own: an upstream's forged
	// AUTH_CLAIM_REQUIRED could otherwise steer the agent's owner.
	resp.Header.Del(apierror.MarkHeader)
	resp.Trailer.Del(apierror.MarkHeader)
	fw, _ := resp.Request.Context().Value(forwardKey{}).(*forwarded)
	if fw != nil {
		redactResponse(resp, fw.target.redact, fw.target.conn.AllowUpstreamCookies)
	}
	outcome := outcomeOf(resp.StatusCode)
	if h.tracer.On() {
		span := trace.SpanFromContext(resp.Request.Context())
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if resp.StatusCode >= 500 {
			span.SetStatus(codes.Error, "")
		}
	}
	if fw != nil {
		elapsed := time.Since(fw.start)
		conn := h.metrics.connection(fw.target.conn.ID)
		h.metrics.upstreamRequests.WithLabelValues("http", conn, outcome).Inc()
		h.metrics.upstreamLatency.WithLabelValues("http", conn, outcome).Observe(elapsed.Seconds())
		h.decisions.log(resp.Request.Context(), decision{
			kind: "upstream", outcome: outcome, status: resp.StatusCode, connection: fw.target.conn.ID,
			requestID: apierror.RequestIDFrom(resp.Request.Context()), method: resp.Request.Method,
			latencyMS: float64(elapsed.Microseconds()) / 1000,
		})
		if h.cfg.Activity != nil {
			h.recordActivity(resp.Request, nil, fw.target.conn.ServiceSlug(), true, "", resp.StatusCode)
		}
	}
	return nil
}

// upstreamFailed answers a transport failure with 502 or 504. The error is
// classified, never echoed: it may contain the upstream URL and with it a
// query-parameter credential.
func (h *Handler) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) { // a streamed (unsigned-bypass) body passed the limit
		apierror.Write(w, r, newError(errcode.RequestBodyTooLarge, err).api())
		return
	}
	class, timeout := upstreamClass(err)
	outcome := "error"
	code := errcode.UpstreamError
	if timeout {
		outcome, code = "timeout", errcode.UpstreamTimeout
	}
	if h.tracer.On() {
		tracing.Fail(trace.SpanFromContext(r.Context()), code.String())
	}
	h.metrics.upstreamErrors.WithLabelValues(class).Inc()
	fw, _ := r.Context().Value(forwardKey{}).(*forwarded)
	if fw != nil {
		conn := h.metrics.connection(fw.target.conn.ID)
		h.metrics.upstreamRequests.WithLabelValues("http", conn, outcome).Inc()
		h.metrics.upstreamLatency.WithLabelValues("http", conn, outcome).Observe(time.Since(fw.start).Seconds())
		h.decisions.log(r.Context(), decision{kind: "upstream", outcome: outcome, code: code.String(),
			connection: fw.target.conn.ID, requestID: apierror.RequestIDFrom(r.Context()), method: r.Method})
		if h.cfg.Activity != nil {
			h.recordActivity(r, nil, fw.target.conn.ServiceSlug(), true, code.String(), code.Status())
		}
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away; nobody reads an answer
	}
	if fw != nil {
		// The class, never the error: it may carry the upstream URL.
		h.logger.WarnContext(r.Context(), "upstream request failed", "request_id", apierror.RequestIDFrom(r.Context()),
			"connection_id", fw.target.conn.ID, "code", code.String(), "class", class)
	}
	apierror.Write(w, r, newError(code, nil).api())
}

// NewTransport returns the gateway's upstream transport: pooled keep-alive
// connections sized for a busy local gateway (a large idle pool, so bursts
// of concurrent requests do not churn connections), HTTP/2 where the
// upstream offers it, and no overall timeout (the route timeouts bound each
// request). An upstream gets DefaultTimeout to send its response headers,
// so that an exchange without a deadline of its own cannot be held open
// for ever; set ResponseHeaderTimeout to the longest route timeout when
// those differ. The ReverseProxy never follows redirects.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          2048,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: DefaultTimeout,
	}
}

// bufferPool recycles the ReverseProxy's 32 KiB copy buffers, which would
// otherwise be allocated and zeroed for every response.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
