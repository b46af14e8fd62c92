package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/buildinfo"
	"github.com/idnhq/idn/internal/clientip"
	"github.com/idnhq/idn/proxy"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Gateway. DataDir, MasterKey and (unless
// InsecureAllowUnsigned) ControlPlaneURL are required; every other field works
// at its zero value, and says what that value means.
type Config struct {
	// DataDir holds the credential store (gateway.db), the gateway's own
	// identity and the decision-log salt. It is created with mode 0700.
	// Required.
	DataDir string
	// MasterKey seals the stored credentials. Required: the zero key is
	// refused.
	MasterKey credvault.MasterKey
	// ControlPlaneURL is the control plane's base URL ("https://idn.example",
	// IDN_REGISTRY_URL in cmd/gateway): the gateway reads the
	// approved-claims feed there and files claims for callers it does not
	// know. Required unless InsecureAllowUnsigned.
	ControlPlaneURL string
	// ServiceAPIKey is the control-plane API key presented for the claims
	// feed and claim submissions of every service. Empty means every feed
	// read and submission fails until ConnectionAPIKey supplies a key.
	ServiceAPIKey string
	// ConnectionAPIKey, when set, returns the API key of one connection's
	// service; a non-empty answer wins over ServiceAPIKey. Nil means
	// ServiceAPIKey for every connection.
	ConnectionAPIKey func(connectionID string) string
	// Namespace is the gateway's own idn namespace, whose identity signs its
	// control-plane calls. Empty means "gateway".
	Namespace string
	// IdentityHome is the folder of the gateway's identity, created on first
	// start. Empty means DataDir/identity.
	IdentityHome string
	// CatalogFile is the admin API's service catalog. Empty means
	// DataDir/service-catalog.json (the built-in catalog while it is
	// missing).
	CatalogFile string

	// ClaimsTTL is how long a claims snapshot stays usable without a
	// successful refresh; zero means 30 s. ClaimsRefresh is the feed's poll
	// period; zero means 10 s. ClaimsTTL must exceed ClaimsRefresh.
	ClaimsTTL, ClaimsRefresh time.Duration

	// SignatureMaxAge and SignatureFutureSkew bound a signature's created
	// time; zero means 300 s and 30 s.
	SignatureMaxAge, SignatureFutureSkew time.Duration
	// NonceMaxBytes bounds the memory of the nonce store; zero means
	// replay.DefaultMaxBytes (256 MiB). It holds NonceMaxBytes /
	// replay.Bytes nonces, each kept SignatureMaxAge + SignatureFutureSkew,
	// which sets the sustained request rate it allows (docs/gateway.md).
	NonceMaxBytes int64
	// ClaimRateLimitPerMinute is how many claims one connection and
	// namespace may file per minute. Zero means 30; negative means no limit.
	ClaimRateLimitPerMinute int

	// MaxBodyBytes caps one request body; zero means 8 MiB.
	// MaxInflightBodyBytes caps the body bytes held at once across all
	// requests (503 REQUEST_BODY_CAPACITY_EXHAUSTED past it); zero means
	// 256 MiB.
	MaxBodyBytes, MaxInflightBodyBytes int64
	// ProxyTimeout bounds an /proxy request (zero: 120 s), MCPTimeout an
	// /mcp request or MCP upstream operation (zero: 90 s), AdminTimeout an
	// admin or /metrics request (zero: 20 s).
	ProxyTimeout, MCPTimeout, AdminTimeout time.Duration

	// MCPDiscoveryTTL is how long an MCP tool discovery is fresh; zero means
	// 300 s. MCPDiscoveryStaleIfError is how long past it a stale discovery
	// is served while the upstream fails; zero means 3600 s, negative never.
	MCPDiscoveryTTL, MCPDiscoveryStaleIfError time.Duration
	// MCPBreakerFailures is how many consecutive upstream failures open an
	// MCP connection's circuit breaker; zero means 3, negative disables the
	// breaker. MCPBreakerCooldown is how long it stays open; zero means 10 s.
	MCPBreakerFailures int
	MCPBreakerCooldown time.Duration
	// MCPToolCallRateLimitPerMinute is the tool-call rate per connection and
	// namespace. Zero means 120; negative means no limit.
	MCPToolCallRateLimitPerMinute int
	// MCPSessionIdleTimeout ends a session of the MCP endpoint
	// /mcp/{connection_id} that has had no request for this long; zero
	// means 10 minutes. MCPMaxSessions bounds the sessions open at once;
	// zero means 1000. MCPMaxSessionsPerKey and MCPMaxSessionsPerNamespace
	// are each caller key's and each namespace's share of them (zero means
	// 32 and 128, each capped by the one above): a caller opening a session
	// past its key's or namespace's share, or in a full pool, evicts its
	// own least recently used session; only a caller whose namespace holds
	// none is answered 503 MCP_SESSIONS_EXHAUSTED by a full pool.
	MCPSessionIdleTimeout      time.Duration
	MCPMaxSessions             int
	MCPMaxSessionsPerKey       int
	MCPMaxSessionsPerNamespace int

	// AdminAccess selects who may use the admin API and /metrics. Zero
	// means admin.AccessHybrid. Whatever the mode, changing where or how a
	// stored secret is sent needs the admin token (or the owner, over
	// pairing).
	AdminAccess admin.AccessMode
	// AdminToken is the admin bearer token, at least 16 bytes. Empty means
	// the token kept in DataDir/admin-token (AdminToken), created at the
	// first start.
	AdminToken string
	// AdminHosts are the host names, besides loopback literals and
	// localhost, the admin API and /metrics answer to. Empty means none.
	AdminHosts []string
	// AllowedOrigins are the browser origins admitted to the admin API
	// cross-origin. Empty means none.
	AllowedOrigins []string
	// InsecureUnsignedAdminChecks lets the admin test and discover routes
	// run without a signed, approved caller. False (the zero value) requires
	// one, so a stolen admin token cannot make the gateway use a
	// credential on its own.
	InsecureUnsignedAdminChecks bool

	// TrustedProxies are the networks whose X-Forwarded-* headers are
	// believed for the client address and the origin signatures are checked
	// against. Empty means none.
	TrustedProxies []netip.Prefix
	// PublicAuthority, when set, is the host[:port] every signature is
	// checked against, whatever Host a request names. Empty means the Host
	// the request names.
	PublicAuthority string
	// Aliases maps a first path segment to a connection id: /<alias>/{path}
	// behaves as /proxy/<id>/{path}. Nil means none.
	Aliases map[string]string

	// RotationEnforcement is what happens to a connection whose credential
	// is overdue for rotation. Zero means credvault.RotationWarn.
	// RotationGrace extends the due date; zero means none.
	RotationEnforcement credvault.RotationEnforcement
	RotationGrace       time.Duration

	// InsecureAllowUnsigned turns off signature, claim and replay checks on
	// every connection; InsecureUnsignedConnections on the listed
	// connection ids only. Development only; New logs a warning.
	InsecureAllowUnsigned       bool
	InsecureUnsignedConnections []string

	// Logger receives operational messages. Nil discards them.
	Logger *slog.Logger
	// TracerProvider, when set, receives the runtime's spans (see
	// proxy.Config and mcpproxy.Config), and the callers' traceparent is
	// continued to the upstreams. Nil means no spans, at no cost.
	TracerProvider trace.TracerProvider
	// LogDecisions sends one JSON decision per authentication and upstream
	// outcome to Logger, with identities fingerprinted under a salt kept in
	// DataDir. False logs none.
	LogDecisions bool
	// Version is what /health reports. Empty means the running binary's
	// module version and VCS revision.
	Version string
}

// withDefaults returns c with its zero fields filled in, or every problem
// found.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	problem := func(format string, args ...any) { errs = append(errs, fmt.Errorf("gateway: "+format, args...)) }
	if c.DataDir == "" {
		problem("Config.DataDir is required")
	}
	if c.MasterKey == (credvault.MasterKey{}) {
		problem("Config.MasterKey is required")
	}
	c.ControlPlaneURL = strings.TrimRight(c.ControlPlaneURL, "/")
	switch {
	case c.ControlPlaneURL == "" && !c.InsecureAllowUnsigned:
		problem("Config.ControlPlaneURL is required: the control plane's base URL, which serves the approved-claims feed")
	case c.ControlPlaneURL != "" && !strings.HasPrefix(c.ControlPlaneURL, "http://") && !strings.HasPrefix(c.ControlPlaneURL, "https://"):
		problem("Config.ControlPlaneURL must be an http or https URL")
	}
	if c.Namespace == "" {
		c.Namespace = "gateway"
	}
	if err := identity.ValidNamespace(c.Namespace); err != nil {
		problem("Config.Namespace: %w", err)
	}
	if c.IdentityHome == "" && c.DataDir != "" {
		c.IdentityHome = filepath.Join(c.DataDir, "identity")
	}
	if c.CatalogFile == "" && c.DataDir != "" {
		c.CatalogFile = filepath.Join(c.DataDir, "service-catalog.json")
	}
	defaultDuration(&c.ClaimsTTL, 30*time.Second)
	defaultDuration(&c.ClaimsRefresh, 10*time.Second)
	if c.ClaimsTTL <= c.ClaimsRefresh {
		problem("Config.ClaimsTTL (%s) must exceed Config.ClaimsRefresh (%s)", c.ClaimsTTL, c.ClaimsRefresh)
	}
	defaultDuration(&c.AdminTimeout, 20*time.Second)
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = proxy.DefaultMaxBodyBytes
	}
	if c.MaxInflightBodyBytes <= 0 {
		c.MaxInflightBodyBytes = proxy.DefaultMaxInflightBodyBytes
	}
	if c.MaxInflightBodyBytes < c.MaxBodyBytes {
		problem("Config.MaxInflightBodyBytes must be at least Config.MaxBodyBytes")
	}
	if c.AdminAccess == "" {
		c.AdminAccess = admin.AccessHybrid
	}
	if c.RotationEnforcement == "" {
		c.RotationEnforcement = credvault.RotationWarn
	}
	for _, h := range c.AdminHosts {
		if !clientip.ValidHost(h) {
			problem("Config.AdminHosts: %q is not a host name or IP literal without port (IPv6 in brackets)", h)
		}
	}
	if c.PublicAuthority != "" {
		if host, _, ok := clientip.SplitAuthority(c.PublicAuthority); !ok || !clientip.ValidHost(host) {
			problem("Config.PublicAuthority: %q is not host[:port] (no scheme or path)", c.PublicAuthority)
		}
	}
	for _, id := range c.InsecureUnsignedConnections {
		if err := credvault.ValidateConnectionID(id); err != nil {
			problem("Config.InsecureUnsignedConnections: %w", err)
		}
	}
	if c.Version == "" {
		c.Version = buildinfo.Version()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, errors.Join(errs...)
}

func defaultDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
