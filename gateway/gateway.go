package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/clientip"
	"github.com/idnhq/idn/kit/tracing"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/replay"
	"github.com/idnhq/idn/upstreamauth"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Gateway is a complete idn gateway: an http.Handler serving the runtime
// routes, the admin API, /metrics and /health, plus the background work
// that keeps its claims current (Start). Create it with New and release it
// with Close.
type Gateway struct {
	cfg      Config
	store    credvault.Store
	ownStore *sqlitestore.Store // the store New opened (Config.Store nil), closed by Close
	vault    *credvault.Vault
	cache    *claimcache.Cache
	mcp      *mcpproxy.Proxy
	admin    *admin.Handler
	metrics  *proxy.Metrics
	handler  http.Handler
	identity *identity.Identity
	control  *http.Client         // signs its requests; follows no redirect
	reporter *pairing.Reporter    // nil: no activity reports
	nonces   *nonceGuard          // the in-memory store's restart guard; nil without one
	shared   *sharedNonces        // the NonceStore of Config; nil without one
	replay   *replay.Store        // the in-memory store (HeldBytes); nil with a NonceStore
	tokens   *upstreamauth.Tokens // OAuth connections' access tokens
	connect  *admin.Connector     // the dashboard's connect flows

	readyChecks map[string]func(context.Context) error // what /health/ready and Up check
	changed     chan struct{}                          // the vault rebuilt its snapshot; services to sync
	readiness   signal                                 // notified when they may pass

	draining atomic.Bool // by Drain: /health/ready fails from then on

	mu      sync.Mutex
	started bool
	stop    context.CancelFunc
	done    chan struct{}
}

var _ http.Handler = (*Gateway)(nil)

// New validates cfg, opens the credential store (Config.Store, or the
// SQLite file in cfg.DataDir), loads the
// gateway's identity (creating it on first use) and wires every part. It
// starts no goroutine; Start does.
func New(cfg Config) (*Gateway, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	g := &Gateway{cfg: cfg, changed: make(chan struct{}, 1)}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: data directory: %w", err)
	}
	g.store = cfg.Store
	if g.store == nil {
		if g.ownStore, err = sqlitestore.Open(ctx, filepath.Join(cfg.DataDir, sqlitestore.DefaultFileName)); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		g.store = g.ownStore
	}
	if g.vault, err = credvault.New(ctx, credvault.Config{Store: g.store, MasterKey: cfg.MasterKey, Logger: cfg.Logger, Extensions: VaultExtensions(),
		OnChange: g.vaultChanged}); err != nil {
		if g.ownStore != nil {
			g.ownStore.Close()
		}
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if cfg.Store != nil {
		g.identity, err = g.sharedIdentity(ctx)
	} else {
		g.identity, err = loadOrCreateIdentity(cfg.IdentityHome, cfg.Namespace)
	}
	if err != nil {
		g.Close()
		return nil, err
	}
	if g.cfg.Admin.Token == "" {
		if g.cfg.Admin.Token, err = AdminToken(cfg.DataDir); err != nil {
			g.Close()
			return nil, err
		}
	}
	if err := g.wire(); err != nil {
		g.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if cfg.Proxy.InsecureAllowUnsigned || len(cfg.Proxy.InsecureUnsignedConnections) > 0 {
		cfg.Logger.Warn("UNSAFE: signature, claim and replay checks are OFF for some requests; development only",
			"all_connections", cfg.Proxy.InsecureAllowUnsigned, "connections", cfg.Proxy.InsecureUnsignedConnections)
	}
	return g, nil
}

func (g *Gateway) wire() error {
	c := g.cfg
	upstream := proxy.NewTransport()
	// No upstream holds a request's headers longer than the longest route
	// may take, even a request with no deadline of its own.
	upstream.ResponseHeaderTimeout = max(cmp.Or(c.Proxy.Timeout, proxy.DefaultTimeout), cmp.Or(c.Proxy.MCPTimeout, proxy.DefaultMCPTimeout), c.MCP.Timeout)
	// The control-plane client never follows a redirect: its requests carry
	// the gateway's signature and API keys, for the registry URL only.
	g.control = &http.Client{
		Timeout:       15 * time.Second,
		Transport:     g.identity.Transport(nil, identity.SignOptions{}),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if g.metrics, err = proxy.NewMetrics(reg); err != nil {
		return err
	}

	g.cache, err = claimcache.New(claimcache.Config{
		Source:    &claimcache.HTTPSource{BaseURL: c.ControlPlaneURL, Client: g.control, APIKey: g.serviceKey},
		Options:   c.Claims,
		Logger:    c.Logger,
		OnRefresh: func(string, int, error) { g.readiness.notify() },
	})
	if err != nil {
		return err
	}
	// A submission carries the trace of the request that filed it, so the
	// control plane's span of POST /v1/claims continues it.
	submissions := *g.control
	submissions.Transport = tracing.New(c.TracerProvider, "github.com/idnhq/idn/gateway").Transport(g.control.Transport)
	submitter, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
		BaseURL: c.ControlPlaneURL, Client: &submissions, APIKey: g.connectionKey, SubmitterOptions: c.ClaimSubmissions,
	})
	if err != nil {
		return err
	}
	nonces, err := g.openNonces(reg)
	if err != nil {
		return err
	}

	var salt []byte
	var decisionLog *slog.Logger
	if c.LogDecisions {
		if salt, err = installSalt(c.DataDir); err != nil {
			return err
		}
		decisionLog = c.Logger
	}
	var activity proxy.ActivityRecorder
	if !c.NoActivityReports && c.ControlPlaneURL != "" {
		if g.reporter, err = pairing.NewReporter(pairing.ReporterConfig{ControlPlaneURL: c.ControlPlaneURL, Identity: g.identity,
			Files: g.PairingFiles(), Logger: c.Logger}); err != nil {
			return err
		}
		activity = reported{g.reporter}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "idn_gateway_activity_reported_total",
				Help: "Decisions the control plane took for the owner's activity."}, func() float64 { return float64(g.reporter.Sent()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "idn_gateway_activity_dropped_total",
				Help: "Decisions not reported because the report queue was full."}, func() float64 { return float64(g.reporter.Dropped()) }))
	}
	pins, err := newToolPins(g.vault, reg, c.Logger, g.reporter)
	if err != nil {
		return err
	}
	// Owner-approved actions: filed as the paired gateway, checked
	// against the owner's passkeys pinned at pairing.
	var gate *approval.Gate
	if c.ControlPlaneURL != "" {
		holds := c.Holds
		if holds == nil && g.ownStore != nil {
			holds = g.ownStore.Holds()
		}
		if gate, err = approval.New(approval.Config{Gateway: g.identity.PublicKeyString(),
			Desk: &approval.HTTPDesk{BaseURL: c.ControlPlaneURL, Client: &submissions}, Keys: g.ownerKeys, Store: holds,
			Logger: c.Logger}); err != nil {
			return err
		}
	}
	oauthMetrics, err := upstreamauth.NewMetrics(reg)
	if err != nil {
		return err
	}
	// The token endpoints are reached like the upstreams (proxy settings
	// included); upstreamauth bounds each exchange itself.
	if g.tokens, err = upstreamauth.New(upstreamauth.Config{Vault: g.vault, HTTPClient: &http.Client{Transport: upstream},
		Metrics: oauthMetrics, Logger: c.Logger}); err != nil {
		return err
	}
	if g.connect, err = admin.NewConnector(admin.ConnectorConfig{Vault: g.vault, Tokens: g.tokens, Logger: c.Logger,
		ConnectMCP: func(ctx context.Context, id string, m upstreamauth.MCPConnect) error {
			_, err := ConnectMCPAccount(ctx, g.vault, g.tokens, id, m)
			return err
		}}); err != nil {
		return err
	}
	observer := proxy.NewMCPObserver(g.metrics, decisionLog, salt)
	g.mcp, err = mcpproxy.New(mcpproxy.Config{
		Connections:    &mcpConnections{vault: g.vault, base: upstream, tokens: g.tokens, log: c.Logger, approvals: gate},
		Caller:         mcpCaller,
		OnDiscovery:    g.storeDiscovery,
		Pins:           pins,
		OnUpstream:     observer.Upstream,
		OnDecision:     mcpDecided(observer, g.reporter, g.vault),
		Logger:         c.Logger,
		Registerer:     reg,
		TracerProvider: c.TracerProvider,
		// Replicas share the master key, so a round's state sealed by
		// one opens on another.
		StateKey: c.MasterKey.Derive("mcp request state"),
		Options:  c.MCP,
	})
	if err != nil {
		return err
	}

	pcfg := proxy.Config{
		Connections: g.vault, Claims: g.cache, Nonces: nonces, Submitter: submitter, Options: c.Proxy,
		Transport: upstream, MCP: g.mcp.Handler(), Metrics: g.metrics, Logger: c.Logger, TracerProvider: c.TracerProvider,
		Activity: activity, UpstreamTokens: g.tokens,
	}
	if gate != nil {
		pcfg.Approvals = gate
	}
	if c.LogDecisions {
		pcfg.DecisionLog, pcfg.LogSalt = c.Logger, salt
	}
	runtime, err := proxy.New(pcfg)
	if err != nil {
		return err
	}

	access, err := admin.NewAccess(admin.AccessConfig{
		AccessOptions: c.Admin, TrustedProxies: c.Proxy.TrustedProxies, Logger: c.Logger, DecisionLog: decisionLog,
	})
	if err != nil {
		return err
	}
	acfg := admin.Config{
		Vault: g.vault, Access: access, CatalogFile: c.CatalogFile, TestTransport: upstream, Logger: c.Logger,
		CheckConnection: g.checkConnection, RevokeAccount: g.tokens.Revoke,
		OAuthTransport: func(res *credvault.Resolved, base http.RoundTripper) http.RoundTripper {
			return g.tokens.Transport(res, "", base)
		},
		ToolPins: pinReview{pins},
		Discover: func(ctx context.Context, conn *credvault.Connection, refresh string) (mcpproxy.Discovery, error) {
			res, ok := g.vault.Lookup(conn.ID)
			if !ok {
				return mcpproxy.Discovery{}, credvault.ErrNotFound
			}
			r, err := mcpproxy.ParseRefresh(refresh, mcpproxy.RefreshForce)
			if err != nil {
				return mcpproxy.Discovery{}, err
			}
			settings, discovery, err := mcpproxy.DecodeSettings(res.Connection.Extensions)
			if err != nil {
				return mcpproxy.Discovery{}, err
			}
			d, err := g.mcp.Discover(ctx, mcpConnection(res, settings, discovery, g.vault, g.tokens, upstream, c.Logger), r)
			if err != nil {
				return mcpproxy.Discovery{}, mcpError{err}
			}
			return d, nil
		},
		TestMCP: func(ctx context.Context, conn *credvault.Connection) (mcpevent.Handshake, error) {
			return g.testMCP(ctx, conn, upstream)
		},
	}
	if c.InsecureUnsignedAdminChecks {
		acfg.InsecureUnguardedChecks = true
	} else {
		acfg.GuardCheck = runtime.Authorize
	}
	adminHandler, err := admin.New(acfg)
	if err != nil {
		return err
	}
	g.admin = adminHandler

	g.readyChecks = map[string]func(context.Context) error{
		"store":  g.storeReady,
		"claims": g.claimsReady,
		// A wedged request path leaves liveness answering; readiness
		// must not.
		"requests": runtime.Progress,
		"drain":    g.serving,
	}
	switch {
	case g.shared != nil:
		g.readyChecks["nonces"] = g.shared.ready
	case g.nonces != nil:
		g.readyChecks["nonces"] = g.nonces.ready
	}
	health := &proxy.Health{Version: c.Version, Checks: g.readyChecks}
	// An absolute-form target naming another scheme, or an authority other
	// than PublicAuthority or the address the request arrived on, is
	// refused on every route before anything reads it.
	origin := clientip.Resolver{Trusted: c.Proxy.TrustedProxies, PublicAuthority: c.Proxy.PublicAuthority}
	g.handler = apierror.RequestID(origin.RefuseForeignTarget(dispatch(health,
		timeout(c.AdminTimeout, access.Wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))),
		timeout(c.AdminTimeout, adminHandler), runtime)))
	return nil
}

// storeReady fails when the credential store does not answer, except
// when its backend is out of reach (credvault.ErrStoreUnavailable). The
// snapshot loaded keeps serving then, and a fleet whose database stops
// must not leave its load balancer without a replica.
func (g *Gateway) storeReady(ctx context.Context) error {
	_, err := g.store.Generation(ctx)
	if errors.Is(err, credvault.ErrStoreUnavailable) {
		return nil
	}
	return err
}

// openNonces returns the nonce checker: the shared store when one is
// configured, else the in-memory one, behind the restart guard unless
// InsecureForgetNoncesOnRestart.
func (g *Gateway) openNonces(reg prometheus.Registerer) (httpsig.NonceChecker, error) {
	c := g.cfg
	if c.NonceStore != nil {
		g.shared = newSharedNonces(c.NonceStore, reg, c.Logger)
		return g.shared, nil
	}
	store, err := replay.New(c.Nonces)
	if err != nil {
		return nil, err
	}
	g.replay = store
	if c.InsecureForgetNoncesOnRestart {
		return store, nil
	}
	maxAge, skew := cmp.Or(c.Proxy.MaxAge, identity.DefaultMaxAge), cmp.Or(c.Proxy.FutureSkew, identity.DefaultFutureSkew)
	if g.nonces, err = openNonces(c.DataDir, store, c.Nonces.Clock, maxAge, skew, c.Logger); err != nil {
		return nil, err
	}
	return g.nonces, nil
}

// ServeHTTP serves the gateway's whole HTTP surface: /proxy/…, /mcp/… and
// alias routes, /api/admin/…, /metrics and /health. Mounted under a
// prefix with http.StripPrefix it works unchanged: signatures are checked
// against the request-target as received, so agents sign the URL they
// call, prefix included.
//
// While the gateway drains, each answer closes its connection, so a load
// balancer's pooled connections end one by one instead of being cut
// while a request is on its way.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.draining.Load() {
		w.Header().Set("Connection", "close")
	}
	g.handler.ServeHTTP(w, r)
}

// EndStreams ends the event streams (GET) of the MCP endpoint's sessions,
// which would otherwise hold a graceful shutdown until its deadline; MCP
// clients carry on with POST alone. Register it with
// http.Server.RegisterOnShutdown.
func (g *Gateway) EndStreams() { g.mcp.EndStreams() }

// Vault is the gateway's credential store, for adding and changing
// connections from code.
func (g *Gateway) Vault() *credvault.Vault { return g.vault }

// Admin is the gateway's admin API: its HTTP routes are part of the
// gateway's handler, and its operations serve callers in process (the
// owner's RPCs over a pairing link).
func (g *Gateway) Admin() *admin.Handler { return g.admin }

// Connector runs the owner's connect flows of OAuth accounts from the
// dashboard, over a pairing link. Flows live in this process: the link's
// process must be the one that serves them.
func (g *Gateway) Connector() *admin.Connector { return g.connect }

// Identity is the gateway's own identity, which signs its control-plane
// calls.
func (g *Gateway) Identity() *identity.Identity { return g.identity }

// Claims is the gateway's cache of approved claims.
func (g *Gateway) Claims() *claimcache.Cache { return g.cache }

// HeldBytes returns the bytes of g's claims snapshots and nonce tables:
// large, pointer-free and long-lived, for gctune.Tune.
func (g *Gateway) HeldBytes() int64 {
	n := g.cache.HeldBytes()
	if g.replay != nil {
		n += g.replay.HeldBytes()
	}
	return n
}

// Metrics are the gateway's collectors; a server that drains the gateway
// at shutdown records the outcome with ObserveDrain.
func (g *Gateway) Metrics() *proxy.Metrics { return g.metrics }

// Drain makes /health/ready (and Up) fail from now on, check "drain",
// while the gateway goes on serving: a load balancer stops sending it
// requests before its server shuts down. Call it when asked to stop.
func (g *Gateway) Drain() {
	g.draining.Store(true)
	g.readiness.notify()
}

func (g *Gateway) serving(context.Context) error {
	if g.draining.Load() {
		return errors.New("the gateway is stopping")
	}
	return nil
}

// ErrStarted is returned by Start on a gateway that was already started.
var ErrStarted = errors.New("gateway: already started")

// Start runs the background work in goroutines until ctx is done or Close
// is called: the claims feed poll, and tracking which services the stored
// connections use. Call it before serving: from its return until a
// service's claims have loaded, signed requests for it are refused 503
// AUTH_CLAIMS_UNAVAILABLE (before it, 500 AUTH_CLAIMS_LOOKUP_FAILED: no
// service is tracked yet); Up waits until they have.
func (g *Gateway) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return ErrStarted
	}
	g.started = true
	// Tracked before Start returns, so that a request served right after
	// it meets a service still loading (503), not an unknown one (500).
	g.syncServices()
	ctx, g.stop = context.WithCancel(ctx)
	g.done = make(chan struct{})
	go func() {
		defer close(g.done)
		g.run(ctx)
	}()
	return nil
}

// RunReports sends the activity records of a gateway that is not
// started (Start sends those of a serving one) until ctx ends: a process
// that only keeps the pairing link decides on tool pins for the owner,
// and those decisions belong in the owner's activity trail too. It
// returns at once when the gateway reports no activity.
func (g *Gateway) RunReports(ctx context.Context) {
	if g.reporter != nil {
		_ = g.reporter.Run(ctx)
	}
}

func (g *Gateway) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.cache.Run(ctx) })
	if g.nonces != nil {
		wg.Go(func() { g.nonces.run(ctx) })
	}
	if g.reporter != nil {
		wg.Go(func() { _ = g.reporter.Run(ctx) })
	}
	defer wg.Wait()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.syncServices()
		case <-g.changed:
			g.syncServices()
		}
	}
}

// vaultChanged is the vault's OnChange: a connection added anywhere in a
// fleet has its service's claims tracked at once, not at the next tick.
func (g *Gateway) vaultChanged() {
	select {
	case g.changed <- struct{}{}:
	default: // a sync is pending already
	}
}

// syncServices tracks the service slug of every stored connection, and
// wakes Up: a connection added or removed changes what readiness needs.
func (g *Gateway) syncServices() {
	defer g.readiness.notify()
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
	if g.cfg.Proxy.InsecureAllowUnsigned {
		return nil
	}
	for _, c := range g.vault.Connections() {
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
		if c.Extensions == nil {
			c.Extensions = map[string]json.RawMessage{}
		}
		c.Extensions[mcpproxy.DiscoveryMember] = raw
		return nil
	})
	if err != nil && !errors.Is(err, credvault.ErrNotFound) {
		g.cfg.Logger.Warn("storing MCP discovery failed", "connection_id", id, "error", err)
	}
}

// Close stops the background work, waits for it, saves the nonces it
// accepted to DataDir for the next start (NonceSnapshotFile), and
// releases the MCP sessions and the store. Call it once the server has
// stopped taking requests: a nonce check after it is refused 503
// NONCE_STORE_UNAVAILABLE. The handler must not be used afterwards.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.stop != nil {
		g.stop()
		<-g.done
		g.stop = nil
	}
	g.mu.Unlock()
	var errs []error
	if g.nonces != nil {
		errs = append(errs, g.nonces.close())
	}
	if g.mcp != nil {
		g.mcp.Close()
	}
	if g.vault != nil {
		g.vault.Close()
	}
	if g.ownStore != nil {
		errs = append(errs, g.ownStore.Close())
	}
	return errors.Join(errs...)
}

// mcpError gives the admin API the code of an MCP error.
type mcpError struct{ err error }

func (e mcpError) Error() string      { return e.err.Error() }
func (e mcpError) Unwrap() error      { return e.err }
func (e mcpError) Code() errcode.Code { return mcpproxy.ErrorCode(e.err) }

// ownerKeys returns the owner's passkeys pinned at pairing, or nil (every
// approval refused) when there are none or they cannot be read.
func (g *Gateway) ownerKeys() *approval.Keys {
	k, err := pairing.OwnerKeys(g.PairingFiles())
	if err != nil {
		g.cfg.Logger.Warn("owner passkeys unreadable: approvals are refused", "err", err)
	}
	return k
}
