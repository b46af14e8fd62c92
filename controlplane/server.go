package controlplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/dashboard"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"github.com/idnhq/idn/controlplane/internal/registrywriter"
	"github.com/idnhq/idn/controlplane/internal/signed"
	"github.com/idnhq/idn/controlplane/internal/web"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/actions"
	"github.com/idnhq/idn/controlplane/internal/activity"
	"github.com/idnhq/idn/controlplane/internal/gatewaylink"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/bodybudget"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/kit/tracing"
)

// Config configures a Server. Only Store and JWTSecret are required; every
// other zero value has the documented default.
type Config struct {
	// Store holds all state. Required.
	Store *Store
	// JWTSecret is the HS256 key of session tokens (JWT_SECRET), at least
	// 32 bytes. Required.
	JWTSecret []byte
	// SessionTTL is the session lifetime; zero means 7 days.
	SessionTTL time.Duration
	// AllowedOrigins lists the origins (scheme://host[:port]) whose browsers
	// may call the API with credentials (ALLOWED_ORIGINS): they get CORS
	// headers and may call mutating session routes. A request with an
	// Origin outside the list, or with Sec-Fetch-Site: cross-site, is
	// refused; requests without Origin (non-browser clients) pass. Empty
	// means every request that names an Origin is refused.
	AllowedOrigins []string
	// InsecureLocalhostCookie drops the Secure attribute of the session
	// cookie for requests that addressed http://localhost (ENVIRONMENT=local
	// only). False always sets Secure.
	InsecureLocalhostCookie bool
	// SessionCookieName names the owner session cookie; empty means
	// SessionCookie (idn_session). Cookies ignore ports: control planes
	// that share a host name (two quickstarts on localhost) each need
	// their own name, or signing in to one signs the owner out of the
	// other.
	SessionCookieName string

	// MaxPendingClaims is the pending claims allowed per namespace and
	// service (MAX_PENDING_AUTHORIZATIONS); zero means 20. Counting per
	// service keeps a flood through one service from refusing the claims
	// of the others.
	MaxPendingClaims int
	// MaxPendingPerAgent is how many of those one agent network (an IPv4
	// address, or an IPv6 /64) may hold
	// (MAX_PENDING_AUTHORIZATIONS_PER_AGENT); zero means 5.
	MaxPendingPerAgent int
	// MaxAPIKeys is the active keys allowed per service
	// (MAX_API_KEYS_PER_SERVICE); zero means 5.
	MaxAPIKeys int
	// Per-namespace quotas (quotas.go). MaxServices is the services one
	// namespace may own (MAX_SERVICES_PER_NAMESPACE); past it 409
	// SERVICE_LIMIT_REACHED. Zero means DefaultMaxServices (25).
	MaxServices int
	// MaxOpenPairings is the gateway pairing sessions one namespace may
	// have open, neither used, ended nor expired
	// (MAX_OPEN_PAIRINGS_PER_NAMESPACE); past it 429 PAIRING_LIMIT_REACHED
	// with Retry-After. Zero means DefaultMaxOpenPairings (5).
	MaxOpenPairings int
	// MaxGateways is the paired gateways one namespace may have
	// (MAX_GATEWAYS_PER_NAMESPACE); past it 409 GATEWAY_LIMIT_REACHED.
	// Zero means DefaultMaxGateways (25).
	MaxGateways int
	// MaxSessions is the live sessions one namespace may have
	// (MAX_SESSIONS_PER_NAMESPACE); past it a new session is refused with
	// 429 SESSION_LIMIT_REACHED and Retry-After. Zero means
	// DefaultMaxSessions (100).
	MaxSessions int
	// PendingExpiry is how long a claim may stay pending
	// (PENDING_AUTHORIZATION_EXPIRY_HOURS); zero means 24 hours.
	PendingExpiry time.Duration

	// SignatureMaxAge and SignatureFutureSkew bound the signature `created`
	// parameter; zero means 300 s and 30 s. Nonces are remembered for
	// their sum.
	SignatureMaxAge, SignatureFutureSkew time.Duration
	// SignedRatePerMinute is how many requests one client network (an IPv4
	// address, or an IPv6 /64) may make to the signed routes per minute,
	// with an equal burst (CONTROLPLANE_SIGNED_RATE_LIMIT_PER_MINUTE). Past
	// it they are answered 429 RATE_LIMITED with Retry-After before their
	// signature is verified and before any database access. Zero means
	// DefaultSignedRatePerMinute (600).
	SignedRatePerMinute int
	// MaxLookupNonces bounds the nonces of the public signed lookups (GET
	// /v1/namespaces/{namespace}, GET /.well-known/did/{did}), which are
	// kept in memory rather than in the database, so that a signer who
	// proves nothing writes nothing (CONTROLPLANE_LOOKUP_NONCE_MAX_ENTRIES).
	// When full, lookups are answered 503 NONCE_STORE_FULL until nonces
	// expire; no live nonce is forgotten early. Zero means
	// DefaultMaxLookupNonces (100,000).
	MaxLookupNonces int
	// TrustedProxies are the networks whose X-Forwarded-* headers are
	// believed when rebuilding the signed target URI and the client
	// address. Empty trusts none.
	TrustedProxies []netip.Prefix
	// MaxBodyBytes caps the body of an authenticated request (a verified
	// signature with, where the route needs it, a service API key; or an
	// owner session); zero means 1 MiB. A request whose sender is not
	// authenticated (sign-up, login) may send at most 64 KiB.
	MaxBodyBytes int64
	// MaxInflightBodyBytes caps the request body bytes held at once across
	// all requests (CONTROLPLANE_MAX_INFLIGHT_BODY_BYTES); a request that
	// would pass it is answered 503 REQUEST_BODY_CAPACITY_EXHAUSTED with
	// Retry-After. Zero means DefaultMaxInflightBodyBytes (64 MiB).
	MaxInflightBodyBytes int64

	// PublicURL is the external base URL (scheme://host[:port]) used in DID
	// service endpoints. Empty derives it from each request's Host (or a
	// trusted proxy's header), which the client chooses: leave it empty only
	// for local runs.
	PublicURL string

	// SigninLinks serves the redemption of the one-time dashboard sign-in
	// links Server.SigninLink makes (POST /v1/auth/signin-link, loopback
	// clients only), for a local deployment whose owners have no passkey
	// yet. TestSeedToken implies it.
	SigninLinks bool

	// BasePath is the path the control plane is mounted under, such as
	// "/idn" when an embedder serves it beside its own routes with
	// mux.Handle("/idn/", server): requests arrive with it, and every link,
	// redirect, DID service endpoint and dashboard request carries it.
	// Empty means the root. It starts with "/" and does not end with one.
	BasePath string

	// TestSeedToken enables POST /v1/test/seed for loopback clients that
	// present it in X-IDN-Test-Seed-Token. Empty (the default) means the
	// route does not exist. Set it only in local or test environments.
	TestSeedToken string

	// Metrics, when set, receives the control plane's Prometheus collectors
	// (requests by route and status with latencies, claims by status,
	// namespaces by pending claims, webhook queue and attempts, database
	// pool) and is served at GET /metrics to loopback clients and to
	// bearers of MetricsToken. Nil serves no metrics (404).
	Metrics *prometheus.Registry
	// MetricsToken lets a remote scraper read /metrics with
	// "Authorization: Bearer <token>". Empty allows loopback clients only.
	MetricsToken string
	// AccessLog, when set, receives one line per request: request id,
	// method, route pattern, status and duration (never the path, query,
	// headers or cookies), each string value cut at textcap.Text bytes.
	// Nil logs no requests.
	AccessLog *slog.Logger

	// Events receives claim lifecycle events; nil drops them.
	Events Events
	// Logger receives operational logs, each string value cut at
	// textcap.Text bytes; nil discards them.
	Logger *slog.Logger
	// TracerProvider, when set, receives a server span per request, named
	// for its route pattern, continuing the caller's traceparent. Nil means
	// none, at no cost. The store's spans are set by
	// StoreConfig.TracerProvider.
	TracerProvider trace.TracerProvider
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time

	// Auth configures passkey accounts (WebAuthn), see AuthConfig.
	Auth AuthConfig
	// Webhooks configures webhook delivery and alert e-mail, see
	// WebhookConfig.
	Webhooks WebhookConfig
	// Registry selects registry writes (BLOCKCHAIN_MODE) and their
	// backend, see RegistryConfig. The zero value writes nothing.
	Registry RegistryConfig
	// Gateways configures gateway pairing, see GatewayConfig.
	Gateways GatewayConfig
	// Activity bounds the decisions paired gateways report, see
	// ActivityConfig.
	Activity ActivityConfig
}

// ActivityConfig bounds the activity kept (package activity): its zero
// value keeps agents' records 30 days, at most 1,000,000 per namespace,
// and the unsigned noise 7 days, at most 100,000 records per namespace.
type ActivityConfig = activity.Config

// Defaults of ActivityConfig, as cmd/controlplane's settings name them.
const (
	DefaultActivityRetentionDays           = int(activity.DefaultRetention / (24 * time.Hour))
	DefaultMaxActivityPerNamespace         = activity.DefaultMaxPerNamespace
	DefaultUnsignedActivityRetentionDays   = int(activity.DefaultUnsignedRetention / (24 * time.Hour))
	DefaultMaxUnsignedActivityPerNamespace = activity.DefaultMaxUnsignedPerNamespace
)

// GatewayConfig configures gateway pairing (package gatewaylink). Its zero
// value is ready.
type GatewayConfig = gatewaylink.Config

// Server is the control-plane HTTP API. It is an http.Handler; it owns no
// listener and no goroutine (run Maintain periodically).
type Server struct {
	cfg      Config
	store    *Store
	log      *slog.Logger
	proxy    clientip.Resolver
	kit      *web.Kit
	sessions *ownerauth.Sessions
	accounts *ownerauth.Accounts
	gate     *signed.Gate // signed routes
	claims   *claims.Core
	mux      *routeMux
	obs      *observer
	tracer   tracing.Tracer
	hooks    *webhooks.Manager
	registry *registrywriter.Writer // nil: registry writes disabled
	gateways *gatewaylink.Link
	activity *activity.Activity
	actions  *actions.Actions
	pages    *dashboard.Dashboard
	lifecycle
}

// New validates cfg and returns the API handler.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("controlplane: Config.Store is required")
	}
	if len(cfg.JWTSecret) < 32 {
		return nil, errors.New("controlplane: Config.JWTSecret must be at least 32 bytes")
	}
	for _, o := range cfg.AllowedOrigins {
		if !web.ValidOrigin(o) {
			return nil, fmt.Errorf("controlplane: allowed origin %q is not scheme://host[:port]", o)
		}
	}
	if u, err := url.Parse(cfg.BasePath); cfg.BasePath != "" && (err != nil || u.Path != cfg.BasePath || u.Host != "" ||
		!strings.HasPrefix(cfg.BasePath, "/") || strings.HasSuffix(cfg.BasePath, "/") || strings.Contains(cfg.BasePath, "//")) {
		return nil, fmt.Errorf("controlplane: BasePath %q is not a path such as /idn", cfg.BasePath)
	}
	if cfg.PublicURL != "" && !web.ValidOrigin(strings.TrimSuffix(cfg.PublicURL, "/")) {
		return nil, fmt.Errorf("controlplane: PublicURL %q is not scheme://host[:port]", cfg.PublicURL)
	}
	cfg.PublicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	setDefault(&cfg.SessionTTL, 7*24*time.Hour)
	setDefault(&cfg.MaxPendingClaims, 20)
	setDefault(&cfg.MaxPendingPerAgent, 5)
	setDefault(&cfg.MaxAPIKeys, 5)
	setDefault(&cfg.MaxServices, DefaultMaxServices)
	setDefault(&cfg.MaxOpenPairings, DefaultMaxOpenPairings)
	setDefault(&cfg.MaxGateways, DefaultMaxGateways)
	setDefault(&cfg.MaxSessions, DefaultMaxSessions)
	setDefault(&cfg.PendingExpiry, 24*time.Hour)
	setDefault(&cfg.SignatureMaxAge, identity.DefaultMaxAge)
	setDefault(&cfg.SignatureFutureSkew, identity.DefaultFutureSkew)
	setDefault(&cfg.SignedRatePerMinute, DefaultSignedRatePerMinute)
	setDefault(&cfg.MaxLookupNonces, DefaultMaxLookupNonces)
	for _, n := range []int{cfg.SignedRatePerMinute, cfg.MaxLookupNonces, cfg.MaxServices, cfg.MaxOpenPairings, cfg.MaxGateways, cfg.MaxSessions} {
		if n < 0 {
			return nil, errors.New("controlplane: Config's rate limits and quotas must not be negative")
		}
	}
	setDefault(&cfg.MaxBodyBytes, 1<<20)
	setDefault(&cfg.MaxInflightBodyBytes, DefaultMaxInflightBodyBytes)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Callers choose names and texts the server logs: each is bounded.
	log = slog.New(textcap.Handler(log.Handler(), textcap.Text))
	if cfg.AccessLog != nil {
		cfg.AccessLog = slog.New(textcap.Handler(cfg.AccessLog.Handler(), textcap.Text))
	}
	s := &Server{cfg: cfg, store: cfg.Store, log: log, proxy: clientip.Resolver{Trusted: cfg.TrustedProxies}}
	s.kit = &web.Kit{Log: log, Clock: cfg.Clock, Proxy: s.proxy, PublicURL: cfg.PublicURL, Base: cfg.BasePath,
		AllowedOrigins: cfg.AllowedOrigins, MaxBodyBytes: cfg.MaxBodyBytes, Bodies: bodybudget.Budget{Max: cfg.MaxInflightBodyBytes}}
	var err error
	s.gate, err = signed.New(signed.Config{MaxAge: cfg.SignatureMaxAge, FutureSkew: cfg.SignatureFutureSkew,
		RatePerMinute: cfg.SignedRatePerMinute, MaxLookupNonces: cfg.MaxLookupNonces}, cfg.Store.db, s.kit)
	if err != nil {
		return nil, err
	}
	s.tracer = tracing.New(cfg.TracerProvider, "github.com/idnhq/idn/controlplane")
	s.sessions, err = ownerauth.NewSessions(ownerauth.SessionConfig{Secret: cfg.JWTSecret, TTL: cfg.SessionTTL,
		MaxSessions: cfg.MaxSessions, InsecureLocalhostCookie: cfg.InsecureLocalhostCookie, CookieName: cfg.SessionCookieName}, cfg.Store.db, s.kit)
	if err != nil {
		return nil, err
	}
	s.accounts, err = ownerauth.New(cfg.Auth, cfg.Store.db, s.kit, s.sessions, ownerauth.Hooks{
		NamespaceCreated: s.namespaceCreated,
		DeleteAccount:    s.deleteAccount,
		Mail:             s.alertMail(),
	})
	if err != nil {
		return nil, err
	}
	if err := s.initWebhooks(); err != nil {
		return nil, err
	}
	s.gateways, err = gatewaylink.New(cfg.Gateways, gatewaylink.Deps{
		DB:     cfg.Store.db,
		Kit:    s.kit,
		Owner:  s.sessions.Owner,
		Signed: gatewaylink.Signed{Verify: s.gate.Verify, RecordNonce: s.gate.RecordNonce},
		Quotas: gatewaylink.Quotas{OpenPairings: cfg.MaxOpenPairings, Gateways: cfg.MaxGateways},
		// Each gateway pins its owner's passkeys when paired, to check
		// owner-approved actions itself.
		OwnerKeys: s.ownerKeys,
	})
	if err != nil {
		return nil, err
	}
	// A gateway its owner paired reads the feeds of, and files claims
	// for, that owner's services without a service API key.
	s.claims = claims.New(claims.Config{MaxPendingClaims: cfg.MaxPendingClaims, MaxPendingPerAgent: cfg.MaxPendingPerAgent,
		MaxAPIKeys: cfg.MaxAPIKeys, MaxServices: cfg.MaxServices, PendingExpiry: cfg.PendingExpiry, Gateways: s.gateways},
		cfg.Store.claims, s.kit, s.gate, s.sessions.Owner, s.registry, claims.Hooks{Changed: s.publish})
	s.activity, err = activity.New(cfg.Activity, activity.Deps{
		DB:     cfg.Store.db,
		Kit:    s.kit,
		Owner:  s.sessions.Owner,
		Signed: activity.Signed{Verify: s.gate.Verify, RecordNonce: s.gate.RecordNonce, ReadBody: s.gate.ReadBody},
		Paired: s.gateways.PairedKey,
		ReconnectRequired: func(ctx context.Context, ns, service, gatewayID, connection, subject string, at time.Time) error {
			return s.hooks.ReconnectRequired(ctx, ns, service, gatewayID, connection, subject, at)
		},
	})
	if err != nil {
		return nil, err
	}
	s.actions, err = actions.New(actions.Config{}, actions.Deps{
		DB:          cfg.Store.db,
		Kit:         s.kit,
		Owner:       s.sessions.Owner,
		Signed:      actions.Signed{Verify: s.gate.Verify, RecordNonce: s.gate.RecordNonce, ReadBody: s.gate.ReadBody},
		Paired:      s.gateways.PairedKey,
		OwnsService: s.ownsService,
		Keys:        s.accounts.PinnedKeys,
		KeysAt:      s.accounts.PinnedKeysAt,
		Gateways:    s.pairedGateways,
		Send:        s.sendOwnerKeys,
		IsOffline:   gatewaylink.IsOffline,
		Requested:   s.actionRequested,
	})
	if err != nil {
		return nil, err
	}
	s.pages = dashboard.New(dashboard.Config{MaxAPIKeys: cfg.MaxAPIKeys, ExplorerURL: cfg.Registry.ExplorerURL,
		TestSeedToken: cfg.TestSeedToken, SigninLinks: cfg.SigninLinks, Base: cfg.BasePath}, dashboard.Deps{DB: cfg.Store.db, Kit: s.kit,
		Sessions: s.sessions, Accounts: s.accounts, Claims: s.claims, Webhooks: s.hooks, Gateways: s.gateways,
		Activity: s.activity, Actions: s.actions})
	obs, err := newObserver(s)
	if err != nil {
		return nil, fmt.Errorf("controlplane: metrics: %w", err)
	}
	s.obs = obs
	s.routes()
	return s, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func (s *Server) now() time.Time { return s.cfg.Clock() }

// ServeHTTP serves the API; every answer carries an X-Request-Id. An
// absolute-form request target naming another scheme than the connection's,
// or another authority than the address the request arrived on, is
// answered 400 REQUEST_TARGET_FOREIGN before any route sees it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.BasePath != "" {
		var ok bool
		if r, ok = s.underBase(r); !ok {
			apierror.Write(w, r, web.ErrNotFound)
			return
		}
	}
	r, release := s.kit.MeterBody(w, r)
	defer release()
	apierror.RequestID(s.traced(s.obs.wrap(s.proxy.RefuseForeignTarget(http.HandlerFunc(s.cors))))).ServeHTTP(w, r)
}

// underBase returns r addressed to its path below BasePath, or false when
// it is not under BasePath. RequestURI keeps the full path, which signed
// requests cover.
func (s *Server) underBase(r *http.Request) (*http.Request, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, s.cfg.BasePath)
	if !ok || rest != "" && rest[0] != '/' {
		return r, false
	}
	u := *r.URL
	u.Path = cmp.Or(rest, "/")
	u.RawPath = ""
	if raw, ok := strings.CutPrefix(r.URL.RawPath, s.cfg.BasePath); ok {
		u.RawPath = cmp.Or(raw, "/")
	}
	r2 := r.Clone(r.Context())
	r2.URL = &u
	return r2, true
}

// cors lets the dashboard origins of AllowedOrigins call the API with
// credentials (CORS, with preflight); other origins get no CORS headers and
// a refused preflight, so browsers keep them out.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	allowed := s.kit.OriginListed(origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		if !allowed {
			apierror.Write(w, r, web.ErrOriginForbidden)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")
		h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, X-Request-Id, Signature, Signature-Input, Content-Digest, "+
			"idn-namespace, idn-subject, idn-agent-key, idn-agent-cert")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if allowed {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Expose-Headers", "ETag, X-Request-Id, Retry-After")
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := newRouteMux()
	s.mux = m
	m.HandleFunc("GET /openapi.json", serveOpenAPI)
	m.HandleFunc("GET /health", s.health)
	m.HandleFunc("GET /health/live", s.healthLive)
	m.HandleFunc("GET /health/ready", s.healthReady)
	m.HandleFunc("GET /metrics", s.obs.serveMetrics)

	s.claims.Routes(m)

	if s.cfg.TestSeedToken != "" {
		m.HandleFunc("POST /v1/test/seed", s.seed)
	}
	s.accounts.Routes(m)
	s.hooks.Routes(m)
	s.gateways.Routes(m)
	s.activity.Routes(m)
	s.actions.Routes(m)
	s.pages.Routes(m)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { apierror.Write(w, r, web.ErrNotFound) })
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		apierror.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
		return
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": buildinfo.Version()})
}

// maintain runs one pass of the background work: pending claims older than
// PendingExpiry become expired, and expired nonces, sessions, gateway
// pairing sessions, WebAuthn challenges and rate-limit counters are
// deleted. Start runs it every minute; it is safe to run on several
// instances at once.
func (s *Server) maintain(ctx context.Context) error {
	n, err := s.claims.Maintain(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.InfoContext(ctx, "expired pending claims", "count", n)
	}
	if err := s.store.cleanup(ctx, s.now()); err != nil {
		return err
	}
	if err := s.gateways.Maintain(ctx); err != nil {
		return err
	}
	if err := s.activity.Maintain(ctx); err != nil {
		return err
	}
	if err := s.actions.Maintain(ctx); err != nil {
		return err
	}
	return s.accounts.Maintain(ctx)
}
