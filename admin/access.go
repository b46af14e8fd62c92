package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/clientip"
)

// AccessMode is GATEWAY_ADMIN_ACCESS_MODE.
type AccessMode string

// Admin access modes.
const (
	// AccessHybrid admits a loopback client or a valid bearer token.
	AccessHybrid AccessMode = "hybrid"
	// AccessLoopback admits loopback clients only; tokens are ignored.
	AccessLoopback AccessMode = "loopback"
	// AccessToken admits a valid bearer token only, from any address.
	AccessToken AccessMode = "token"
)

// ParseAccessMode parses "hybrid", "loopback" or "token"; empty means hybrid.
func ParseAccessMode(s string) (AccessMode, error) {
	switch m := AccessMode(s); m {
	case "":
		return AccessHybrid, nil
	case AccessHybrid, AccessLoopback, AccessToken:
		return m, nil
	}
	return "", fmt.Errorf("admin: access mode %q is not hybrid, loopback or token", s)
}

// minTokenLen is the shortest admin token accepted.
const minTokenLen = 16

// AccessConfig configures the admin access policy: the AccessOptions
// policy, and what the program composing it supplies.
type AccessConfig struct {
	AccessOptions

	// TrustedProxies are the networks whose X-Forwarded-For is believed
	// when deciding whether the client is on loopback. Empty means none.
	TrustedProxies []netip.Prefix
	// Logger receives one line per refused request (never the token). Nil
	// discards.
	Logger *slog.Logger
	// DecisionLog, when set, receives one JSON decision per request
	// ("kind":"admin", outcome allow or deny, the refusal's code and
	// reason, method, path, request id and the client address masked),
	// as the runtime's decision log does (GATEWAY_LOG_PROXY_REQUESTS).
	DecisionLog *slog.Logger
}

// AccessOptions is who may use the admin API. Its zero value is the safe
// default: hybrid mode, which needs a token, answering loopback names
// only, to no browser origin.
type AccessOptions struct {
	// Mode selects who is admitted. Zero means AccessHybrid.
	Mode AccessMode
	// Token is the bearer token (GATEWAY_ADMIN_TOKEN), at least 16 bytes.
	// Required in hybrid and token modes. In loopback mode it is optional
	// and admits nobody by itself: empty means that nothing can change
	// where or how a stored secret is sent, except the owner over pairing
	// (OwnerContext). In every mode, that change needs the token.
	Token string
	// Hosts are the host names or IP literals, besides loopback literals
	// and localhost, that a request may address in its Host
	// (GATEWAY_ADMIN_HOSTS): no port, no trailing dot, matched without
	// regard to case. Empty means loopback literals and localhost only.
	Hosts []string
	// AllowedOrigins are the browser origins ("https://dash.example.com")
	// admitted cross-origin, with CORS headers. Empty means no browser
	// origin is admitted.
	AllowedOrigins []string
}

// Access is the admin access policy. Its Wrap method is middleware.
type Access struct {
	mode      AccessMode
	tokenHash [32]byte
	hasToken  bool
	resolver  clientip.Resolver
	origins   map[string]bool
	hosts     map[string]bool // lower-cased names and canonical IP literals
	log       *slog.Logger
	decisions *slog.Logger // nil: no decision records
}

// NewAccess validates cfg and returns the policy. It refuses hybrid and
// token modes without a token of at least 16 bytes, origins that are not
// scheme://host[:port], and hosts that are not a bare name or IP literal.
func NewAccess(cfg AccessConfig) (*Access, error) {
	mode, err := ParseAccessMode(string(cfg.Mode))
	if err != nil {
		return nil, err
	}
	a := &Access{mode: mode, resolver: clientip.Resolver{Trusted: cfg.TrustedProxies}, origins: map[string]bool{}, hosts: map[string]bool{}, log: cfg.Logger, decisions: cfg.DecisionLog}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case cfg.Token != "" && len(cfg.Token) < minTokenLen:
		return nil, fmt.Errorf("admin: the admin token (GATEWAY_ADMIN_TOKEN) must have at least %d characters", minTokenLen)
	case cfg.Token != "":
		a.tokenHash, a.hasToken = sha256.Sum256([]byte(cfg.Token)), true
	case mode != AccessLoopback:
		return nil, fmt.Errorf("admin: access mode %s needs an admin token (GATEWAY_ADMIN_TOKEN) of at least %d characters", mode, minTokenLen)
	}
	for _, h := range cfg.Hosts {
		if !clientip.ValidHost(h) {
			return nil, fmt.Errorf("admin: host %q is not a name or IP literal without port (IPv6 in brackets)", h)
		}
		a.hosts[canonicalHost(h)] = true
	}
	for _, o := range cfg.AllowedOrigins {
		n, ok := normalizeOrigin(o)
		if !ok {
			return nil, fmt.Errorf("admin: allowed origin %q is not scheme://host[:port]", o)
		}
		a.origins[n] = true
	}
	return a, nil
}

func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(o), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}

// corsAllowHeaders are the request headers a browser may send to the admin
// API: auth, content type, request id and the signed-request headers used
// by signed admin checks.
const corsAllowHeaders = "Authorization, Content-Type, X-Request-Id, Signature, Signature-Input, Content-Digest, Idn-Namespace, Idn-Subject, Idn-Agent-Key, Idn-Agent-Cert"

var (
	errHost          = apierror.Coded(errcode.AdminForbidden, "admin access refused: the Host is not a loopback address, localhost or a name in GATEWAY_ADMIN_HOSTS")
	errNoCredentials = apierror.Coded(errcode.AdminUnauthorized, "admin access needs a bearer token")
	errForbidden     = apierror.Coded(errcode.AdminForbidden, "")
	errCrossSite     = apierror.Coded(errcode.OriginForbidden, "cross-site requests to the admin API are refused; add the origin to GATEWAY_ALLOWED_ORIGINS")
	errContentType   = apierror.Coded(errcode.UnsupportedMediaType, "admin requests with a body must have Content-Type: application/json")
)

// Wrap returns next behind the policy, in this order:
//
//  0. The Host the client addressed (a trusted proxy's X-Forwarded-Host,
//     else Host) must be a loopback literal (127.0.0.0/8 or ::1, with or
//     without port), localhost, or one of Hosts; else 403 ADMIN_FORBIDDEN.
//     A browser page on a name the attacker controls can have that name
//     resolve to 127.0.0.1 (DNS rebinding) and then read this API from a
//     loopback peer; it cannot make the browser send an allowed Host.
//  1. Browser checks: an Origin header not in AllowedOrigins, or (without
//     an Origin) Sec-Fetch-Site cross-site or same-site, is 403
//     ORIGIN_FORBIDDEN, as on the control plane. An allowed Origin gets CORS headers; its preflight
//     (OPTIONS with Access-Control-Request-Method) is answered 204 here.
//  2. Authentication per mode. The client address is the direct peer, or,
//     behind a trusted proxy, the right-most untrusted X-Forwarded-For
//     entry. A loopback peer that forwards (X-Forwarded-For, Forwarded or
//     X-Real-IP present) but is not a trusted proxy speaks for someone
//     else: it is not loopback (clientip.Resolver.IsLoopback). No usable
//     token → 401 ADMIN_UNAUTHORIZED (hybrid, token). A wrong token, in
//     any mode and from any address, → 403 ADMIN_FORBIDDEN; so does a
//     non-loopback client in loopback mode. Tokens are compared in
//     constant time. A request with the valid token, or with
//     OwnerContext, is marked as allowed to change where or how a stored
//     secret is sent. The handler checks that mark; a loopback peer alone
//     does not get it.
//  3. POST, PUT and PATCH with a body need Content-Type application/json
//     (415 UNSUPPORTED_MEDIA_TYPE): that is not a type a browser sends
//     cross-site without a CORS preflight.
func (a *Access) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checked, e, reason := a.check(w, r)
		a.decide(r, e, reason)
		if e != nil {
			a.log.Warn("admin access refused", "reason", reason, "method", r.Method, "path", r.URL.Path,
				"client", clientip.Mask(a.resolver.ClientAddr(r)), "request_id", apierror.RequestIDFrom(r.Context()))
			apierror.Write(w, r, e)
			return
		}
		if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, checked)
	})
}

// decide writes the decision record of r, refused with e (nil: admitted)
// for reason.
func (a *Access) decide(r *http.Request, e *apierror.Error, reason string) {
	if a.decisions == nil {
		return
	}
	attrs := []slog.Attr{slog.String("kind", "admin"), slog.String("outcome", "allow")}
	if e != nil {
		attrs = []slog.Attr{slog.String("kind", "admin"), slog.String("outcome", "deny"), slog.String("code", e.Code().String()), slog.String("reason", reason)}
	}
	if id := apierror.RequestIDFrom(r.Context()); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	attrs = append(attrs, slog.String("method", r.Method), slog.String("path", r.URL.Path))
	if ip := clientip.Mask(a.resolver.ClientAddr(r)); ip != "" {
		attrs = append(attrs, slog.String("client_ip", ip))
	}
	a.decisions.LogAttrs(r.Context(), slog.LevelInfo, "decision", attrs...)
}

type secretAuthorityKey struct{}

// OwnerContext marks requests made with the returned context as the
// namespace owner's. The in-process caller that makes them vouches for
// that: the pairing client, whose RPCs come from the owner's passkey
// session over the gateway's signed connection. Such a request is
// admitted in every mode. It may change where or how a stored secret is
// sent without the admin token.
// Nothing a client sends can set it; never give a network listener a
// handler that adds it.
func OwnerContext(ctx context.Context) context.Context {
	return context.WithValue(withSecretAuthority(ctx), relayedKey{}, true)
}

type relayedKey struct{}

// relayed reports whether ctx is of an owner's request relayed by the
// control plane (OwnerContext), which may not lift an approval rule.
func relayed(ctx context.Context) bool {
	ok, _ := ctx.Value(relayedKey{}).(bool)
	return ok
}

// withSecretAuthority marks a request as allowed to change where or how a
// stored secret is sent: the owner's (OwnerContext), or one that
// presented the admin token.
func withSecretAuthority(ctx context.Context) context.Context {
	return context.WithValue(ctx, secretAuthorityKey{}, true)
}

// maySendSecretsElsewhere reports whether ctx is of a request that
// presented the admin token or comes from the owner (OwnerContext): what
// a change of where or how a stored secret is sent needs, whatever the
// mode.
func maySendSecretsElsewhere(ctx context.Context) bool {
	ok, _ := ctx.Value(secretAuthorityKey{}).(bool)
	return ok
}

// check applies the policy; the request it returns is r, marked when it
// may change where or how a stored secret is sent.
func (a *Access) check(w http.ResponseWriter, r *http.Request) (*http.Request, *apierror.Error, string) {
	if !a.hostAllowed(a.resolver.Host(r)) {
		return nil, errHost, "host not allowed"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		n, ok := normalizeOrigin(origin)
		if !ok || !a.origins[n] {
			return nil, errCrossSite, "origin not allowed"
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After")
		w.Header().Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			return r, nil, "" // preflights carry no credentials
		}
	} else {
		switch strings.ToLower(r.Header.Get("Sec-Fetch-Site")) {
		case "cross-site", "same-site":
			return nil, errCrossSite, "cross-site fetch"
		}
	}
	elevated, e, reason := a.authenticate(r)
	if e != nil {
		return nil, e, reason
	}
	if elevated && !maySendSecretsElsewhere(r.Context()) {
		r = r.WithContext(withSecretAuthority(r.Context()))
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		if r.ContentLength == 0 {
			break // nothing to parse; browsers send Origin on POST, checked above
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return nil, errContentType, "content type"
		}
	}
	return r, nil, ""
}

// authenticate admits or refuses r per mode; elevated reports that it
// presented the valid token or comes from the owner.
func (a *Access) authenticate(r *http.Request) (elevated bool, e *apierror.Error, reason string) {
	if maySendSecretsElsewhere(r.Context()) {
		return true, nil, ""
	}
	presented := r.Header.Get("Authorization") != ""
	if presented && a.hasToken {
		tok, err := bearerToken(r)
		if err != nil {
			return false, errNoCredentials, "no bearer token"
		}
		h := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(h[:], a.tokenHash[:]) != 1 {
			return false, errForbidden, "wrong token"
		}
		elevated = true
	}
	switch a.mode {
	case AccessToken:
		if !elevated {
			return false, errNoCredentials, "no token"
		}
	case AccessLoopback:
		if !a.resolver.IsLoopback(r) {
			return false, errForbidden, "not loopback"
		}
	default:
		if !elevated && !a.resolver.IsLoopback(r) {
			return false, errNoCredentials, "no token"
		}
	}
	return elevated, nil, ""
}

// hostAllowed reports whether authority names a loopback literal,
// localhost or one of the configured hosts. The comparison is exact after
// lower-casing: "localhost." and "127.0.0.1.nip.io" are other names.
func (a *Access) hostAllowed(authority string) bool {
	if clientip.LoopbackHost(authority) {
		return true
	}
	host, _, ok := clientip.SplitAuthority(authority)
	return ok && a.hosts[canonicalHost(host)]
}

// ipLiteral parses an IPv4 literal or a bracketed IPv6 literal without
// zone.
func ipLiteral(host string) (netip.Addr, bool) {
	if s, ok := strings.CutPrefix(host, "["); ok {
		s, ok = strings.CutSuffix(s, "]")
		addr, err := netip.ParseAddr(s)
		return addr, ok && err == nil && addr.Is6() && addr.Zone() == ""
	}
	addr, err := netip.ParseAddr(host)
	return addr, err == nil && addr.Is4()
}

// canonicalHost is the form hosts are compared in: IP literals in
// netip's notation, names lower-cased.
func canonicalHost(host string) string {
	if addr, ok := ipLiteral(host); ok {
		if addr.Is6() {
			return "[" + addr.String() + "]"
		}
		return addr.String()
	}
	return strings.ToLower(host)
}

var errNoBearer = errors.New("no bearer token")

func bearerToken(r *http.Request) (string, error) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", errNoBearer
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", errNoBearer
	}
	return tok, nil
}
