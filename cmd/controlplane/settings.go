package main

import (
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/envconf"
	"github.com/idnhq/idn/kit/tracing/otlpexport"
)

// settings is everything serve reads from the environment. Settings that
// only the passkey, webhook and registry work consumes are checked now too,
// so a bad deployment fails at start rather than later.
type settings struct {
	addr            string
	environment     string
	dataDir         string
	shutdownTimeout time.Duration
	log             envconf.Log
	tracing         otlpexport.Settings
	store           controlplane.StoreConfig
	server          controlplane.Config
	chain           chainSettings // the registry backend's, when BLOCKCHAIN_MODE is not disabled
}

// defaultAddr keeps the server on loopback until an operator chooses an
// address others can reach.
const defaultAddr = "127.0.0.1:8787"

var environments = []string{"local", "test", "development", "staging", "production"}

// readSettings reads every setting of serve through r, which collects the
// problems. Each variable is read whatever the others say, so --help lists
// them all. With ENVIRONMENT=local, JWT_SECRET and
// WEBHOOK_SECRET_ENCRYPTION_KEY are generated once into the data directory
// when unset.
func readSettings(r *envconf.Reader, getenv func(string) string) settings {
	var s settings
	s.environment = r.OneOf("ENVIRONMENT", "production", environments,
		"deployment kind; local generates the secrets, defaults the WebAuthn origin to http://localhost:8787, "+
			"sends the session cookie over http://localhost and lets CONTROLPLANE_PUBLIC_URL be unset")
	local := s.environment == "local"
	s.addr = r.String("CONTROLPLANE_ADDR", defaultAddr,
		"listen address (host:port); an address beyond loopback is logged as a warning at start")
	s.shutdownTimeout = r.Seconds("CONTROLPLANE_SHUTDOWN_TIMEOUT_SECONDS", 15, "seconds in-flight requests get to finish at shutdown")
	s.log = r.Log()
	s.tracing = otlpexport.Read(r, "idn-controlplane")
	s.dataDir, s.store = readStorage(r, getenv)

	c := &s.server
	jwtSecret, webhookKey := readSecrets(r, s.dataDir, local)
	c.JWTSecret = jwtSecret
	c.InsecureLocalhostCookie = local
	readNetwork(r, c, local)
	readLimits(r, c)
	c.Auth = readPasskeys(r, local)
	c.TestSeedToken = readSeed(r, s.environment)
	c.MetricsToken = r.Secret("CONTROLPLANE_METRICS_TOKEN",
		"bearer token that lets a remote scraper read /metrics (loopback clients need none); unset: loopback only")
	c.Webhooks = readWebhooks(r, webhookKey)
	c.Registry, s.chain = readRegistry(r)
	return s
}

// serveVars are the variables serve reads, for --help and the reference.
func serveVars() []envconf.Var {
	empty := func(string) string { return "" }
	r := envconf.New(empty)
	readSettings(r, empty)
	return r.Vars()
}

func readStorage(r *envconf.Reader, getenv func(string) string) (string, controlplane.StoreConfig) {
	provider := r.OneOf("ADAPTER_PROVIDER", controlplane.ProviderSQLite, []string{controlplane.ProviderSQLite, controlplane.ProviderPostgres},
		"database: sqlite (one file in IDN_DATA_DIR) or postgres (DATABASE_URL)")
	// The URL may carry a password.
	dbURL := r.Secret("DATABASE_URL", "PostgreSQL connection URL (required with ADAPTER_PROVIDER=postgres)")
	dir := r.String("IDN_DATA_DIR", "", "data directory (0700): controlplane.db and the secrets generated for ENVIRONMENT=local "+
		"(default $XDG_DATA_HOME/idn-controlplane, else ~/.local/share/idn-controlplane)")
	if dir == "" {
		dir = defaultDataDir(getenv)
	}
	if provider == controlplane.ProviderPostgres {
		if dbURL == "" {
			r.Problemf("DATABASE_URL is required with ADAPTER_PROVIDER=postgres")
		}
		return dir, controlplane.StoreConfig{Provider: provider, DatabaseURL: dbURL}
	}
	return dir, controlplane.StoreConfig{Provider: controlplane.ProviderSQLite, SQLitePath: filepath.Join(dir, "controlplane.db")}
}

// defaultDataDir is $XDG_DATA_HOME/idn-controlplane, else
// ~/.local/share/idn-controlplane.
func defaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "idn-controlplane")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "idn-controlplane"
	}
	return filepath.Join(home, ".local", "share", "idn-controlplane")
}

// readSecrets returns the session key and the webhook secrets' sealing
// key, generating them in dataDir when local and unset.
func readSecrets(r *envconf.Reader, dataDir string, local bool) (jwtSecret, webhookKey []byte) {
	jwt := r.Secret("JWT_SECRET", "HS256 key of owner session tokens, at least 32 characters (required; generated with ENVIRONMENT=local)")
	key := r.Secret("WEBHOOK_SECRET_ENCRYPTION_KEY",
		"key sealing webhook signing secrets at rest: standard base64 of 32 bytes (required; generated with ENVIRONMENT=local)")
	if local {
		jwt = orLocalSecret(r, jwt, dataDir, "jwt_secret")
		key = orLocalSecret(r, key, dataDir, "webhook_secret_encryption_key")
	}
	switch {
	case jwt == "" && !local:
		r.Problemf("JWT_SECRET is required (at least 32 characters; e.g. openssl rand -base64 32), or set ENVIRONMENT=local to generate one")
	case jwt != "" && len(jwt) < 32:
		r.Problemf("JWT_SECRET must be at least 32 characters")
	}
	if key == "" {
		if !local {
			r.Problemf("WEBHOOK_SECRET_ENCRYPTION_KEY is required (standard base64 of 32 bytes; e.g. openssl rand -base64 32)")
		}
		return []byte(jwt), nil
	}
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(k) != 32 {
		r.Problemf("WEBHOOK_SECRET_ENCRYPTION_KEY must be standard base64 of exactly 32 bytes")
		return []byte(jwt), nil
	}
	return []byte(jwt), k
}

// orLocalSecret returns value, or the secret stored under name in dir
// (created on first use) when value is empty.
func orLocalSecret(r *envconf.Reader, value, dir, name string) string {
	if value != "" {
		return value
	}
	secret, err := localSecret(dir, name)
	if err != nil {
		r.Problemf("IDN_DATA_DIR: cannot keep the generated %s in %s: %v", name, dir, err)
	}
	return secret
}

// readNetwork reads who may call from where and how the server names
// itself.
func readNetwork(r *envconf.Reader, c *controlplane.Config, local bool) {
	c.AllowedOrigins = readOrigins(r, "ALLOWED_ORIGINS", "http://localhost:8787",
		"comma-separated browser origins (scheme://host[:port]) that get CORS with credentials and may call mutating session routes")
	trusted, err := clientip.ParseCIDRs(r.String("CONTROLPLANE_TRUSTED_PROXY_CIDRS", "",
		"comma-separated networks whose X-Forwarded-For, -Proto and -Host are believed; unset: none"))
	if err != nil {
		r.Problemf("CONTROLPLANE_TRUSTED_PROXY_CIDRS: %v", err)
	}
	c.TrustedProxies = trusted
	// Without a public URL, DID documents name service endpoints after the
	// Host header of whoever asked, so only a local run may leave it out.
	c.PublicURL = r.String("CONTROLPLANE_PUBLIC_URL", "",
		"external base URL (scheme://host[:port]) that DID documents name as service endpoint (required unless ENVIRONMENT=local)")
	switch u, err := url.Parse(c.PublicURL); {
	case c.PublicURL == "" && !local:
		r.Problemf("CONTROLPLANE_PUBLIC_URL is required unless ENVIRONMENT=local: the external base URL (scheme://host[:port], e.g. https://idn.example) that DID documents name as service endpoint")
	case c.PublicURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != ""):
		r.Problemf("CONTROLPLANE_PUBLIC_URL: %q is not scheme://host[:port]", c.PublicURL)
	}
}

// readOrigins reads a comma-separated list of origins, each
// scheme://host[:port] (a trailing slash is dropped).
func readOrigins(r *envconf.Reader, name, def, doc string) []string {
	var out []string
	for _, o := range strings.Split(r.String(name, def, doc), ",") {
		o = strings.TrimSuffix(strings.TrimSpace(o), "/")
		if o == "" {
			continue
		}
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
			r.Problemf("%s: %q is not an origin (scheme://host[:port])", name, o)
			continue
		}
		out = append(out, o)
	}
	return out
}

// readLimits reads the quotas, lifetimes and the signature window.
func readLimits(r *envconf.Reader, c *controlplane.Config) {
	c.SessionTTL = r.Hours("GATEWAY_AUTH_SESSION_HOURS", 168, "owner session lifetime, in hours")
	c.MaxPendingClaims = r.Int("MAX_PENDING_AUTHORIZATIONS", 20, 1, "pending claims allowed per namespace and service")
	c.MaxPendingPerAgent = r.Int("MAX_PENDING_AUTHORIZATIONS_PER_AGENT", 5, 1,
		"of those, how many one agent network (an IPv4 address, or an IPv6 /64) may hold")
	c.PendingExpiry = r.Hours("PENDING_AUTHORIZATION_EXPIRY_HOURS", 24, "hours a claim may stay pending before it expires")
	c.MaxAPIKeys = r.Int("MAX_API_KEYS_PER_SERVICE", 5, 1, "active API keys allowed per service")
	c.MaxServices = r.Int("MAX_SERVICES_PER_NAMESPACE", controlplane.DefaultMaxServices, 1,
		"services one namespace may own; past it 409 SERVICE_LIMIT_REACHED")
	c.MaxOpenPairings = r.Int("MAX_OPEN_PAIRINGS_PER_NAMESPACE", controlplane.DefaultMaxOpenPairings, 1,
		"gateway pairing sessions one namespace may have open (neither used, ended nor expired); past it 429 PAIRING_LIMIT_REACHED")
	c.MaxGateways = r.Int("MAX_GATEWAYS_PER_NAMESPACE", controlplane.DefaultMaxGateways, 1,
		"paired gateways one namespace may have; past it 409 GATEWAY_LIMIT_REACHED")
	c.MaxSessions = r.Int("MAX_SESSIONS_PER_NAMESPACE", controlplane.DefaultMaxSessions, 1,
		"live owner sessions one namespace may have; past it a new session is refused with 429 SESSION_LIMIT_REACHED")
	c.Activity.MaxPerNamespace = r.Int64("MAX_ACTIVITY_PER_NAMESPACE", controlplane.DefaultMaxActivityPerNamespace, 1,
		"activity records (paired gateways' decisions) one namespace keeps; past it the oldest are deleted")
	c.Activity.Retention = time.Duration(r.Int("ACTIVITY_RETENTION_DAYS", controlplane.DefaultActivityRetentionDays, 1,
		"days an activity record is kept")) * 24 * time.Hour
	c.Activity.MaxUnsignedPerNamespace = r.Int64("MAX_UNSIGNED_ACTIVITY_PER_NAMESPACE", controlplane.DefaultMaxUnsignedActivityPerNamespace, 1,
		"activity records with no verified agent (the unsigned development bypass) one namespace keeps, apart from the signed ones; past it their oldest are deleted")
	c.Activity.UnsignedRetention = time.Duration(r.Int("UNSIGNED_ACTIVITY_RETENTION_DAYS", controlplane.DefaultUnsignedActivityRetentionDays, 1,
		"days a record with no verified agent, and a count of requests refused before a signature verified, is kept")) * 24 * time.Hour
	c.MaxInflightBodyBytes = r.Int64("CONTROLPLANE_MAX_INFLIGHT_BODY_BYTES", controlplane.DefaultMaxInflightBodyBytes, 1,
		"request body bytes held at once across all requests, in bytes; past it 503 REQUEST_BODY_CAPACITY_EXHAUSTED")
	c.SignedRatePerMinute = r.Int("CONTROLPLANE_SIGNED_RATE_LIMIT_PER_MINUTE", controlplane.DefaultSignedRatePerMinute, 1,
		"requests to the signed routes one client address (an IPv4 address, or an IPv6 /64) may make per minute, with an equal burst; past it 429 RATE_LIMITED")
	c.MaxLookupNonces = r.Int("CONTROLPLANE_LOOKUP_NONCE_MAX_ENTRIES", controlplane.DefaultMaxLookupNonces, 1,
		"nonces of the public signed lookups remembered in memory; when full, lookups get 503 NONCE_STORE_FULL")
	c.SignatureMaxAge = r.Seconds("GATEWAY_SIGNATURE_MAX_AGE_SECONDS", 300, "oldest signature accepted, in seconds")
	c.SignatureFutureSkew = r.Seconds("GATEWAY_SIGNATURE_FUTURE_SKEW_SECONDS", 30, "seconds a signature's creation time may lie in the future")
}

// readPasskeys reads the WebAuthn relying party.
func readPasskeys(r *envconf.Reader, local bool) controlplane.AuthConfig {
	def := ""
	if local {
		def = "http://localhost:8787"
	}
	a := controlplane.AuthConfig{
		Origins: readOrigins(r, "WEBAUTHN_ALLOWED_ORIGINS", def,
			"comma-separated origins where passkey ceremonies run, the dashboard's (required; http://localhost:8787 with ENVIRONMENT=local)"),
		RPID:            r.String("WEBAUTHN_RP_ID", "", "WebAuthn relying-party id (default: the host of the first WebAuthn origin)"),
		RPName:          r.String("WEBAUTHN_RP_NAME", "", "relying-party name authenticators show (default idn)"),
		ChallengeExpiry: r.Hours("CHALLENGE_EXPIRY_HOURS", 1, "hours a WebAuthn challenge stays usable"),
	}
	if len(a.Origins) == 0 {
		r.Problemf("WEBAUTHN_ALLOWED_ORIGINS is required: comma-separated dashboard origins such as https://dashboard.example")
	}
	return a
}

// readSeed returns the test seed endpoint's token, or "" when the endpoint
// is off.
func readSeed(r *envconf.Reader, environment string) string {
	enabled := r.Bool("ENABLE_TEST_SEED_ENDPOINT", false,
		"serve POST /v1/test/seed to loopback clients with IDN_TEST_SEED_TOKEN (ENVIRONMENT local or test only)")
	token := r.Secret("IDN_TEST_SEED_TOKEN", "token the test seed endpoint requires in X-IDN-Test-Seed-Token")
	switch {
	case !enabled:
		return ""
	case environment != "local" && environment != "test":
		r.Problemf("ENABLE_TEST_SEED_ENDPOINT=true needs ENVIRONMENT local or test, not %q", environment)
		return ""
	case token == "":
		r.Problemf("ENABLE_TEST_SEED_ENDPOINT=true needs IDN_TEST_SEED_TOKEN")
	}
	return token
}

// readWebhooks reads webhook delivery and its failure alerts.
func readWebhooks(r *envconf.Reader, secretKey []byte) controlplane.WebhookConfig {
	w := controlplane.WebhookConfig{
		SecretKey:                   secretKey,
		MaxPerService:               r.Int("MAX_WEBHOOKS_PER_SERVICE", 5, 1, "webhooks allowed per service"),
		RetryWindow:                 r.Hours("WEBHOOK_RETRY_WINDOW_HOURS", 24, "hours a failing delivery is retried before it is given up"),
		FailureThreshold:            r.Int("WEBHOOK_FAILURE_THRESHOLD", 10, 1, "failed attempts after which a delivery fails for good (the webhook stays enabled)"),
		InsecureAllowPrivateTargets: r.Bool("WEBHOOK_ALLOW_PRIVATE_TARGETS", false, "UNSAFE outside development: deliver to loopback and private addresses"),
		DNSResolverURL: r.String("WEBHOOK_DNS_RESOLVER_URL", "",
			"https URL of a DNS-over-HTTPS resolver for webhook hosts (default: the system resolver)"),
	}
	if u := w.DNSResolverURL; u != "" {
		if pu, err := url.Parse(u); err != nil || pu.Scheme != "https" || pu.Host == "" {
			r.Problemf("WEBHOOK_DNS_RESOLVER_URL must be an https URL (DNS over HTTPS)")
		}
	}
	w.Alert = readAlert(r)
	return w
}

// readAlert reads how alert e-mail reaches owners (and operator copies).
func readAlert(r *envconf.Reader) controlplane.AlertConfig {
	a := controlplane.AlertConfig{
		From:         r.String("WEBHOOK_ALERT_EMAIL_FROM", "", "sender address of alert e-mail; unset: no alert is sent"),
		To:           r.List("WEBHOOK_ALERT_EMAIL_TO", "comma-separated operator addresses that get copies of the alerts"),
		SMTPAddr:     r.String("WEBHOOK_ALERT_SMTP_ADDR", "", "SMTP server (host:port) alerts are sent through (default localhost:25)"),
		SMTPUsername: r.String("WEBHOOK_ALERT_SMTP_USERNAME", "", "SMTP user name"),
		SMTPPassword: r.Secret("WEBHOOK_ALERT_SMTP_PASSWORD", "SMTP password (default MAILER_API_KEY)"),
	}
	if mailer := r.Secret("MAILER_API_KEY", "SMTP password when WEBHOOK_ALERT_SMTP_PASSWORD is unset"); a.SMTPPassword == "" {
		a.SMTPPassword = mailer
	}
	if a.From != "" && !strings.Contains(a.From, "@") {
		r.Problemf("WEBHOOK_ALERT_EMAIL_FROM must be an e-mail address")
	}
	if a.From == "" && (len(a.To) > 0 || a.SMTPAddr != "") {
		r.Problemf("WEBHOOK_ALERT_EMAIL_TO and WEBHOOK_ALERT_SMTP_ADDR need WEBHOOK_ALERT_EMAIL_FROM, without which no alert is sent")
	}
	return a
}

// readRegistry reads how claim changes are written to the on-chain
// registry, and the chain settings of its backend (serve connects it).
func readRegistry(r *envconf.Reader) (controlplane.RegistryConfig, chainSettings) {
	mode := r.OneOf("BLOCKCHAIN_MODE", controlplane.RegistryDisabled,
		[]string{controlplane.RegistryDisabled, controlplane.RegistrySync, controlplane.RegistryMemory, controlplane.RegistryQueue},
		"how namespaces, approvals and revocations are written to the on-chain registry: disabled; sync (approve and revoke "+
			"wait for the mined write); memory (an in-process queue, lost on restart); queue (a durable queue in the database)")
	needer := ""
	if mode != controlplane.RegistryDisabled {
		needer = "BLOCKCHAIN_MODE=" + mode
	}
	return controlplane.RegistryConfig{Mode: mode}, readChain(r, needer, true)
}
