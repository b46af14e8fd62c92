package gatewayd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/internal/clientip"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/replay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Gateway is a composed gateway, ready to serve.
type Gateway struct {
	settings Settings
	log      *slog.Logger
	store    *credvault.SQLiteStore
	vault    *credvault.Vault
	cache    *claimcache.Cache
	mcp      *mcpproxy.Proxy
	metrics  *proxy.Metrics
	handler  http.Handler
	identity *identity.Identity
}

// Version is reported by /health.
var Version = "dev"

// New opens the store, loads or creates the gateway's own identity and
// wires every part. logger receives operational logs; decision logs go to
// it too when LogProxyRequests is set.
func New(ctx context.Context, s Settings, logger *slog.Logger) (*Gateway, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{settings: s, log: logger}
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	var err error
	if g.store, err = credvault.OpenSQLite(ctx, filepath.Join(s.DataDir, credvault.DefaultFileName)); err != nil {
		return nil, err
	}
	if g.vault, err = credvault.New(ctx, credvault.Config{Store: g.store, MasterKey: s.MasterKey, Logger: logger}); err != nil {
		g.store.Close()
		return nil, err
	}
	if g.identity, err = loadOrCreateIdentity(s.IdentityHome, s.Namespace); err != nil {
		g.Close()
		return nil, err
	}
	if err := g.wire(logger); err != nil {
		g.Close()
		return nil, err
	}
	if s.AllowUnsignedProxy || len(s.AllowUnsignedConnections) > 0 {
		logger.Warn("UNSAFE: signature, claim and replay checks are OFF for some requests; development only",
			"all_connections", s.AllowUnsignedProxy, "connections", s.AllowUnsignedConnections)
	}
	return g, nil
}

func (g *Gateway) wire(logger *slog.Logger) error {
	s := g.settings
	upstream := proxy.NewTransport()
	control := &http.Client{Timeout: 15 * time.Second, Transport: g.identity.Transport(nil, identity.SignOptions{})}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if g.metrics, err = proxy.NewMetrics(reg); err != nil {
		return err
	}

	serviceKeys := &serviceKeys{settings: &g.settings, vault: g.vault}
	g.cache, err = claimcache.New(claimcache.Config{
		Source:          &claimcache.HTTPSource{BaseURL: s.RegistryURL, Client: control, APIKey: serviceKeys.forService},
		TTL:             s.ClaimsTTL,
		RefreshInterval: s.ClaimsRefresh,
		Logger:          logger,
	})
	if err != nil {
		return err
	}
	rate := s.ClaimRegistrationRatePerMinute
	if rate == 0 {
		rate = -1 // the setting's 0 disables the limit
	}
	submitter, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
		BaseURL: s.RegistryURL, Client: control, RatePerMinute: rate,
		APIKey: func(id string) (string, error) { return keyOrError(s.APIKeyFor(id), id) },
	})
	if err != nil {
		return err
	}
	nonces, err := replay.New(replay.Config{MaxEntries: s.NonceMaxEntries})
	if err != nil {
		return err
	}

	g.mcp, err = mcpproxy.New(mcpproxy.Config{
		Connections:        proxy.MCPConnections(g.vault, upstream),
		Caller:             proxy.MCPCaller,
		OnDiscovery:        g.storeDiscovery,
		Logger:             logger,
		Registerer:         reg,
		DiscoveryTTL:       s.DiscoveryTTL,
		StaleIfError:       staleIfError(s.DiscoveryStale),
		Timeout:            s.MCPTimeout,
		BreakerFailures:    s.BreakerFailures,
		BreakerCooldown:    s.BreakerCooldown,
		RateLimitPerMinute: s.ToolCallRatePerMinute,
		MaxBodyBytes:       s.MaxBodyBytes,
	})
	if err != nil {
		return err
	}

	cfg := proxy.Config{
		Connections: g.vault, Claims: g.cache, Nonces: nonces, Submitter: submitter,
		MaxAge: s.SignatureMaxAge, FutureSkew: s.SignatureFuture, TrustedProxies: s.TrustedProxies, PublicAuthority: s.PublicAuthority,
		Aliases: s.Aliases, InsecureAllowUnsigned: s.AllowUnsignedProxy, InsecureUnsignedConnections: s.AllowUnsignedConnections,
		RotationEnforcement: s.RotationEnforcement, RotationGrace: s.RotationGrace,
		Transport: upstream, MaxBodyBytes: s.MaxBodyBytes, MaxInflightBodyBytes: s.MaxInflightBodyBytes,
		Timeout: s.ProxyTimeout, MCPTimeout: s.MCPTimeout,
		MCP: g.mcp.Handler(), Metrics: g.metrics, Logger: logger,
	}
	if s.LogProxyRequests {
		salt, err := installSalt(s.DataDir)
		if err != nil {
			return err
		}
		cfg.DecisionLog, cfg.LogSalt = logger, salt
	}
	runtime, err := proxy.New(cfg)
	if err != nil {
		return err
	}

	access, err := admin.NewAccess(admin.AccessConfig{
		Mode: s.AdminMode, Token: s.AdminToken, TrustedProxies: s.TrustedProxies,
		AllowedOrigins: s.AllowedOrigins, Hosts: s.AdminHosts, Logger: logger,
	})
	if err != nil {
		return err
	}
	acfg := admin.Config{
		Vault: g.vault, Access: access, CatalogFile: s.CatalogFile, TestTransport: upstream, Logger: logger,
		Discover: func(ctx context.Context, c *credvault.Connection, refresh string) (any, error) {
			res, ok := g.vault.Lookup(c.ID)
			if !ok {
				return nil, credvault.ErrNotFound
			}
			r, err := mcpproxy.ParseRefresh(refresh, mcpproxy.RefreshForce)
			if err != nil {
				return nil, err
			}
			d, err := g.mcp.Discover(ctx, proxy.MCPConnection(res, g.vault.Transport(c.ID, upstream)), r)
			if err != nil {
				return nil, mcpError{err}
			}
			return d, nil
		},
	}
	if s.RequireSignedAdminChecks {
		acfg.GuardCheck = runtime.Authorize
	}
	adminHandler, err := admin.New(acfg)
	if err != nil {
		return err
	}

	health := &proxy.Health{Version: Version, Checks: map[string]func(context.Context) error{
		"store":  func(ctx context.Context) error { _, err := g.store.Generation(ctx); return err },
		"claims": g.claimsReady,
	}}
	// An absolute-form target naming another scheme or authority is
	// refused on every route before anything reads it.
	origin := clientip.Resolver{Trusted: s.TrustedProxies, PublicAuthority: s.PublicAuthority}
	g.handler = apierror.RequestID(origin.RefuseForeignTarget(dispatch(health,
		timeout(s.AdminTimeout, access.Wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))),
		timeout(s.AdminTimeout, adminHandler), runtime)))
	return nil
}

// dispatch routes by path prefix. Unlike http.ServeMux it never redirects
// a path that is not clean: runtime paths reach the signed pipeline exactly
// as the agent signed them (it refuses dot-segments itself), and admin paths
// that are not canonical are refused here.
func dispatch(health, metrics, adminAPI, runtime http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/health" || strings.HasPrefix(p, "/health/"):
			health.ServeHTTP(w, r)
		case p == "/metrics":
			metrics.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/api/admin/"):
			if path.Clean(p) != strings.TrimSuffix(p, "/") {
				apierror.Write(w, r, apierror.Coded(errcode.ValidationError, "admin path is not canonical"))
				return
			}
			adminAPI.ServeHTTP(w, r)
		default:
			runtime.ServeHTTP(w, r)
		}
	})
}

// Handler is the gateway's whole HTTP surface.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Metrics are the gateway's collectors (for the shutdown drain).
func (g *Gateway) Metrics() *proxy.Metrics { return g.metrics }

// Vault is the gateway's credential store.
func (g *Gateway) Vault() *credvault.Vault { return g.vault }

// Identity is the gateway's own identity, which signs its control-plane calls.
func (g *Gateway) Identity() *identity.Identity { return g.identity }

// Run keeps the claims cache and the tracked service set current until
// ctx is done.
func (g *Gateway) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = g.cache.Run(ctx) }()
	g.syncServices()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			g.syncServices()
		}
	}
}

// syncServices tracks the service slug of every signed connection.
func (g *Gateway) syncServices() {
	seen := map[string]bool{}
	var services []string
	for _, c := range g.vault.Connections() {
		if slug := c.ServiceSlug(); !seen[slug] {
			seen[slug] = true
			services = append(services, slug)
		}
	}
	g.cache.SetServices(services...)
}

func (g *Gateway) claimsReady(context.Context) error {
	for _, c := range g.vault.Connections() {
		if g.settings.AllowUnsignedProxy {
			return nil
		}
		if st := g.cache.Status(c.ServiceSlug()); !st.Loaded {
			return fmt.Errorf("claims for service %q never loaded", c.ServiceSlug())
		}
	}
	return nil
}

// storeDiscovery persists an MCP discovery with its connection.
func (g *Gateway) storeDiscovery(ctx context.Context, id string, d mcpproxy.Discovery) {
	raw, err := json.Marshal(d)
	if err != nil {
		return
	}
	_, err = g.vault.Update(ctx, id, func(c *credvault.Connection) error {
		c.MCPDiscovery = raw
		return nil
	})
	if err != nil && !errors.Is(err, credvault.ErrNotFound) {
		g.log.Warn("storing MCP discovery failed", "connection_id", id, "error", err)
	}
}

// Close releases the store and the MCP sessions.
func (g *Gateway) Close() {
	if g.mcp != nil {
		g.mcp.Close()
	}
	if g.vault != nil {
		g.vault.Close()
	}
	if g.store != nil {
		g.store.Close()
	}
}

// Serve serves on ln until ctx is done, then shuts down gracefully: no new
// connections, in-flight requests drained within ShutdownTimeout, and the
// drain recorded in the metrics. It returns nil after a clean drain.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := NewServer(g.handler)
	bg, stop := context.WithCancel(context.Background())
	defer stop()
	go g.Run(bg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), g.settings.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	outcome := "success"
	if err != nil {
		outcome = "timeout"
		_ = srv.Close()
	}
	g.metrics.ObserveDrain(outcome, time.Since(start))
	g.log.Info("gateway stopped", "drain", outcome, "seconds", time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s", g.settings.ShutdownTimeout)
	}
	return nil
}

// NewServer returns an http.Server with timeouts that keep slow or idle
// clients from holding connections (slowloris), and no write timeout so
// streamed responses are bounded by the route timeouts instead.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// staleIfError maps the setting's 0 ("never serve stale") to mcpproxy's
// negative value; mcpproxy reads zero as its default.
func staleIfError(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// timeout bounds a handler's context.
func timeout(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// mcpError gives the admin API the code of an MCP error.
type mcpError struct{ err error }

func (e mcpError) Error() string      { return e.err.Error() }
func (e mcpError) Unwrap() error      { return e.err }
func (e mcpError) Code() errcode.Code { return mcpproxy.ErrorCode(e.err) }

// serviceKeys picks the feed key of a service: the key of a connection that
// uses that slug and has its own IDN_SERVICE_API_KEY_<ID>, else the global one.
type serviceKeys struct {
	settings *Settings
	vault    *credvault.Vault
}

func (k *serviceKeys) forService(service string) (string, error) {
	for _, c := range k.vault.Connections() {
		if c.ServiceSlug() == service {
			if key := k.settings.APIKeyFor(c.ID); key != k.settings.ServiceAPIKey {
				return key, nil
			}
		}
	}
	return keyOrError(k.settings.ServiceAPIKey, service)
}

func keyOrError(key, name string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("no service API key for %q: set IDN_SERVICE_API_KEY or IDN_SERVICE_API_KEY_<CONNECTION_ID>", name)
	}
	return key, nil
}

func loadOrCreateIdentity(home, namespace string) (*identity.Identity, error) {
	id, err := identity.Load(home, namespace)
	if errors.Is(err, identity.ErrNotFound) {
		if id, err = identity.New(namespace); err == nil {
			err = id.Save(home)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gateway identity: %w", err)
	}
	return id, nil
}

// installSalt returns the per-install salt of the decision-log
// fingerprints, creating it on first use.
func installSalt(dir string) ([]byte, error) {
	path := filepath.Join(dir, "log-salt")
	salt, err := os.ReadFile(path)
	if err == nil && len(salt) == 32 {
		return salt, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("decision-log salt: %w", err)
	}
	salt = make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, salt, 0o600); err != nil {
		return nil, fmt.Errorf("decision-log salt: %w", err)
	}
	return salt, nil
}
