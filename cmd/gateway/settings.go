package main

import (
	"errors"
	"fmt"
	"github.com/idnhq/idn/gateway/gctune"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/kit/tracing/otlpexport"
	"github.com/idnhq/idn/replay"
)

// serveSettings is everything `gateway serve` reads from the environment:
// the server's own settings and the library's Config.
type serveSettings struct {
	addr            string
	shutdownDelay   time.Duration
	shutdownTimeout time.Duration
	redisURL        string // GATEWAY_REDIS_URL: nonces in Redis, shared by a fleet
	gogc            string // GOGC as set; "" means tuneGC picks gctune.Percent
	memoryLimit     int64  // GATEWAY_MEMORY_LIMIT_BYTES, or its default
	gomemlimit      string // GOMEMLIMIT as set; when set it wins over memoryLimit
	log             envconf.Log
	tracing         otlpexport.Settings
	gateway         gateway.Config
	databaseURL     string // GATEWAY_DATABASE_URL: the shared store, opened into gateway.Store
}

const dataDirDoc = "data folder: credential store, gateway identity, decision-log salt " +
	"(default $XDG_DATA_HOME/idn-gateway, else ~/.local/share/idn-gateway)"

// defaultDataDir is GATEWAY_DATA_DIR's default.
func defaultDataDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "idn-gateway"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "share", "idn-gateway"), nil
	}
	return "", errors.New("cannot find a data directory: set GATEWAY_DATA_DIR")
}

// readDataDir reads GATEWAY_DATA_DIR, or its default.
func readDataDir(r *envconf.Reader, getenv func(string) string) string {
	dir := r.String("GATEWAY_DATA_DIR", "", dataDirDoc)
	if dir == "" {
		var err error
		if dir, err = defaultDataDir(getenv); err != nil {
			r.Problemf("%v", err)
		}
	}
	return dir
}

// readStore reads what every command that opens the store needs: the data
// folder, the master key (--master-key, when given, wins) and the shared
// database, if any.
func readStore(r *envconf.Reader, getenv func(string) string, masterKeyFlag string) (dir string, key credvault.MasterKey, databaseURL string) {
	dir = readDataDir(r, getenv)
	databaseURL = r.Secret("GATEWAY_DATABASE_URL", "PostgreSQL URL of the credential store and approval holds a fleet of gateways shares; "+
		"empty keeps it in gateway.db in the data folder")
	raw := r.Secret("GATEWAY_MASTER_KEY", "master key sealing the stored credentials: standard base64 of 32 random bytes (required)")
	if masterKeyFlag != "" {
		raw = masterKeyFlag
	}
	if raw == "" {
		r.Problemf("GATEWAY_MASTER_KEY is required (standard base64 of 32 random bytes; make one with 'gateway keygen')")
	} else if k, err := credvault.ParseMasterKey(raw); err != nil {
		r.Problemf("GATEWAY_MASTER_KEY: %v (make one with 'gateway keygen')", err)
	} else {
		key = k
	}
	return dir, key, databaseURL
}

// readKeyFile reads the service API key of GATEWAY_SERVICE_API_KEY_FILE;
// set is IDN_SERVICE_API_KEY, which may not be given as well. Problems
// name the file, never its content.
func readKeyFile(r *envconf.Reader, path, set string) string {
	if set != "" {
		r.Problemf("set IDN_SERVICE_API_KEY or GATEWAY_SERVICE_API_KEY_FILE, not both")
		return set
	}
	b, err := os.ReadFile(path)
	if err != nil {
		r.Problemf("GATEWAY_SERVICE_API_KEY_FILE: %v", err)
		return ""
	}
	key := strings.TrimSpace(string(b))
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		r.Problemf("GATEWAY_SERVICE_API_KEY_FILE: %s does not hold one API key", path)
		return ""
	}
	return key
}

// storeVars are the variables of the commands that open the store.
func storeVars() []envconf.Var {
	r := envconf.New(func(string) string { return "" })
	readStore(r, func(string) string { return "" }, "")
	return r.Vars()
}

// serveVars are the variables of serve.
func serveVars() []envconf.Var {
	r := envconf.New(func(string) string { return "" })
	readServe(r, func(string) string { return "" }, nil, "")
	return r.Vars()
}

// readServe reads every GATEWAY_* and IDN_* setting of serve through r,
// which collects the problems.
func readServe(r *envconf.Reader, getenv func(string) string, environ []string, masterKeyFlag string) serveSettings {
	var s serveSettings
	c := &s.gateway
	s.addr = r.String("GATEWAY_ADDR", "127.0.0.1:38100", "listen address; an address beyond loopback is logged as a warning at start")
	c.DataDir, c.MasterKey, s.databaseURL = readStore(r, getenv, masterKeyFlag)
	c.ControlPlaneURL = strings.TrimRight(r.String("IDN_REGISTRY_URL", "",
		"control plane base URL, which serves the approved-claims feed (required unless GATEWAY_ALLOW_UNSIGNED_PROXY)"), "/")
	c.ServiceAPIKey = r.Secret("IDN_SERVICE_API_KEY", "control-plane service API key for the claims feed and claim submissions")
	if f := r.String("GATEWAY_SERVICE_API_KEY_FILE", "", "file holding IDN_SERVICE_API_KEY instead "+
		"(`controlplane provision --api-key-file` writes one), read at start"); f != "" {
		c.ServiceAPIKey = readKeyFile(r, f, c.ServiceAPIKey)
	}
	perConnection := r.Family("IDN_SERVICE_API_KEY_", "<CONNECTION_ID>",
		"service API key of one connection (its id upper-cased, '-' as '_'), instead of IDN_SERVICE_API_KEY", environ)
	if len(perConnection) > 0 {
		c.ConnectionAPIKey = func(id string) string { return perConnection[strings.ToUpper(strings.ReplaceAll(id, "-", "_"))] }
	}
	c.Namespace = r.String("GATEWAY_IDN_NAMESPACE", "gateway", "the gateway's own idn namespace, which signs its control-plane calls")
	c.IdentityHome = r.String("GATEWAY_IDN_HOME", "", "folder of the gateway's identity (default GATEWAY_DATA_DIR/identity)")
	c.CatalogFile = r.String("GATEWAY_SERVICE_CATALOG_FILE", "", "service catalog of the admin API (default GATEWAY_DATA_DIR/service-catalog.json)")

	c.Claims.TTL = r.Seconds("GATEWAY_CLAIMS_CACHE_TTL_SECONDS", 30, "seconds a claims snapshot stays usable without a successful refresh")
	c.Claims.RefreshInterval = r.Seconds("GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS", 10, "seconds between two polls of the claims feed")
	c.MCP.DiscoveryTTL = r.Seconds("GATEWAY_MCP_DISCOVERY_CACHE_TTL_SECONDS", 300, "seconds an MCP tool discovery stays fresh")
	c.MCP.StaleIfError = zeroMeansOff(time.Duration(r.Int("GATEWAY_MCP_DISCOVERY_STALE_IF_ERROR_SECONDS", 3600, 0,
		"seconds past freshness a stale discovery is served while the upstream fails; 0 never"))*time.Second, -1)
	c.Proxy.MCPTimeout = r.Seconds("GATEWAY_MCP_TIMEOUT_SECONDS", 90, "seconds an /mcp request or MCP upstream operation may take")
	c.MCP.AttemptTimeout = time.Duration(r.Int("GATEWAY_MCP_ATTEMPT_TIMEOUT_SECONDS", 0, 0,
		"seconds one HTTP attempt to an MCP upstream waits for its response headers (retried when safe); 0 means GATEWAY_MCP_TIMEOUT_SECONDS")) * time.Second
	c.Proxy.Timeout = r.Seconds("GATEWAY_PROXY_TIMEOUT_SECONDS", 120, "seconds an /proxy request may take")
	c.AdminTimeout = r.Seconds("GATEWAY_ADMIN_TIMEOUT_SECONDS", 20, "seconds an admin or /metrics request may take")
	s.shutdownTimeout = r.Seconds("GATEWAY_SHUTDOWN_TIMEOUT_SECONDS", 15, "seconds in-flight requests get to finish at shutdown")
	s.shutdownDelay = time.Duration(r.Int("GATEWAY_SHUTDOWN_DELAY_SECONDS", 0, 0,
		"seconds the gateway goes on serving, not ready, after SIGTERM before it stops taking connections; "+
			"set it above the load balancer's readiness check interval"+" times its failure count")) * time.Second
	s.redisURL = r.Secret("GATEWAY_REDIS_URL", "Redis holding the nonces of a fleet of gateways "+
		"(redis://host:port, ?master_name= for Sentinel, ?addr= for Cluster); unset keeps them in memory and GATEWAY_DATA_DIR")
	c.MCP.BreakerFailures = zeroMeansOff(r.Int("GATEWAY_MCP_CIRCUIT_BREAKER_FAILURES", 3, 0,
		"consecutive upstream failures that open an MCP connection's circuit breaker; 0 disables it"), -1)
	c.MCP.BreakerCooldown = r.Seconds("GATEWAY_MCP_CIRCUIT_BREAKER_COOLDOWN_SECONDS", 10, "seconds an open circuit breaker refuses calls")
	c.MCP.RateLimitPerMinute = zeroMeansOff(r.Int("GATEWAY_MCP_TOOL_CALL_RATE_LIMIT_PER_MINUTE", 120, 0,
		"tool calls per minute per connection and namespace; 0 disables the limit"), -1)
	c.MCP.SessionIdleTimeout = r.Seconds("GATEWAY_MCP_SESSION_IDLE_SECONDS", 600,
		"seconds a session of the MCP endpoint /mcp/{id} lasts without a request")
	c.MCP.MaxSessions = r.Int("GATEWAY_MCP_MAX_SESSIONS", 1000, 1,
		"sessions of the MCP endpoint open at once; a caller opening one more evicts its namespace's least recently used session, or is answered 503 MCP_SESSIONS_EXHAUSTED when its namespace has none")
	c.MCP.MaxSessionsPerKey = r.Int("GATEWAY_MCP_MAX_SESSIONS_PER_KEY", 32, 1,
		"sessions of the MCP endpoint one caller key holds open; one more evicts the key's least recently used session")
	c.MCP.MaxSessionsPerNamespace = r.Int("GATEWAY_MCP_MAX_SESSIONS_PER_NAMESPACE", 128, 1,
		"sessions of the MCP endpoint one namespace holds open; one more evicts the namespace's least recently used session")
	c.MCP.Replica = r.String("GATEWAY_REPLICA_NAME", "",
		"this replica's name in a fleet (1-63 of a-z, 0-9, inner -), put in its MCP session ids so that a session sent to another replica is answered 421 MCP_SESSION_MISDIRECTED")
	c.ClaimSubmissions.RatePerMinute = zeroMeansOff(r.Int("GATEWAY_CLAIM_REGISTRATION_RATE_LIMIT_PER_MINUTE", 30, 0,
		"claims one connection and namespace may file per minute; 0 disables the limit"), -1)
	c.Proxy.MaxAge = r.Seconds("GATEWAY_SIGNATURE_MAX_AGE_SECONDS", 300, "oldest signature accepted, in seconds")
	c.Proxy.FutureSkew = r.Seconds("GATEWAY_SIGNATURE_FUTURE_SKEW_SECONDS", 30, "seconds a signature's creation time may lie in the future")
	c.Nonces.MaxBytes = r.Int64("GATEWAY_NONCE_MEMORY_BYTES", replay.DefaultMaxBytes, 1<<20,
		"memory of the nonce store, in bytes (14 per nonce); past it requests are answered 503 NONCE_STORE_FULL")
	if n := r.Int("GATEWAY_NONCE_MAX_ENTRIES", 0, 1, "deprecated: nonces to make room for; use GATEWAY_NONCE_MEMORY_BYTES"); n > 0 {
		if strings.TrimSpace(getenv("GATEWAY_NONCE_MEMORY_BYTES")) != "" {
			r.Problemf("GATEWAY_NONCE_MAX_ENTRIES is deprecated and cannot be set with GATEWAY_NONCE_MEMORY_BYTES")
		}
		c.Nonces.MaxBytes = max(replay.MemoryFor(n), 1<<20)
	}
	s.memoryLimit = r.Int64("GATEWAY_MEMORY_LIMIT_BYTES", c.Nonces.MaxBytes+gctune.MemoryHeadroom, 1<<20,
		fmt.Sprintf("memory the Go runtime keeps the process within, in bytes (default: the nonce budget + %d MiB); GOMEMLIMIT, when set, wins", gctune.MemoryHeadroom>>20))
	if s.memoryLimit <= c.Nonces.MaxBytes {
		r.Problemf("GATEWAY_MEMORY_LIMIT_BYTES must exceed the nonce store's budget (%d bytes), which a busy gateway fills", c.Nonces.MaxBytes)
	}
	s.gomemlimit = r.Raw("GOMEMLIMIT", "the Go runtime's memory limit; when set, GATEWAY_MEMORY_LIMIT_BYTES is ignored")
	c.Proxy.MaxBodyBytes = r.Int64("GATEWAY_MAX_REQUEST_BODY_BYTES", 8<<20, 1, "largest request body, in bytes")
	c.Proxy.MaxInflightBodyBytes = r.Int64("GATEWAY_MAX_INFLIGHT_BODY_BYTES", 256<<20, 1,
		"request body bytes held at once across all requests; past it 503 REQUEST_BODY_CAPACITY_EXHAUSTED")
	if c.Proxy.MaxInflightBodyBytes < c.Proxy.MaxBodyBytes {
		r.Problemf("GATEWAY_MAX_INFLIGHT_BODY_BYTES must be at least GATEWAY_MAX_REQUEST_BODY_BYTES")
	}
	if c.Claims.TTL <= c.Claims.RefreshInterval {
		r.Problemf("GATEWAY_CLAIMS_CACHE_TTL_SECONDS must exceed GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS")
	}

	readAdmin(r, c)
	c.Proxy.RotationEnforcement = credvault.RotationEnforcement(r.OneOf("GATEWAY_ROTATION_ENFORCEMENT", "warn",
		[]string{"off", "warn", "block"}, "what an overdue credential rotation does"))
	c.Proxy.RotationGrace = time.Duration(r.Int("GATEWAY_ROTATION_GRACE_DAYS", 0, 0, "days added to every rotation due date")) * 24 * time.Hour

	c.Proxy.InsecureAllowUnsigned = r.Bool("GATEWAY_ALLOW_UNSIGNED_PROXY", false, "UNSAFE, development only: no signature, claim or replay check on any connection")
	c.Proxy.InsecureUnsignedConnections = r.List("GATEWAY_ALLOW_UNSIGNED_CONNECTIONS", "UNSAFE, development only: connection ids served without signature, claim or replay check")
	for _, id := range c.Proxy.InsecureUnsignedConnections {
		if err := credvault.ValidateConnectionID(id); err != nil {
			r.Problemf("GATEWAY_ALLOW_UNSIGNED_CONNECTIONS: %v", err)
		}
	}
	if c.ControlPlaneURL == "" && !c.Proxy.InsecureAllowUnsigned {
		r.Problemf("IDN_REGISTRY_URL is required: the control plane's base URL, which serves the approved-claims feed")
	} else if c.ControlPlaneURL != "" && !strings.HasPrefix(c.ControlPlaneURL, "http://") && !strings.HasPrefix(c.ControlPlaneURL, "https://") {
		r.Problemf("IDN_REGISTRY_URL must be an http or https URL")
	}
	c.LogDecisions = r.Bool("GATEWAY_LOG_PROXY_REQUESTS", false, "log one decision per authentication and upstream outcome (identities fingerprinted)")
	c.NoActivityReports = !r.Bool("GATEWAY_REPORT_ACTIVITY", true, "report each decision (never a payload, query, header or secret) to the control plane while paired, for the owner's Activity page")
	c.Proxy.Aliases = map[string]string{}
	for _, pair := range r.List("GATEWAY_PATH_ALIASES", "alias=connection_id pairs: /<alias>/{path} serves as /proxy/<connection_id>/{path}") {
		alias, id, ok := strings.Cut(pair, "=")
		if !ok || alias == "" || strings.Contains(alias, "/") || credvault.ValidateConnectionID(id) != nil {
			r.Problemf("GATEWAY_PATH_ALIASES: %q is not alias=connection_id", pair)
			continue
		}
		c.Proxy.Aliases[alias] = id
	}
	if err := identity.ValidNamespace(c.Namespace); err != nil {
		r.Problemf("GATEWAY_IDN_NAMESPACE: %v", err)
	}
	s.log = r.Log()
	s.tracing = otlpexport.Read(r, "idn-gateway")
	s.gogc = r.Raw("GOGC", fmt.Sprintf("garbage collector target (the gateway runs at %d unless it is set)", gctune.Percent))
	return s
}

// readAdmin reads the admin API's access settings.
func readAdmin(r *envconf.Reader, c *gateway.Config) {
	c.Admin.Mode = admin.AccessMode(r.OneOf("GATEWAY_ADMIN_ACCESS_MODE", "hybrid", []string{"hybrid", "loopback", "token"},
		"who may use the admin API and /metrics"))
	c.Admin.Token = readAdminToken(r)
	c.Admin.AllowedOrigins = r.List("GATEWAY_ALLOWED_ORIGINS", "browser origins admitted to the admin API cross-origin")
	c.Admin.Hosts = r.List("GATEWAY_ADMIN_HOSTS", "host names, besides loopback literals and localhost, the admin API answers to")
	for _, h := range c.Admin.Hosts {
		if !clientip.ValidHost(h) {
			r.Problemf("GATEWAY_ADMIN_HOSTS: %q is not a host name or IP literal without port (IPv6 in brackets)", h)
		}
	}
	c.Proxy.PublicAuthority = r.String("GATEWAY_PUBLIC_AUTHORITY", "", "host[:port] every signature is checked against, whatever Host a request names")
	if c.Proxy.PublicAuthority != "" {
		if host, _, ok := clientip.SplitAuthority(c.Proxy.PublicAuthority); !ok || !clientip.ValidHost(host) {
			r.Problemf("GATEWAY_PUBLIC_AUTHORITY: %q is not host[:port] (no scheme or path)", c.Proxy.PublicAuthority)
		}
	}
	c.InsecureUnsignedAdminChecks = !r.Bool("GATEWAY_REQUIRE_SIGNED_ADMIN_CHECKS", true,
		"admin test and discover need a signed, approved caller")
	cidrs, err := clientip.ParseCIDRs(r.Raw("GATEWAY_TRUSTED_PROXY_CIDRS", "networks whose X-Forwarded-* headers are believed"))
	if err != nil {
		r.Problemf("GATEWAY_TRUSTED_PROXY_CIDRS: %v", err)
	}
	c.Proxy.TrustedProxies = cidrs
}

// readAdminToken reads GATEWAY_ADMIN_TOKEN; empty means the token of the
// data directory (gateway.AdminToken).
func readAdminToken(r *envconf.Reader) string {
	tok := r.Secret("GATEWAY_ADMIN_TOKEN", "admin bearer token, at least 16 characters, needed to change where a stored secret is sent "+
		"(default: the one in GATEWAY_DATA_DIR/admin-token, made at first start; 'gateway admin-token' prints it)")
	if tok != "" && len(tok) < 16 {
		r.Problemf("GATEWAY_ADMIN_TOKEN must have at least 16 characters " +
			"(make one with 'openssl rand -hex 32', or leave it unset to use the one in the data directory)")
	}
	return tok
}

// zeroMeansOff maps a setting whose 0 turns something off to the
// library's value for off.
func zeroMeansOff[T int | time.Duration](v, off T) T {
	if v == 0 {
		return off
	}
	return v
}
