package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy/mcpsettings"
)

// DefaultMaxBodyBytes bounds admin request bodies when Config.MaxBodyBytes
// is zero.
const DefaultMaxBodyBytes = 1 << 20

// Config configures the admin handler.
type Config struct {
	// Vault holds the connections and variables. Required.
	Vault *credvault.Vault
	// Access admits or refuses every request. Required: a nil Access is
	// refused by New rather than meaning "open".
	Access *Access
	// CatalogFile is the service catalog's JSON file
	// (GATEWAY_SERVICE_CATALOG_FILE). A missing file is created with the
	// default catalog on first use. Empty disables the catalog routes
	// (404 NOT_FOUND).
	CatalogFile string
	// Discover runs MCP tool discovery for the discover route; refresh is
	// "force" or "auto". The result is answered as JSON. It should persist
	// what it found (the gateway sets the connection's mcp_discovery
	// extension through Vault.Update). Nil answers 501
	// DISCOVERY_UNAVAILABLE. An error that carries a code (errcode.Error)
	// is answered with that code and its message, any other with 502
	// UPSTREAM_ERROR.
	Discover func(ctx context.Context, c *credvault.Connection, refresh string) (mcpsettings.Discovery, error)
	// ToolPins serves the tool-pins routes: the review of an MCP
	// connection's pinned tool definitions and their acceptance. Nil
	// answers them 501 DISCOVERY_UNAVAILABLE.
	ToolPins ToolPins
	// GuardCheck runs before test and discover, after the connection is
	// found and before any body byte is read: it gets the request as it
	// arrived and must leave r.Body readable from the start. The gateway
	// sets it to verify the signature, the approved claim, the nonce and
	// the body against the signed content-digest (proxy.Handler.Authorize)
	// when GATEWAY_REQUIRE_SIGNED_ADMIN_CHECKS is true. A non-nil error
	// refuses the request: answered with its code and that code's message
	// when it carries a code (errcode.Error), else with 403
	// ADMIN_FORBIDDEN; the error's own text goes to no answer. Nil
	// refuses test and discover with 403 ADMIN_FORBIDDEN, unless
	// InsecureUnguardedChecks.
	GuardCheck func(r *http.Request, c *credvault.Connection) error
	// CheckConnection runs before a connection is stored by create, or by
	// an update that changes its service slug. For an update it gets the
	// connection as the update would leave it. It runs outside the store's
	// transaction, so it may ask the network. A non-nil error refuses the
	// change: an error carrying a code (errcode.Error) is answered with
	// that code and the code's message. The gateway
	// refuses there a connection whose claims it could neither read nor
	// file. Nil accepts every connection.
	CheckConnection func(ctx context.Context, c *credvault.Connection) error
	// InsecureUnguardedChecks runs test and discover with no check beyond
	// Access when GuardCheck is nil, so that an admin token alone can make
	// the gateway use a stored credential. False (the zero value) refuses
	// them without a GuardCheck.
	InsecureUnguardedChecks bool
	// TestMCP tests an mcp connection for the test route, in place of the
	// HTTP request to its base URL that tests any other: a new MCP
	// session with the upstream server (initialize, then tools/list),
	// with the stored credential. It returns what the handshake learned,
	// even when it failed part way; a failure's error text becomes the
	// test result's error, shown to the caller, so it must carry no
	// secret (the gateway's come from mcpproxy's Proxy.Probe, scrubbed). Nil tests
	// an mcp connection as any other.
	TestMCP func(ctx context.Context, c *credvault.Connection) (mcpevent.Handshake, error)
	// TestTransport carries upstream probes of the test route (the
	// credential is injected on top of it). Nil means http.DefaultTransport.
	TestTransport http.RoundTripper
	// MaxBodyBytes bounds request bodies; larger ones answer 413
	// REQUEST_BODY_TOO_LARGE. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// OAuthTransport puts an access token on the test route's probe of a
	// connection in an OAuth mode (its one account), under the vault's
	// destination check. The gateway sets it to upstreamauth.Tokens'
	// Transport. Nil probes such a connection without a token.
	OAuthTransport func(res *credvault.Resolved, base http.RoundTripper) http.RoundTripper
	// RevokeAccount revokes an OAuth account's refresh token at its
	// provider (RFC 7009) when the account is disconnected or its
	// connection deleted; it reports whether the provider confirmed. The
	// gateway sets it to upstreamauth.Tokens.Revoke. Nil revokes nothing
	// there: the token is only forgotten.
	RevokeAccount func(ctx context.Context, res *credvault.Resolved, refreshToken string) (bool, error)
	// Logger receives operational messages, never secrets. Nil discards.
	Logger *slog.Logger
}

// Handler serves the admin API under /api/admin/.
type Handler struct {
	cfg       Config
	log       *slog.Logger
	handler   http.Handler
	catalogMu sync.Mutex
}

// New validates cfg and returns the handler. Mount it at /api/admin/ (it
// matches full paths).
func New(cfg Config) (*Handler, error) {
	if cfg.Vault == nil {
		return nil, errors.New("admin: Config.Vault is required")
	}
	if cfg.Access == nil {
		return nil, errors.New("admin: Config.Access is required (see NewAccess)")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	if h.log == nil {
		h.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/admin/connections", h.methods(map[string]http.HandlerFunc{
		http.MethodGet: h.listConnections, http.MethodPost: h.createConnection}))
	mux.HandleFunc("/api/admin/connections/{id}", h.methods(map[string]http.HandlerFunc{
		http.MethodGet: h.getConnection, http.MethodPatch: h.patchConnection, http.MethodDelete: h.deleteConnection}))
	mux.HandleFunc("/api/admin/connections/{id}/test", h.methods(map[string]http.HandlerFunc{http.MethodPost: h.testConnection}))
	mux.HandleFunc("/api/admin/connections/{id}/discover", h.methods(map[string]http.HandlerFunc{http.MethodPost: h.discoverConnection}))
	mux.HandleFunc("/api/admin/connections/{id}/tool-pins", h.methods(map[string]http.HandlerFunc{http.MethodGet: h.reviewToolPins}))
	mux.HandleFunc("/api/admin/connections/{id}/tool-pins/accept", h.methods(map[string]http.HandlerFunc{http.MethodPost: decideToolPins(h, h.AcceptToolPins)}))
	mux.HandleFunc("/api/admin/connections/{id}/tool-pins/reject", h.methods(map[string]http.HandlerFunc{http.MethodPost: decideToolPins(h, h.RejectToolPins)}))
	mux.HandleFunc("/api/admin/connections/{id}/rotate", h.methods(map[string]http.HandlerFunc{http.MethodPost: h.rotateConnection}))
	mux.HandleFunc("/api/admin/connections/{id}/accounts", h.methods(map[string]http.HandlerFunc{http.MethodDelete: h.disconnectAccount}))
	mux.HandleFunc("/api/admin/credential-variables", h.methods(map[string]http.HandlerFunc{
		http.MethodGet: h.listVariables, http.MethodPost: h.putVariable}))
	mux.HandleFunc("/api/admin/credential-variables/{key}", h.methods(map[string]http.HandlerFunc{http.MethodDelete: h.deleteVariable}))
	mux.HandleFunc("/api/admin/service-catalog", h.methods(map[string]http.HandlerFunc{
		http.MethodGet: h.getCatalog, http.MethodPut: h.putCatalog}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, r, apierror.Coded(errcode.NotFound, "no such admin route"))
	})
	h.handler = cfg.Access.Wrap(mux)
	return h, nil
}

// ServeHTTP gives the request an id (unless an outer apierror.RequestID
// already did) and serves it behind the access policy.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if apierror.RequestIDFrom(r.Context()) == "" {
		apierror.RequestID(h.handler).ServeHTTP(w, r)
		return
	}
	h.handler.ServeHTTP(w, r)
}

// methods dispatches on the method and answers others 405 with Allow.
func (h *Handler) methods(m map[string]http.HandlerFunc) http.HandlerFunc {
	allowed := make([]string, 0, len(m))
	for _, meth := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m[meth] != nil {
			allowed = append(allowed, meth)
		}
	}
	allow := strings.Join(allowed, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		if f := m[r.Method]; f != nil {
			f(w, r)
			return
		}
		w.Header().Set("Allow", allow)
		apierror.Write(w, r, apierror.Coded(errcode.MethodNotAllowed, "method not allowed; allowed: "+allow))
	}
}

// readBody reads the whole body within the limit. An empty body gives nil.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badRequest("request body could not be read")
	}
	return b, nil
}

// decodeStrict decodes one JSON value into dst, refusing unknown fields and
// trailing data. Messages name the problem, never the content.
func decodeStrict(body []byte, dst any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return badRequest("request body must be a JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("request body must hold exactly one JSON value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return badRequest("request body must hold exactly one JSON value")
	}
	return nil
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return badRequest("request body has the wrong JSON type")
		}
		return badRequest("field "+field+" has the wrong JSON type").With("field", field)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return badRequest("unknown field "+field).With("field", field)
	}
	return badRequest("request body is not valid JSON")
}

// subject is the subject the idn-subject header carries (decoded as
// agents encode it), which takes precedence over body fields naming the
// acting subject.
func subject(r *http.Request) (string, error) {
	s, err := identity.DecodeSubject(strings.TrimSpace(r.Header.Get("idn-subject")))
	if err != nil {
		return "", badRequest("idn-subject is not a subject: a malformed display string").With("field", "idn-subject")
	}
	return s, nil
}

// answer writes v with status, or err when there is one.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		writeError(w, r, h.log, err)
		return
	}
	apierror.WriteJSON(w, status, v)
}
