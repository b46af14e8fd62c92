// Package gatewayd composes a running idn gateway from the library
// packages: the credential vault, the claims cache, the nonce store, the MCP
// proxy, the admin API, health and metrics. cmd/gateway serve and the
// quickstart both run it; Settings holds everything the GATEWAY_* and IDN_*
// variables configure.
package gatewayd

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/clientip"
)

// Settings is the gateway's whole configuration.
type Settings struct {
	Addr          string
	DataDir       string
	MasterKey     credvault.MasterKey
	CatalogFile   string
	RegistryURL   string
	ServiceAPIKey string            // IDN_SERVICE_API_KEY
	ConnectionKey map[string]string // IDN_SERVICE_API_KEY_<CONNECTION_ID> by the variable's suffix
	Namespace     string            // GATEWAY_IDN_NAMESPACE
	IdentityHome  string            // GATEWAY_IDN_HOME

	ClaimsTTL, ClaimsRefresh         time.Duration
	DiscoveryTTL, DiscoveryStale     time.Duration
	MCPTimeout, ProxyTimeout         time.Duration
	AdminTimeout, ShutdownTimeout    time.Duration
	BreakerFailures                  int
	BreakerCooldown                  time.Duration
	ToolCallRatePerMinute            int
	ClaimRegistrationRatePerMinute   int
	SignatureMaxAge, SignatureFuture time.Duration
	NonceMaxEntries                  int
	MaxBodyBytes                     int64
	// MaxInflightBodyBytes (GATEWAY_MAX_INFLIGHT_BODY_BYTES, default 256
	// MiB, at least GATEWAY_MAX_REQUEST_BODY_BYTES) caps the request body
	// bytes the gateway buffers at once across all requests; past it a
	// request is answered 503 REQUEST_BODY_CAPACITY_EXHAUSTED with
	// Retry-After.
	MaxInflightBodyBytes int64

	AdminMode                admin.AccessMode
	AdminToken               string
	TrustedProxies           []netip.Prefix
	AllowedOrigins           []string
	RequireSignedAdminChecks bool
	// AdminHosts (GATEWAY_ADMIN_HOSTS) are the names, besides loopback
	// literals and localhost, the admin API and /metrics answer to.
	AdminHosts []string
	// PublicAuthority (GATEWAY_PUBLIC_AUTHORITY), when set, is the
	// host[:port] every signed request is verified against, whatever Host
	// it names; empty means the Host the request names.
	PublicAuthority string

	RotationEnforcement credvault.RotationEnforcement
	RotationGrace       time.Duration

	AllowUnsignedProxy       bool
	AllowUnsignedConnections []string
	LogProxyRequests         bool
	Aliases                  map[string]string
}

// DefaultDataDir is GATEWAY_DATA_DIR's default: $XDG_DATA_HOME/idn-gateway,
// else $HOME/.local/share/idn-gateway. It fails when neither is set.
func DefaultDataDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "idn-gateway"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "share", "idn-gateway"), nil
	}
	return "", errors.New("cannot find a data directory: set GATEWAY_DATA_DIR")
}

// LoadSettings reads every setting through getenv and validates them all,
// reporting every problem in one error.
func LoadSettings(getenv func(string) string, environ []string) (Settings, error) {
	p := &parser{getenv: getenv}
	s := Settings{
		Addr:          p.str("GATEWAY_ADDR", ":38100"),
		DataDir:       p.str("GATEWAY_DATA_DIR", ""),
		RegistryURL:   strings.TrimRight(p.str("IDN_REGISTRY_URL", ""), "/"),
		ServiceAPIKey: p.str("IDN_SERVICE_API_KEY", ""),
		Namespace:     p.str("GATEWAY_IDN_NAMESPACE", "gateway"),

		ClaimsTTL:                      p.seconds("GATEWAY_CLAIMS_CACHE_TTL_SECONDS", 30),
		ClaimsRefresh:                  p.seconds("GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS", 10),
		DiscoveryTTL:                   p.seconds("GATEWAY_MCP_DISCOVERY_CACHE_TTL_SECONDS", 300),
		DiscoveryStale:                 time.Duration(p.integer("GATEWAY_MCP_DISCOVERY_STALE_IF_ERROR_SECONDS", 3600, 0)) * time.Second,
		MCPTimeout:                     p.seconds("GATEWAY_MCP_TIMEOUT_SECONDS", 90),
		ProxyTimeout:                   p.seconds("GATEWAY_PROXY_TIMEOUT_SECONDS", 120),
		AdminTimeout:                   p.seconds("GATEWAY_ADMIN_TIMEOUT_SECONDS", 20),
		ShutdownTimeout:                p.seconds("GATEWAY_SHUTDOWN_TIMEOUT_SECONDS", 15),
		BreakerFailures:                p.integer("GATEWAY_MCP_CIRCUIT_BREAKER_FAILURES", 3, 0),
		BreakerCooldown:                p.seconds("GATEWAY_MCP_CIRCUIT_BREAKER_COOLDOWN_SECONDS", 10),
		ToolCallRatePerMinute:          p.integer("GATEWAY_MCP_TOOL_CALL_RATE_LIMIT_PER_MINUTE", 120, 0),
		ClaimRegistrationRatePerMinute: p.integer("GATEWAY_CLAIM_REGISTRATION_RATE_LIMIT_PER_MINUTE", 30, 0),
		SignatureMaxAge:                p.seconds("GATEWAY_SIGNATURE_MAX_AGE_SECONDS", 300),
		SignatureFuture:                p.seconds("GATEWAY_SIGNATURE_FUTURE_SKEW_SECONDS", 30),
		NonceMaxEntries:                p.integer("GATEWAY_NONCE_MAX_ENTRIES", 1_000_000, 1),
		MaxBodyBytes:                   int64(p.integer("GATEWAY_MAX_REQUEST_BODY_BYTES", 8<<20, 1)),
		MaxInflightBodyBytes:           int64(p.integer("GATEWAY_MAX_INFLIGHT_BODY_BYTES", 256<<20, 1)),

		AdminToken:               p.str("GATEWAY_ADMIN_TOKEN", ""),
		AllowedOrigins:           p.list("GATEWAY_ALLOWED_ORIGINS"),
		AdminHosts:               p.list("GATEWAY_ADMIN_HOSTS"),
		PublicAuthority:          p.str("GATEWAY_PUBLIC_AUTHORITY", ""),
		RequireSignedAdminChecks: p.boolean("GATEWAY_REQUIRE_SIGNED_ADMIN_CHECKS", true),
		RotationGrace:            time.Duration(p.integer("GATEWAY_ROTATION_GRACE_DAYS", 0, 0)) * 24 * time.Hour,
		AllowUnsignedProxy:       p.boolean("GATEWAY_ALLOW_UNSIGNED_PROXY", false),
		AllowUnsignedConnections: p.list("GATEWAY_ALLOW_UNSIGNED_CONNECTIONS"),
		LogProxyRequests:         p.boolean("GATEWAY_LOG_PROXY_REQUESTS", false),
	}
	if s.DataDir == "" {
		dir, err := DefaultDataDir(getenv)
		if err != nil {
			p.fail(err.Error())
		}
		s.DataDir = dir
	}
	s.IdentityHome = p.str("GATEWAY_IDN_HOME", filepath.Join(s.DataDir, "identity"))
	s.CatalogFile = p.str("GATEWAY_SERVICE_CATALOG_FILE", filepath.Join(s.DataDir, "service-catalog.json"))

	if raw := getenv("GATEWAY_MASTER_KEY"); raw == "" {
		p.fail("GATEWAY_MASTER_KEY is required (standard base64 of 32 random bytes; make one with 'gateway keygen')")
	} else if k, err := credvault.ParseMasterKey(raw); err != nil {
		p.fail("GATEWAY_MASTER_KEY: " + err.Error())
	} else {
		s.MasterKey = k
	}
	if mode, err := admin.ParseAccessMode(p.str("GATEWAY_ADMIN_ACCESS_MODE", "hybrid")); err != nil {
		p.fail("GATEWAY_ADMIN_ACCESS_MODE: " + err.Error())
	} else {
		s.AdminMode = mode
		if mode != admin.AccessLoopback && len(s.AdminToken) < 16 {
			p.fail(fmt.Sprintf("GATEWAY_ADMIN_TOKEN of at least 16 characters is required in %s mode "+
				"(make one with 'openssl rand -hex 32', or set GATEWAY_ADMIN_ACCESS_MODE=loopback)", mode))
		}
	}
	for _, h := range s.AdminHosts {
		if !clientip.ValidHost(h) {
			p.fail(fmt.Sprintf("GATEWAY_ADMIN_HOSTS: %q is not a host name or IP literal without port (IPv6 in brackets)", h))
		}
	}
	if s.PublicAuthority != "" {
		if host, _, ok := clientip.SplitAuthority(s.PublicAuthority); !ok || !clientip.ValidHost(host) {
			p.fail(fmt.Sprintf("GATEWAY_PUBLIC_AUTHORITY: %q is not host[:port] (no scheme or path)", s.PublicAuthority))
		}
	}
	if cidrs, err := clientip.ParseCIDRs(getenv("GATEWAY_TRUSTED_PROXY_CIDRS")); err != nil {
		p.fail("GATEWAY_TRUSTED_PROXY_CIDRS: " + err.Error())
	} else {
		s.TrustedProxies = cidrs
	}
	if re, err := credvault.ParseRotationEnforcement(p.str("GATEWAY_ROTATION_ENFORCEMENT", "warn")); err != nil {
		p.fail("GATEWAY_ROTATION_ENFORCEMENT: " + err.Error())
	} else {
		s.RotationEnforcement = re
	}
	if s.RegistryURL == "" && !s.AllowUnsignedProxy {
		p.fail("IDN_REGISTRY_URL is required: the control plane's base URL, which serves the approved-claims feed")
	} else if s.RegistryURL != "" && !strings.HasPrefix(s.RegistryURL, "http://") && !strings.HasPrefix(s.RegistryURL, "https://") {
		p.fail("IDN_REGISTRY_URL must be an http or https URL")
	}
	if s.MaxInflightBodyBytes < s.MaxBodyBytes {
		p.fail("GATEWAY_MAX_INFLIGHT_BODY_BYTES must be at least GATEWAY_MAX_REQUEST_BODY_BYTES")
	}
	if s.ClaimsTTL <= s.ClaimsRefresh {
		p.fail("GATEWAY_CLAIMS_CACHE_TTL_SECONDS must exceed GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS")
	}
	for _, id := range s.AllowUnsignedConnections {
		if err := credvault.ValidateConnectionID(id); err != nil {
			p.fail("GATEWAY_ALLOW_UNSIGNED_CONNECTIONS: " + err.Error())
		}
	}
	s.Aliases = map[string]string{}
	for _, pair := range p.list("GATEWAY_PATH_ALIASES") {
		alias, id, ok := strings.Cut(pair, "=")
		if !ok || alias == "" || strings.Contains(alias, "/") || credvault.ValidateConnectionID(id) != nil {
			p.fail(fmt.Sprintf("GATEWAY_PATH_ALIASES: %q is not alias=connection_id", pair))
			continue
		}
		s.Aliases[alias] = id
	}
	s.ConnectionKey = map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if suffix, ok := strings.CutPrefix(name, "IDN_SERVICE_API_KEY_"); ok && suffix != "" && value != "" {
			s.ConnectionKey[suffix] = value
		}
	}
	if err := identity.ValidNamespace(s.Namespace); err != nil {
		p.fail("GATEWAY_IDN_NAMESPACE: " + err.Error())
	}
	if len(p.problems) > 0 {
		return s, errors.New("invalid configuration:\n  - " + strings.Join(p.problems, "\n  - "))
	}
	return s, nil
}

// APIKeyFor returns the service API key the gateway presents for a
// connection: IDN_SERVICE_API_KEY_<ID upper-cased, '-' → '_'>, else
// IDN_SERVICE_API_KEY.
func (s *Settings) APIKeyFor(connectionID string) string {
	name := strings.ToUpper(strings.ReplaceAll(connectionID, "-", "_"))
	if k := s.ConnectionKey[name]; k != "" {
		return k
	}
	return s.ServiceAPIKey
}

type parser struct {
	getenv   func(string) string
	problems []string
}

func (p *parser) fail(msg string) { p.problems = append(p.problems, msg) }

func (p *parser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

func (p *parser) integer(name string, def, minimum int) int {
	raw := strings.TrimSpace(p.getenv(name))
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < minimum {
		p.fail(fmt.Sprintf("%s: %q is not a whole number >= %d", name, raw, minimum))
		return def
	}
	return n
}

func (p *parser) seconds(name string, def int) time.Duration {
	return time.Duration(p.integer(name, def, 1)) * time.Second
}

func (p *parser) boolean(name string, def bool) bool {
	raw := strings.TrimSpace(p.getenv(name))
	if raw == "" {
		return def
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		p.fail(fmt.Sprintf("%s: %q is not true or false", name, raw))
		return def
	}
	return b
}

func (p *parser) list(name string) []string {
	var out []string
	for _, f := range strings.Split(p.getenv(name), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
