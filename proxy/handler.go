package proxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/stall"
	"github.com/idnhq/idn/kit/bodybudget"
	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/kit/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Connections finds a connection and its resolved credential;
// *credvault.Vault implements it, and a program that keeps connections
// elsewhere makes each with credvault.NewResolved. A connection the handler
// cannot use (no credential, no connection, no absolute base URL) is
// refused 500 CREDENTIAL_UNRESOLVED or CONNECTION_MISCONFIGURED.
type Connections interface {
	Lookup(id string) (*credvault.Resolved, bool)
}

// Claims answers whether <namespace, public key, service> is approved;
// *claimcache.Cache implements it.
type Claims interface {
	Lookup(service, namespace string, publicKey []byte) (claimcache.Approval, error)
}

// ClaimSubmitter submits a claim for an unapproved caller;
// *claimcache.Submitter implements it. Its error is the caller's answer:
// claimcache.ErrRateLimited is 429 AUTH_CLAIM_SUBMIT_RATE_LIMITED; a
// *claimcache.StatusError whose code is a cause of the caller's own
// (NAMESPACE_NOT_FOUND, NAMESPACE_DEACTIVATED, NAMESPACE_INVALID,
// PENDING_LIMIT_REACHED, AGENT_PENDING_LIMIT_REACHED) is answered with that
// code; anything else is 502 AUTH_CLAIM_SUBMIT_FAILED.
type ClaimSubmitter interface {
	Submit(ctx context.Context, sub claimcache.Submission) (claimcache.Receipt, error)
}

// Defaults for the zero Config.
const (
	DefaultMaxBodyBytes = 8 << 20
	DefaultTimeout      = 120 * time.Second
	DefaultMCPTimeout   = 90 * time.Second
	submitTimeout       = 5 * time.Second
)

// Config configures a Handler. Connections, Claims and Nonces are required:
// without them every request would have to be refused. Options holds the
// policy, which a program composing the handler (package gateway) takes
// from its own configuration as it is.
type Config struct {
	Connections Connections
	Claims      Claims
	// Nonces records accepted nonces per namespace (replay.Store).
	Nonces httpsig.NonceChecker
	// Submitter, when set, submits a claim for callers that
	// have no approved claim. Nil means callers are refused without one.
	Submitter ClaimSubmitter
	// Approvals holds calls matching a connection's approval_routes until
	// the owner approves them. Nil refuses every such call
	// (AUTH_ACTION_SUBMIT_FAILED).
	Approvals Approvals

	Options

	// Clock is the time source of the signature window and rotation due
	// dates. Nil means time.Now.
	Clock func() time.Time
	// Transport forwards to upstreams; nil means NewTransport(), whose
	// response headers may take as long as the longer of Timeout and
	// MCPTimeout.
	Transport http.RoundTripper

	// UpstreamTokens gets the access tokens of the connections in an
	// OAuth auth mode (package upstreamauth). Nil refuses those
	// connections 500 CONNECTION_MISCONFIGURED.
	UpstreamTokens UpstreamTokens

	// MCP serves /mcp/{connection_id}/… after authentication; the caller is
	// available to it through CallerFrom. Nil answers those routes 404.
	MCP http.Handler

	// Activity, when set, is told of every decision about a request to a
	// runtime route (a refusal, or the upstream's answer or failure) for
	// the owner's activity. Nil records none, at no cost.
	Activity ActivityRecorder

	// Metrics receives the gateway's metrics; nil means an unregistered set.
	Metrics *Metrics
	// DecisionLog, when set, receives one JSON decision per authentication
	// and upstream outcome. Identities are fingerprinted with LogSalt.
	DecisionLog *slog.Logger
	LogSalt     []byte
	// Logger receives operational messages (rotation warnings). Nil discards.
	Logger *slog.Logger
	// TracerProvider, when set, receives a span per request and per
	// pipeline stage, and the agent's traceparent and tracestate are
	// continued to the upstream. Nil means no spans and no trace headers
	// touched, at no cost.
	TracerProvider trace.TracerProvider
}

// Options is the runtime's policy: the signature window, the body and time
// limits, who is believed about the client's address, and the weakening
// switches. Its zero value is the safe default: every limit takes the
// documented default at zero, and a check is turned off only by a field
// that says so (RotationEnforcement credvault.RotationOff, the Insecure…
// fields).
type Options struct {
	// MaxAge and FutureSkew bound a signature's created time: zero means
	// 300 s and 30 s.
	MaxAge     time.Duration
	FutureSkew time.Duration
	// TrustedProxies are the networks whose X-Forwarded-* headers are
	// believed when rebuilding @target-uri and the client address. Empty
	// means none.
	TrustedProxies []netip.Prefix
	// PublicAuthority, when set, is the host[:port] every signature is
	// checked against, whatever Host the request names. Empty means Host.
	PublicAuthority string

	// Aliases maps a first path segment to a connection id: /<alias>/{path}
	// behaves as /proxy/<id>/{path}. Nil means none.
	Aliases map[string]string

	// InsecureAllowUnsigned skips signature, claim and nonce checks on every
	// connection. InsecureUnsignedConnections does so for the listed
	// connection ids only. Development only.
	InsecureAllowUnsigned       bool
	InsecureUnsignedConnections []string

	// RotationEnforcement is what happens to a connection whose credential
	// is overdue for rotation: zero means credvault.RotationWarn,
	// credvault.RotationOff turns the check off. RotationGrace extends the
	// due date; zero means none.
	RotationEnforcement credvault.RotationEnforcement
	RotationGrace       time.Duration

	// MaxBodyBytes caps request bodies (zero: DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxInflightBodyBytes caps the body bytes buffered at once across all
	// requests; a request that would pass it is answered 503
	// REQUEST_BODY_CAPACITY_EXHAUSTED with Retry-After. Zero means
	// DefaultMaxInflightBodyBytes.
	MaxInflightBodyBytes int64
	// Timeout bounds an /proxy request (zero: DefaultTimeout); MCPTimeout an
	// /mcp request (zero: DefaultMCPTimeout).
	Timeout    time.Duration
	MCPTimeout time.Duration
	// StuckAfter is how long a request may spend being authenticated (the
	// steps before it waits on its body or an upstream, all in memory but
	// a claim submission bounded at 5 s) before Progress reports the
	// request path stuck. Zero means 15 s.
	StuckAfter time.Duration
}

// Handler is the gateway runtime. Create it with New.
type Handler struct {
	cfg       Config
	verifier  *identity.Verifier
	ips       clientip.Resolver
	unsigned  map[string]bool
	metrics   *Metrics
	decisions *decisionLog
	logger    *slog.Logger
	rp        *httputil.ReverseProxy
	bodies    bodybudget.Budget
	auth      stall.Detector
	tracer    tracing.Tracer
}

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Connections == nil:
		return nil, errors.New("proxy: Config.Connections is required")
	case cfg.Claims == nil:
		return nil, errors.New("proxy: Config.Claims is required")
	case cfg.Nonces == nil:
		return nil, errors.New("proxy: Config.Nonces is required")
	}
	switch cfg.RotationEnforcement {
	case "":
		cfg.RotationEnforcement = credvault.RotationWarn
	case credvault.RotationOff, credvault.RotationWarn, credvault.RotationBlock:
	default:
		return nil, fmt.Errorf("proxy: unknown rotation enforcement %q", cfg.RotationEnforcement)
	}
	for alias, id := range cfg.Aliases {
		if alias == "" || strings.Contains(alias, "/") || alias == "proxy" || alias == "mcp" {
			return nil, fmt.Errorf("proxy: alias %q is not a single free path segment", alias)
		}
		if err := credvault.ValidateConnectionID(id); err != nil {
			return nil, fmt.Errorf("proxy: alias %q: %w", alias, err)
		}
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxInflightBodyBytes <= 0 {
		cfg.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MCPTimeout <= 0 {
		cfg.MCPTimeout = DefaultMCPTimeout
	}
	h := &Handler{cfg: cfg, ips: clientip.Resolver{Trusted: cfg.TrustedProxies, PublicAuthority: cfg.PublicAuthority}, metrics: cfg.Metrics, logger: cfg.Logger}
	if h.metrics == nil {
		h.metrics, _ = NewMetrics(nil)
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DecisionLog != nil {
		h.decisions = &decisionLog{logger: cfg.DecisionLog, salt: cfg.LogSalt}
	}
	h.unsigned = make(map[string]bool, len(cfg.InsecureUnsignedConnections))
	for _, id := range cfg.InsecureUnsignedConnections {
		h.unsigned[id] = true
	}
	h.bodies.Max = cfg.MaxInflightBodyBytes
	h.auth.Timeout = cfg.StuckAfter
	h.tracer = tracing.New(cfg.TracerProvider, "github.com/idnhq/idn/proxy")
	h.verifier = &identity.Verifier{
		Clock:                  cfg.Clock,
		MaxAge:                 cfg.MaxAge,
		FutureSkew:             cfg.FutureSkew,
		InsecureSkipNonceCheck: true, // recorded after the claim check, below
		// The body is read after the nonce, so that no one the gateway
		// has not admitted makes it buffer a byte.
		InsecureSkipBodyCheck: true,
		Origin:                h.ips.Origin,
		MaxBodyBytes:          cfg.MaxBodyBytes,
	}
	transport := cfg.Transport
	if transport == nil {
		t := NewTransport()
		t.ResponseHeaderTimeout = max(cfg.Timeout, cfg.MCPTimeout)
		transport = t
	}
	if cfg.UpstreamTokens != nil {
		transport = &tokenRetry{base: transport, tokens: cfg.UpstreamTokens}
	}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      transport,
		ModifyResponse: h.upstreamResponded,
		ErrorHandler:   h.upstreamFailed,
		ErrorLog:       slogErrorLog(h.logger),
		BufferPool:     &bufferPool{},
	}
	return h, nil
}

func (h *Handler) now() time.Time {
	if h.cfg.Clock != nil {
		return h.cfg.Clock()
	}
	return time.Now()
}

// route is one parsed runtime path.
type route struct {
	mcp    bool
	connID string
	rest   string // escaped path after the connection id, "" or starting with "/"
}

// parseRoute recognises /proxy/{id}/…, /mcp/{id}/… and /<alias>/….
func (h *Handler) parseRoute(r *http.Request) (route, bool) {
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, "/") {
		return route{}, false
	}
	first, rest, _ := strings.Cut(p[1:], "/")
	if rest != "" || strings.HasSuffix(p, "/") {
		rest = "/" + rest
	}
	switch first {
	case "proxy", "mcp":
		id, tail, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
		if id == "" {
			return route{}, false
		}
		if tail != "" || strings.HasSuffix(rest, id+"/") {
			tail = "/" + tail
		}
		return route{mcp: first == "mcp", connID: id, rest: tail}, true
	}
	if id, ok := h.cfg.Aliases[first]; ok {
		return route{connID: id, rest: rest}, true
	}
	return route{}, false
}

// ServeHTTP runs the pipeline for one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if apierror.RequestIDFrom(r.Context()) == "" {
		apierror.RequestID(http.HandlerFunc(h.serve)).ServeHTTP(w, r)
		return
	}
	h.serve(w, r)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	var start time.Time
	if h.cfg.Activity != nil {
		start = time.Now()
	}
	h.metrics.inFlight.Inc()
	defer h.metrics.inFlight.Dec()
	rt, ok := h.parseRoute(r)
	if !ok || (rt.mcp && h.cfg.MCP == nil) {
		h.fail(w, r, newError(errcode.NotFound, nil), nil)
		return
	}
	ctx, span := h.tracer.Start(h.tracer.Extract(r.Context(), r.Header), "gateway.request", trace.SpanKindServer)
	defer span.End()
	if span.IsRecording() {
		kind := "proxy"
		if rt.mcp {
			kind = "mcp"
		}
		span.SetAttributes(attribute.String("http.request.method", textcap.Method(r.Method)), attribute.String("idn.route", kind),
			tracing.ConnectionID.String(textcap.Clip(rt.connID, textcap.Name)))
	}
	timeout := h.cfg.Timeout
	if rt.mcp {
		timeout = h.cfg.MCPTimeout
	}
	cancel := context.CancelFunc(func() {})
	if !rt.mcp || rt.rest != "" || r.Method != http.MethodGet {
		// An MCP session's event stream (GET /mcp/{id}) is the exception:
		// it lives as long as the session, and the MCP handler ends it
		// with the session or at shutdown.
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	if h.cfg.Activity != nil {
		ctx = context.WithValue(ctx, activityKey{}, &activityNote{start: start, rt: rt})
	}
	r = r.WithContext(ctx)
	if r.ContentLength > h.cfg.MaxBodyBytes {
		h.fail(w, r, newError(errcode.RequestBodyTooLarge, nil), nil)
		return
	}
	if !rt.mcp && !validRest(rt.rest) {
		h.fail(w, r, newError(errcode.ValidationError, nil), nil)
		return
	}

	caller, res, err := h.authenticate(r, rt.connID, rt.mcp)
	if err != nil {
		h.fail(w, r, err, caller)
		return
	}
	var body []byte
	if caller == nil { // the unsigned development bypass streams the body
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
	} else {
		b, held, err := h.checkBody(r, caller)
		defer h.bodies.Give(held)
		if err != nil {
			h.fail(w, r, err, caller)
			return
		}
		body = b
	}
	if !rt.mcp {
		if err := h.holdForApproval(r, rt, res, caller, body); err != nil {
			h.fail(w, r, err, caller)
			return
		}
	}
	r = r.WithContext(context.WithValue(r.Context(), authKey{}, &authState{caller: caller}))
	if rt.mcp {
		h.serveMCP(w, r, caller, res)
		return
	}
	h.forward(w, r, rt, res)
}

// Progress is a readiness check for the request path: it fails while a
// request has been authenticating for StuckAfter or longer, which no
// request does unless something in the path is wedged (a lock never
// released, a store that stopped answering). Liveness does not see that,
// as it takes no part in the path. Progress must be polled (a readiness
// probe does): a request wedged now is reported by the first poll at
// least StuckAfter after the poll that follows it.
func (h *Handler) Progress(context.Context) error {
	if err := h.auth.Check(h.now()); err != nil {
		return fmt.Errorf("proxy: request path stuck: %w", err)
	}
	return nil
}

// authenticate runs steps 1 to 4 of the pipeline, reading no body byte. It
// returns the verified caller (nil on the unsigned development bypass) and
// the connection.
func (h *Handler) authenticate(r *http.Request, connID string, mcp bool) (*identity.Caller, *credvault.Resolved, error) {
	defer h.auth.Enter().Leave()
	unsigned := h.cfg.InsecureAllowUnsigned || h.unsigned[connID]
	var caller *identity.Caller
	if !unsigned {
		_, span := h.tracer.Start(r.Context(), "gateway.verify", trace.SpanKindInternal)
		c, err := h.verifier.Verify(r)
		if err == nil && span.IsRecording() {
			// Before End: an ended span drops what is set on it.
			span.SetAttributes(tracing.Namespace.String(c.Namespace))
		}
		h.endStage(span, err)
		if err != nil {
			return nil, nil, err
		}
		caller = c
	}
	res, err := h.connection(r, connID, mcp)
	if err != nil {
		return caller, nil, err
	}
	if unsigned {
		return nil, res, nil
	}
	ctx, span := h.tracer.Start(r.Context(), "gateway.claim", trace.SpanKindInternal)
	err = h.checkClaim(ctx, r, caller, res.Connection)
	h.endStage(span, err)
	if err != nil {
		return caller, nil, err
	}
	_, span = h.tracer.Start(r.Context(), "gateway.nonce", trace.SpanKindInternal)
	err = h.cfg.Nonces.CheckNonce(r.Context(), caller.Namespace, caller.Nonce, caller.NonceUntil)
	h.endStage(span, err)
	if err != nil {
		switch classify(err).code {
		case errcode.AuthReplayDetected:
			h.metrics.replayDetected.Inc()
		case errcode.NonceStoreFull:
			h.metrics.nonceStoreFull.Inc()
		}
		return caller, nil, err
	}
	h.decisions.log(r.Context(), decision{
		kind: "auth", outcome: "allow", requestID: apierror.RequestIDFrom(r.Context()), connection: connID,
		namespace: caller.Namespace, subject: caller.Subject, publicKey: caller.PublicKey, keyID: caller.KeyID,
		client: h.ips.ClientAddr(r), method: r.Method,
	})
	return caller, res, nil
}

// endStage ends the span of a pipeline stage, marking it failed with
// err's code.
func (h *Handler) endStage(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		tracing.Fail(span, classify(err).code.String())
	}
	span.End()
}

// connection looks up id and applies the connection-level checks.
func (h *Handler) connection(r *http.Request, id string, mcp bool) (*credvault.Resolved, error) {
	res, ok := h.cfg.Connections.Lookup(id)
	if !ok {
		return nil, newError(errcode.ConnectionNotFound, nil)
	}
	if res == nil || res.Connection == nil {
		// A Connections implementation's mistake: refuse, never panic.
		h.logger.ErrorContext(r.Context(), "connection lookup returned no connection", "request_id", apierror.RequestIDFrom(r.Context()),
			"connection_id", id, "code", errcode.ConnectionMisconfigured.String())
		return nil, newError(errcode.ConnectionMisconfigured, nil)
	}
	c := res.Connection
	if c.Status == credvault.StatusDisabled {
		return nil, newError(errcode.ConnectionDisabled, nil)
	}
	if (c.Protocol == credvault.ProtocolMCP) != mcp {
		return nil, newError(errcode.ConnectionProtocolMismatch, nil)
	}
	if h.cfg.RotationEnforcement == credvault.RotationBlock && c.RotationOverdue(h.now(), h.cfg.RotationGrace) {
		return nil, newError(errcode.RotationRequired, nil)
	}
	return res, nil
}

// checkClaim looks up the caller's claim for the connection's service and,
// for an unapproved caller, submits one; a caller whose claim was revoked
// or rejected is answered AUTH_CLAIM_REVOKED or AUTH_CLAIM_REJECTED and
// files none. A submission runs under ctx, whose span the control plane's
// answer continues.
func (h *Handler) checkClaim(ctx context.Context, r *http.Request, caller *identity.Caller, c *credvault.Connection) error {
	service := c.ServiceSlug()
	_, err := h.cfg.Claims.Lookup(service, caller.Namespace, caller.Key)
	if errors.Is(err, claimcache.ErrLookupFailed) {
		// A 500 whose cause only the log can tell.
		h.logger.ErrorContext(r.Context(), "claims lookup failed", "request_id", apierror.RequestIDFrom(r.Context()),
			"connection_id", c.ID, "code", errcode.AuthClaimsLookupFailed.String(), "error", err)
	}
	if re, ok := errors.AsType[*claimcache.RevokedError](err); ok {
		// The owner revoked it: no new claim, the owner decides.
		return claimEnded(errcode.AuthClaimRevoked, re.ClaimID, "revoked", err)
	}
	if re, ok := errors.AsType[*claimcache.RejectedError](err); ok {
		return claimEnded(errcode.AuthClaimRejected, re.ClaimID, "rejected", err)
	}
	if err == nil || !errors.Is(err, claimcache.ErrNotApproved) || h.cfg.Submitter == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, submitTimeout)
	defer cancel()
	receipt, serr := h.cfg.Submitter.Submit(ctx, claimcache.Submission{
		ConnectionID: c.ID,
		Namespace:    caller.Namespace,
		PublicKey:    caller.PublicKey,
		Service:      service,
		AgentIP:      h.ips.ClientAddr(r).String(),
		Subject:      caller.Subject,
		AgentName:    caller.Name,
		Nonce:        caller.Nonce,
	})
	// The snapshot may have learnt the approval while the claim was
	// submitted, and the answer may be a receipt remembered from before
	// it: the snapshot wins, so an approved caller goes through and the
	// refusal never reports a status the snapshot has left behind.
	if _, lerr := h.cfg.Claims.Lookup(service, caller.Namespace, caller.Key); lerr == nil {
		return nil
	}
	if serr != nil {
		e := submitRefusal(serr, caller.Namespace)
		if e.code != errcode.AuthClaimSubmitRateLimited {
			level := slog.LevelInfo // the caller's own cause, told to it in full
			if e.code == errcode.AuthClaimSubmitFailed {
				level = slog.LevelWarn // the operator's to fix
			}
			h.logger.Log(r.Context(), level, "claim submission refused", "request_id", apierror.RequestIDFrom(r.Context()),
				"connection_id", c.ID, "code", e.code.String(), "error", serr)
		}
		return e
	}
	switch receipt.Status {
	case "revoked":
		// The control plane files no claim for a revoked tuple either.
		return claimEnded(errcode.AuthClaimRevoked, receipt.ClaimID, receipt.Status, err)
	case "rejected":
		return claimEnded(errcode.AuthClaimRejected, receipt.ClaimID, receipt.Status, err)
	}
	if receipt.Status == "approved" {
		// Approved on the control plane, not yet in the snapshot: the
		// next refresh lets the caller through.
		e := newError(errcode.AuthClaimsUnavailable, err)
		e.Message = "claim " + receipt.ClaimID + " is approved, but this gateway has not loaded the approval yet; retry shortly"
		e.extra = map[string]any{"claim_id": receipt.ClaimID, "claim_status": receipt.Status}
		return e
	}
	e := newError(errcode.AuthClaimRequired, err)
	e.extra = map[string]any{"claim_id": receipt.ClaimID, "claim_status": receipt.Status}
	return e
}

// claimEnded is the refusal of a caller whose claim the owner revoked or
// rejected: only the owner's approval of that claim lets it in.
func claimEnded(code errcode.Code, claimID, status string, cause error) *Error {
	e := newError(code, cause)
	e.extra = map[string]any{"claim_id": claimID, "claim_status": status}
	return e
}

// checkBody reads the body of an admitted caller and checks it against the
// signed content-digest, leaving r.Body readable from the start. It
// returns the body and the budget bytes to give back when the request is
// done.
func (h *Handler) checkBody(r *http.Request, caller *identity.Caller) ([]byte, int64, error) {
	body, held, err := h.bufferBody(r)
	if err != nil {
		return nil, held, err
	}
	return body, held, caller.CheckBody(body)
}

// Authorize runs the signed part of the pipeline for a request about
// connection c outside the runtime routes: signature, claim for c's
// service, nonce, then the body against content-digest (r.Body stays
// readable). The admin API uses it for test and discover when
// GATEWAY_REQUIRE_SIGNED_ADMIN_CHECKS is on. Errors are *Error.
func (h *Handler) Authorize(r *http.Request, c *credvault.Connection) error {
	caller, err := h.verifier.Verify(r)
	if err == nil {
		err = h.checkClaim(r.Context(), r, caller, c)
	}
	if err == nil {
		err = h.cfg.Nonces.CheckNonce(r.Context(), caller.Namespace, caller.Nonce, caller.NonceUntil)
	}
	if err == nil {
		var held int64
		_, held, err = h.checkBody(r, caller)
		h.bodies.Give(held)
	}
	if err != nil {
		e := classify(err)
		h.metrics.authReject.WithLabelValues(e.code.String()).Inc()
		return e
	}
	return nil
}

// fail answers with the envelope of err and records the rejection.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, caller *identity.Caller) {
	e := classify(err)
	status := e.code.Status()
	if status == http.StatusForbidden || status == http.StatusTooManyRequests || e.code == errcode.AuthClaimsUnavailable ||
		e.code == errcode.AuthClaimsLookupFailed || e.code == errcode.NonceStoreFull || e.code == errcode.NonceStoreUnavailable {
		h.metrics.authReject.WithLabelValues(e.code.String()).Inc()
	}
	d := decision{kind: "auth", outcome: "deny", code: e.code.String(), status: status,
		requestID: apierror.RequestIDFrom(r.Context()), client: h.ips.ClientAddr(r), method: r.Method}
	if caller != nil {
		d.namespace, d.subject, d.publicKey, d.keyID = caller.Namespace, caller.Subject, caller.PublicKey, caller.KeyID
	}
	h.decisions.log(r.Context(), d)
	if h.cfg.Activity != nil {
		h.recordActivity(r, caller, "", false, e.code.String(), status)
	}
	if h.tracer.On() {
		tracing.Fail(trace.SpanFromContext(r.Context()), e.code.String())
	}
	ae := e.api()
	if status == http.StatusServiceUnavailable {
		ae.RetryAfter = e.retryAfter()
	}
	apierror.Write(w, r, ae)
}

type authKey struct{}

// authState marks a request that passed the pipeline; caller is nil on the
// unsigned development bypass.
type authState struct{ caller *identity.Caller }

// CallerFrom returns the verified caller of a request that passed the
// Handler's pipeline (for Config.MCP). ok is false when the request did not
// come through the pipeline; caller is nil with ok true on the unsigned
// development bypass.
func CallerFrom(ctx context.Context) (caller *identity.Caller, ok bool) {
	st, ok := ctx.Value(authKey{}).(*authState)
	if !ok {
		return nil, false
	}
	return st.caller, true
}

// validRest reports whether the escaped rest of a route may be forwarded.
// Upstreams decode before they resolve, so the decoded form must have no
// "." or ".." segment (a %2F decodes into a separator, and "..;x" is ".."
// to servers that strip path parameters) and no backslash (a separator to
// some servers); either could climb out of the connection's base path.
func validRest(rest string) bool {
	decoded, err := url.PathUnescape(rest)
	if err != nil || strings.ContainsRune(decoded, '\\') {
		return false
	}
	for seg := range strings.SplitSeq(decoded, "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// joinUpstream builds the upstream URL: the connection's base (base_url
// with path_prefix) followed by the caller's escaped path and query, without
// re-encoding.
func joinUpstream(base *url.URL, rest, rawQuery string) (*url.URL, error) {
	raw := strings.TrimSuffix(base.EscapedPath(), "/") + rest
	if raw == "" {
		raw = "/"
	}
	path, err := url.PathUnescape(raw)
	if err != nil {
		return nil, err
	}
	u := *base
	u.Path, u.RawPath, u.RawQuery, u.Fragment, u.RawFragment = path, raw, rawQuery, "", ""
	return &u, nil
}

// slogErrorLog adapts the operational logger for httputil.ReverseProxy.
func slogErrorLog(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler(), slog.LevelWarn)
}
