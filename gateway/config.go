package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/replay"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Gateway. DataDir, MasterKey and (unless
// Proxy.InsecureAllowUnsigned) ControlPlaneURL are required; every other
// field works at its zero value, the safe default, and says what that value
// means. The policy of each part is that part's own options type, embedded
// as it is: a protection is turned off only by a field that says so (a
// negative number, credvault.RotationOff, an Insecure… switch).
type Config struct {
	// DataDir holds the credential store (gateway.db, unless Store is
	// set), the gateway's own
	// identity, the decision-log salt and the nonces kept across a
	// restart (NonceSnapshotFile, NonceHorizonFile). It is created with
	// mode 0700. Required.
	DataDir string
	// MasterKey seals the stored credentials. Required: the zero key is
	// refused.
	MasterKey credvault.MasterKey
	// Store keeps the credential store's records. Nil means the SQLite
	// file gateway.db in DataDir (package sqlitestore). A store that
	// replicas share (package pgstore) makes them a fleet that serves the
	// same connections (docs/gateway.md, "Running a fleet"); every replica
	// then needs the same MasterKey. With Store set, the gateway's
	// identity, pairing key and pairing state live in it too, so a fleet
	// pairs once (PairingFiles); IdentityHome only seeds the identity of
	// a store that has none. The Gateway does not close it.
	Store credvault.Store
	// Holds keeps the calls held for their owner's approval and the
	// approvals' remaining uses (approval.Store). Nil with Store nil means
	// the SQLite file's, so a restart honours an approval. Nil with Store
	// set means this process's memory: a retry on another replica, or
	// after a restart, files a new request. A fleet gives every replica
	// its shared store's (pgstore's Store.Holds), so an approval counts
	// across them. The Gateway does not close it.
	Holds approval.Store
	// ControlPlaneURL is the control plane's base URL ("https://idn.example",
	// IDN_REGISTRY_URL in cmd/gateway): the gateway reads the
	// approved-claims feed there and files claims for callers it does not
	// know. Required unless Proxy.InsecureAllowUnsigned.
	ControlPlaneURL string
	// ServiceAPIKey is the control-plane API key presented for the claims
	// feed and claim submissions of every service. Empty means no shared
	// key: a service without a key of its own (ConnectionAPIKey) is read
	// and filed for on the gateway's signature alone when the gateway is
	// paired (Paired), and otherwise not at all (its reads fail with a
	// *MissingKeyError, and the admin API refuses to create a connection
	// for it, 409 SERVICE_API_KEY_MISSING).
	ServiceAPIKey string
	// ConnectionAPIKey, when set, returns the API key of one connection's
	// service; a non-empty answer wins over ServiceAPIKey. Nil means
	// ServiceAPIKey for every connection.
	ConnectionAPIKey func(connectionID string) string
	// Paired reports whether the gateway is paired with its owner's
	// dashboard at ControlPlaneURL. The control plane then admits the
	// gateway's own signature, without a service API key, for the feeds
	// of and claims for that owner's services (and no other's), so a
	// connection the owner adds needs no key and no restart. It is asked
	// at every feed read and submission that has no key, so a pairing made
	// while the gateway runs counts at once. Nil means the pairing state
	// `gateway pair` keeps in PairingFiles (package pairing): a gateway paired
	// there sends no key where it has none, and a control plane that does
	// not know its key refuses it (401 API_KEY_INVALID).
	Paired func() bool
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

	// Proxy is the signed runtime's policy (proxy.Options): the signature
	// window, the body and time limits, the trusted proxies, the path
	// aliases, rotation enforcement and the Insecure… switches. Its
	// TrustedProxies and PublicAuthority also apply to the admin API and
	// /metrics; its InsecureAllowUnsigned also lifts the claims readiness
	// check and the need for ControlPlaneURL, and makes New log a warning,
	// as InsecureUnsignedConnections does. MaxInflightBodyBytes must be at
	// least MaxBodyBytes.
	Proxy proxy.Options
	// MCP is the MCP proxy's policy (mcpproxy.Options): discovery cache,
	// circuit breaker, tool-call rate limit and sessions of the MCP
	// endpoint. Its MaxBodyBytes zero means Proxy.MaxBodyBytes and its
	// Timeout zero means Proxy.MCPTimeout, so that one setting bounds both
	// the /mcp request and its upstream work.
	MCP mcpproxy.Options
	// Claims is the approved-claims cache's timing (claimcache.Options):
	// how long a snapshot stays usable without a successful refresh, and
	// the feed's poll period.
	Claims claimcache.Options
	// ClaimSubmissions bounds the claims filed for callers the gateway
	// does not know (claimcache.SubmitterOptions), per connection and
	// namespace.
	ClaimSubmissions claimcache.SubmitterOptions
	// Nonces is the nonce store's memory budget (replay.Config). It holds
	// Nonces.MaxBytes / replay.Bytes nonces, each kept Proxy.MaxAge +
	// Proxy.FutureSkew, which sets the sustained request rate it allows
	// (docs/gateway.md).
	Nonces replay.Config
	// NonceStore, when set, records the nonces instead of the in-memory
	// store: every replica of a fleet sets one on the same backend
	// (replay/redisstore, GATEWAY_REDIS_URL), so a nonce used on any is
	// refused on all, restarts included. Nonces and the DataDir's nonce
	// files are then unused. The caller closes it after Gateway.Close.
	// Nil means the in-memory store of Nonces, which no other gateway
	// sees.
	NonceStore NonceStore
	// InsecureForgetNoncesOnRestart keeps the nonces in memory only: a
	// request accepted before a restart is accepted once more after it.
	// False (the zero value) keeps them across a restart in DataDir
	// (NonceSnapshotFile, NonceHorizonFile) under a lock that one
	// gateway at a time holds. A gateway that checks no signature (the
	// pairing link's admin API) sets it to share a DataDir.
	InsecureForgetNoncesOnRestart bool

	// Admin selects who may use the admin API and /metrics
	// (admin.AccessOptions). An empty Admin.Token means the token kept in
	// DataDir/admin-token (AdminToken), created at the first start.
	// Whatever the mode, changing where or how a stored secret is sent
	// needs the admin token (or the owner, over pairing).
	Admin admin.AccessOptions
	// AdminTimeout bounds an admin or /metrics request; zero means 20 s.
	AdminTimeout time.Duration
	// InsecureUnsignedAdminChecks lets the admin test and discover routes
	// run without a signed, approved caller. False (the zero value) requires
	// one, so a stolen admin token cannot make the gateway use a
	// credential on its own.
	InsecureUnsignedAdminChecks bool

	// Logger receives operational messages, each string value cut at
	// textcap.Text bytes. Nil discards them.
	Logger *slog.Logger
	// TracerProvider, when set, receives the runtime's spans (see
	// proxy.Config and mcpproxy.Config), and the callers' traceparent is
	// continued to the upstreams. Nil means no spans, at no cost.
	TracerProvider trace.TracerProvider
	// LogDecisions sends one JSON decision per authentication and upstream
	// outcome to Logger, with identities fingerprinted under a salt kept in
	// DataDir. False logs none.
	LogDecisions bool
	// NoActivityReports keeps the gateway's decisions to itself. False
	// (the zero value) reports each decision about an agent's request
	// (never a payload, query, header or secret) to ControlPlaneURL while
	// DataDir's pairing state says the gateway is paired, for the owner's
	// Activity page (pairing.Reporter).
	NoActivityReports bool
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
	case c.ControlPlaneURL == "" && !c.Proxy.InsecureAllowUnsigned:
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
	ttl, refresh := cmp.Or(c.Claims.TTL, claimcache.DefaultTTL), cmp.Or(c.Claims.RefreshInterval, claimcache.DefaultRefreshInterval)
	if ttl <= refresh {
		problem("Config.Claims.TTL (%s) must exceed Config.Claims.RefreshInterval (%s)", ttl, refresh)
	}
	defaultDuration(&c.AdminTimeout, 20*time.Second)
	if c.Proxy.MaxBodyBytes <= 0 {
		c.Proxy.MaxBodyBytes = proxy.DefaultMaxBodyBytes
	}
	if c.Proxy.MaxInflightBodyBytes <= 0 {
		c.Proxy.MaxInflightBodyBytes = proxy.DefaultMaxInflightBodyBytes
	}
	if c.Proxy.MaxInflightBodyBytes < c.Proxy.MaxBodyBytes {
		problem("Config.Proxy.MaxInflightBodyBytes must be at least Config.Proxy.MaxBodyBytes")
	}
	if c.MCP.MaxBodyBytes == 0 {
		c.MCP.MaxBodyBytes = c.Proxy.MaxBodyBytes
	}
	if c.MCP.Timeout == 0 {
		c.MCP.Timeout = c.Proxy.MCPTimeout
	}
	for _, h := range c.Admin.Hosts {
		if !clientip.ValidHost(h) {
			problem("Config.Admin.Hosts: %q is not a host name or IP literal without port (IPv6 in brackets)", h)
		}
	}
	if c.Proxy.PublicAuthority != "" {
		if host, _, ok := clientip.SplitAuthority(c.Proxy.PublicAuthority); !ok || !clientip.ValidHost(host) {
			problem("Config.Proxy.PublicAuthority: %q is not host[:port] (no scheme or path)", c.Proxy.PublicAuthority)
		}
	}
	for _, id := range c.Proxy.InsecureUnsignedConnections {
		if err := credvault.ValidateConnectionID(id); err != nil {
			problem("Config.Proxy.InsecureUnsignedConnections: %w", err)
		}
	}
	if c.Version == "" {
		c.Version = buildinfo.Version()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// Agents and upstreams choose names and error texts the gateway logs.
	c.Logger = slog.New(textcap.Handler(c.Logger.Handler(), textcap.Text))
	return c, errors.Join(errs...)
}

func defaultDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
