package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/internal/clientip"
)

// settings is everything read from the environment. Fields that only the
// passkey, webhook and registry work consumes are validated now, so a bad
// deployment fails at start rather than later.
type settings struct {
	addr        string
	environment string
	dataDir     string
	store       controlplane.StoreConfig
	server      controlplane.Config
}

var environments = map[string]bool{"local": true, "test": true, "development": true, "staging": true, "production": true}

// loadSettings reads and validates every setting and reports all problems
// in one error. With ENVIRONMENT=local, JWT_SECRET and
// WEBHOOK_SECRET_ENCRYPTION_KEY are generated once into the data directory
// when unset.
func loadSettings(getenv func(string) string) (settings, error) {
	var (
		s        settings
		problems []string
	)
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	str := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	positive := func(name string, def int) int {
		v := str(name, "")
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			bad("%s must be a positive integer, got %q", name, v)
			return def
		}
		return n
	}
	boolean := func(name string) bool {
		v := str(name, "false")
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("%s must be true or false, got %q", name, v)
		}
		return b
	}
	list := func(name string) []string {
		var out []string
		for _, v := range strings.Split(str(name, ""), ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	origins := func(name, def string) []string {
		var out []string
		for _, o := range strings.Split(str(name, def), ",") {
			o = strings.TrimSuffix(strings.TrimSpace(o), "/")
			if o == "" {
				continue
			}
			if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
				bad("%s: %q is not an origin (scheme://host[:port])", name, o)
				continue
			}
			out = append(out, o)
		}
		return out
	}

	s.environment = str("ENVIRONMENT", "production")
	if !environments[s.environment] {
		bad("ENVIRONMENT must be local, test, development, staging or production, got %q", s.environment)
	}
	local := s.environment == "local"
	s.addr = str("CONTROLPLANE_ADDR", ":8787")
	s.dataDir = str("IDN_DATA_DIR", defaultDataDir(getenv))

	switch provider := str("ADAPTER_PROVIDER", controlplane.ProviderSQLite); provider {
	case controlplane.ProviderSQLite:
		s.store = controlplane.StoreConfig{Provider: provider, SQLitePath: filepath.Join(s.dataDir, "controlplane.db")}
	case controlplane.ProviderPostgres:
		s.store = controlplane.StoreConfig{Provider: provider, DatabaseURL: str("DATABASE_URL", "")}
		if s.store.DatabaseURL == "" {
			bad("DATABASE_URL is required with ADAPTER_PROVIDER=postgres")
		}
	default:
		bad("ADAPTER_PROVIDER must be sqlite or postgres, got %q", provider)
	}

	jwtSecret := str("JWT_SECRET", "")
	var webhookSecretKey []byte
	webhookKey := str("WEBHOOK_SECRET_ENCRYPTION_KEY", "")
	if local && (jwtSecret == "" || webhookKey == "") {
		var err error
		if jwtSecret == "" {
			jwtSecret, err = localSecret(s.dataDir, "jwt_secret")
		}
		if err == nil && webhookKey == "" {
			webhookKey, err = localSecret(s.dataDir, "webhook_secret_encryption_key")
		}
		if err != nil {
			bad("generate local secrets in IDN_DATA_DIR %s: %v", s.dataDir, err)
		}
	}
	switch {
	case jwtSecret == "":
		bad("JWT_SECRET is required (at least 32 characters; e.g. openssl rand -base64 32), or set ENVIRONMENT=local to generate one")
	case len(jwtSecret) < 32:
		bad("JWT_SECRET must be at least 32 characters")
	}
	if webhookKey == "" {
		bad("WEBHOOK_SECRET_ENCRYPTION_KEY is required (standard base64 of 32 bytes; e.g. openssl rand -base64 32)")
	} else if k, err := base64.StdEncoding.DecodeString(webhookKey); err != nil || len(k) != 32 {
		bad("WEBHOOK_SECRET_ENCRYPTION_KEY must be standard base64 of exactly 32 bytes")
	} else {
		webhookSecretKey = k
	}

	def := ""
	if local {
		def = "http://localhost:8787"
	}
	webauthnOrigins := origins("WEBAUTHN_ALLOWED_ORIGINS", def)
	if len(webauthnOrigins) == 0 {
		bad("WEBAUTHN_ALLOWED_ORIGINS is required: comma-separated dashboard origins such as https://dashboard.example")
	}
	allowed := origins("ALLOWED_ORIGINS", "http://localhost:8787")

	trusted, err := clientip.ParseCIDRs(str("CONTROLPLANE_TRUSTED_PROXY_CIDRS", ""))
	if err != nil {
		bad("CONTROLPLANE_TRUSTED_PROXY_CIDRS: %v", err)
	}
	// Without a public URL, DID documents name service endpoints after the
	// Host header of whoever asked, so only a local run may leave it out.
	publicURL := str("CONTROLPLANE_PUBLIC_URL", "")
	switch {
	case publicURL == "" && !local:
		bad("CONTROLPLANE_PUBLIC_URL is required unless ENVIRONMENT=local: the external base URL (scheme://host[:port], e.g. https://idn.example) that DID documents name as service endpoint")
	case publicURL != "":
		if u, err := url.Parse(publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			bad("CONTROLPLANE_PUBLIC_URL must be scheme://host[:port], got %q", publicURL)
		}
	}

	seedToken := ""
	if boolean("ENABLE_TEST_SEED_ENDPOINT") {
		seedToken = str("IDN_TEST_SEED_TOKEN", "")
		switch {
		case s.environment != "local" && s.environment != "test":
			bad("ENABLE_TEST_SEED_ENDPOINT=true needs ENVIRONMENT local or test, not %q", s.environment)
			seedToken = ""
		case seedToken == "":
			bad("ENABLE_TEST_SEED_ENDPOINT=true needs IDN_TEST_SEED_TOKEN")
		}
	}

	s.server = controlplane.Config{
		JWTSecret:               []byte(jwtSecret),
		SessionTTL:              time.Duration(positive("GATEWAY_AUTH_SESSION_HOURS", 168)) * time.Hour,
		AllowedOrigins:          allowed,
		InsecureLocalhostCookie: local,
		MaxPendingClaims:        positive("MAX_PENDING_AUTHORIZATIONS", 20),
		MaxPendingPerAgent:      positive("MAX_PENDING_AUTHORIZATIONS_PER_AGENT", 5),
		MaxInflightBodyBytes:    int64(positive("CONTROLPLANE_MAX_INFLIGHT_BODY_BYTES", controlplane.DefaultMaxInflightBodyBytes)),
		MaxAPIKeys:              positive("MAX_API_KEYS_PER_SERVICE", 5),
		PendingExpiry:           time.Duration(positive("PENDING_AUTHORIZATION_EXPIRY_HOURS", 24)) * time.Hour,
		SignatureMaxAge:         time.Duration(positive("GATEWAY_SIGNATURE_MAX_AGE_SECONDS", 300)) * time.Second,
		SignatureFutureSkew:     time.Duration(positive("GATEWAY_SIGNATURE_FUTURE_SKEW_SECONDS", 30)) * time.Second,
		TrustedProxies:          trusted,
		PublicURL:               publicURL,
		TestSeedToken:           seedToken,
		Auth: controlplane.AuthConfig{
			Origins:         webauthnOrigins,
			RPID:            str("WEBAUTHN_RP_ID", ""),
			RPName:          str("WEBAUTHN_RP_NAME", ""),
			ChallengeExpiry: time.Duration(positive("CHALLENGE_EXPIRY_HOURS", 1)) * time.Hour,
		},
	}

	hooks := controlplane.WebhookConfig{
		SecretKey:           webhookSecretKey,
		MaxPerService:       positive("MAX_WEBHOOKS_PER_SERVICE", 5),
		RetryWindow:         time.Duration(positive("WEBHOOK_RETRY_WINDOW_HOURS", 24)) * time.Hour,
		FailureThreshold:    positive("WEBHOOK_FAILURE_THRESHOLD", 10),
		AllowPrivateTargets: boolean("WEBHOOK_ALLOW_PRIVATE_TARGETS"),
		DNSResolverURL:      str("WEBHOOK_DNS_RESOLVER_URL", ""),
		Alert: controlplane.AlertConfig{
			From:         str("WEBHOOK_ALERT_EMAIL_FROM", ""),
			To:           list("WEBHOOK_ALERT_EMAIL_TO"),
			SMTPAddr:     str("WEBHOOK_ALERT_SMTP_ADDR", ""),
			SMTPUsername: str("WEBHOOK_ALERT_SMTP_USERNAME", ""),
			SMTPPassword: str("WEBHOOK_ALERT_SMTP_PASSWORD", str("MAILER_API_KEY", "")),
		},
		Registry: controlplane.RegistryConfig{Mode: str("BLOCKCHAIN_MODE", controlplane.RegistryDisabled)},
	}
	if u := hooks.DNSResolverURL; u != "" {
		if pu, err := url.Parse(u); err != nil || pu.Scheme != "https" || pu.Host == "" {
			bad("WEBHOOK_DNS_RESOLVER_URL must be an https URL (DNS over HTTPS)")
		}
	}
	if a := hooks.Alert; a.From != "" && !strings.Contains(a.From, "@") {
		bad("WEBHOOK_ALERT_EMAIL_FROM must be an e-mail address")
	}
	if a := hooks.Alert; (a.From != "" || len(a.To) > 0 || a.SMTPAddr != "") && (a.From == "" || len(a.To) == 0 || a.SMTPAddr == "") {
		bad("webhook failure alerts need WEBHOOK_ALERT_EMAIL_FROM, WEBHOOK_ALERT_EMAIL_TO and WEBHOOK_ALERT_SMTP_ADDR together")
	}
	switch mode := hooks.Registry.Mode; mode {
	case controlplane.RegistryDisabled:
	case controlplane.RegistrySync, controlplane.RegistryMemory, controlplane.RegistryQueue:
		bad("BLOCKCHAIN_MODE=%s needs a registry backend, and none is built in yet: use BLOCKCHAIN_MODE=disabled", mode)
	default:
		bad("BLOCKCHAIN_MODE must be disabled, sync, memory or queue, got %q", mode)
	}
	s.server.Webhooks = hooks
	if n := str("BLOCKCHAIN_NETWORK", "mainnet"); n != "mainnet" && n != "testnet" {
		bad("BLOCKCHAIN_NETWORK must be mainnet or testnet, got %q", n)
	}
	if rpc := str("BLOCKCHAIN_RPC_URL", ""); rpc != "" {
		if u, err := url.Parse(rpc); err != nil || u.Host == "" {
			bad("BLOCKCHAIN_RPC_URL must be a URL")
		}
	}

	if len(problems) > 0 {
		return s, errors.New("controlplane: invalid configuration:\n  - " + strings.Join(problems, "\n  - "))
	}
	return s, nil
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

// localSecret returns the secret stored in dir/name, creating it (standard
// base64 of 32 random bytes, mode 0600, written atomically) on first use.
func localSecret(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err == nil {
		// A copy made by hand may be readable by others; the secret is not
		// meant to be.
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", err
			}
		}
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var raw [32]byte
	rand.Read(raw[:])
	secret := base64.StdEncoding.EncodeToString(raw[:])
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(secret + "\n"); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// Link, not rename: if another process created the file meanwhile, its
	// secret wins and is the one returned.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}
