package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/replay/redisstore"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/proxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	serviceSlug    = "bench"
	httpConnection = "api"
	mcpConnection  = "tools"
	// statelessConnection is the same tools on a server of the stateless
	// revision (MCP 2026-07-28).
	statelessConnection = "tools-stateless"
	echoTool            = "echo"
	upstreamToken       = "bench-upstream-token"
	seedBatch           = 2000 // claims per seed request, well under the 1 MiB body limit
)

// echoArgs are the arguments of the MCP server's echo tool.
type echoArgs struct {
	Text string `json:"text"`
}

// stack is everything the benchmark talks to, all on 127.0.0.1.
type stack struct {
	upstream, baseline, gateway, controlPlane, mcpServer, statelessServer string // base URLs
	gw                                                                    *gateway.Gateway

	agent      *identity.Identity // holds an approved claim for serviceSlug
	feedReader *identity.Identity // signs the feed reads, as a gateway would
	serviceKey string             // the service API key of serviceSlug

	mcpSession    *mcp.ClientSession // the direct client's session
	nativeSession *mcp.ClientSession // a session on the gateway's MCP endpoint, signed
	proxies       *proxyProcess      // runs the gateway and the baseline
	stops         []func()           // run in reverse order by close
}

// startStack starts the upstream, the MCP server, the control plane
// (seeded with claims approved claims, the agent's among them) and the
// child process of the gateway and the baseline, whose errors go to stderr.
// On error it stops what it started.
func startStack(ctx context.Context, dir string, claims int, memoryFeed bool, redisURL string, stderr io.Writer) (s *stack, err error) {
	s = &stack{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.upstream, err = s.serve(http.HandlerFunc(upstreamHandler)); err != nil {
		return s, err
	}
	if s.mcpServer, err = s.serve(mcpHandler(nil)); err != nil {
		return s, err
	}
	if s.statelessServer, err = s.serve(mcpHandler(&mcp.StreamableHTTPOptions{Stateless: true})); err != nil {
		return s, err
	}
	if s.agent, err = identity.New("bench-agent"); err != nil {
		return s, err
	}
	if s.feedReader, err = identity.New("bench-gateway"); err != nil {
		return s, err
	}
	if memoryFeed {
		s.startMemoryFeed(claims)
	} else if err = s.startControlPlane(ctx, dir, claims); err != nil {
		return s, fmt.Errorf("control plane: %w", err)
	}
	p, err := startProxies(ctx, proxyConfig{Upstream: s.upstream, MCPServer: s.mcpServer, StatelessServer: s.statelessServer,
		ControlPlane: s.controlPlane, ServiceKey: s.serviceKey, Dir: dir, Claims: claims, Redis: redisURL}, stderr, startSplit)
	if err != nil {
		return s, fmt.Errorf("gateway and baseline: %w", err)
	}
	s.proxies, s.gateway, s.baseline = p, p.Gateway, p.Baseline
	s.stops = append(s.stops, p.close)
	if err = s.connectMCP(ctx); err != nil {
		return s, fmt.Errorf("direct MCP client: %w", err)
	}
	if err = s.connectNative(ctx); err != nil {
		return s, fmt.Errorf("MCP client of the gateway's endpoint: %w", err)
	}
	return s, nil
}

// close stops everything, last started first.
func (s *stack) close() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// serve serves h on a fresh loopback port with the gateway's server
// timeouts and returns its base URL.
func (s *stack) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := gateway.NewServer(h)
	srv.ErrorLog = log.New(io.Discard, "", 0)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	// Load has ended when servers stop; Close rather than Shutdown, which
	// would wait for connections the clients dialed but never used.
	s.stops = append(s.stops, func() { _ = srv.Close(); <-done })
	return "http://" + ln.Addr().String(), nil
}

// upstreamHandler answers every request with a small JSON body that says
// whether the gateway's injected credential arrived.
func upstreamHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true,"credential":`+strconv.FormatBool(r.Header.Get("Authorization") == "Bearer "+upstreamToken)+"}\n")
}

// mcpHandler is a go-sdk MCP server with one echo tool, refusing requests
// without the upstream credential.
func mcpHandler(opts *mcp.StreamableHTTPOptions) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-mcp", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: echoTool, Description: "Echoes its text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+upstreamToken {
			http.Error(w, "missing upstream credential", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// baselineMessage stands in for a signature base: about the size of the
// idn-rfc9421-v1 base of a small GET.
var baselineMessage = bytes.Repeat([]byte("x"), 900)

// startBaseline serves the physical-limit reference: a bare
// httputil.ReverseProxy to the upstream that does one ed25519.Verify per
// request and nothing else. Its upstream transport matches the gateway's.
func (s *stack) startBaseline() (string, error) {
	target, err := url.Parse(s.upstream)
	if err != nil {
		return "", err
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	sig := ed25519.Sign(key, baselineMessage)
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: proxy.NewTransport(),
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	return s.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ed25519.Verify(pub, baselineMessage, sig) {
			http.Error(w, "bad signature", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	}))
}

// startControlPlane opens a real control plane on SQLite and seeds it
// through its test seed route: one service, and claims approved claims,
// the agent's first.
func (s *stack) startControlPlane(ctx context.Context, dir string, claims int) error {
	st, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "controlplane.db")})
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { st.Close() })
	seedToken, secret := randomHex(16), make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	api, err := controlplane.New(controlplane.Config{Store: st, JWTSecret: secret, TestSeedToken: seedToken})
	if err != nil {
		return err
	}
	if s.controlPlane, err = s.serve(api); err != nil {
		return err
	}

	type claim struct {
		Namespace string `json:"namespace"`
		Service   string `json:"service"`
		PublicKey string `json:"public_key"`
	}
	type service struct {
		Slug  string `json:"slug"`
		Owner string `json:"owner"`
	}
	all := []claim{{s.agent.Namespace, serviceSlug, s.agent.PublicKeyString()}}
	for len(all) < claims {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		all = append(all, claim{"bench-fleet", serviceSlug, identity.FormatPublicKey(pub)})
	}
	for start := 0; start < len(all); start += seedBatch {
		body := map[string]any{"claims": all[start:min(start+seedBatch, len(all))]}
		if start == 0 {
			body["services"] = []service{{serviceSlug, "bench-owner"}}
		}
		var out struct {
			APIKeys map[string]string `json:"api_keys"`
		}
		if err := seed(ctx, s.controlPlane, seedToken, body, &out); err != nil {
			return err
		}
		if start == 0 {
			s.serviceKey = out.APIKeys[serviceSlug]
		}
	}
	if s.serviceKey == "" {
		return errors.New("seed answered no service API key")
	}
	return nil
}

// startMemoryFeed starts claimcachetest's in-memory claims API in place of
// the control plane, with claims approved claims, the agent's first. The
// others are for keys derived from their number, in the agent's namespace
// (so they sit in their table slots as the agent's does), with ids shaped
// like the control plane's.
func (s *stack) startMemoryFeed(claims int) {
	srv := claimcachetest.NewServer()
	s.stops = append(s.stops, srv.Close)
	s.controlPlane, s.serviceKey = srv.URL, srv.APIKey(serviceSlug)
	at := time.Now().UTC().Truncate(time.Second)
	srv.Approve(claimcache.Claim{Namespace: s.agent.Namespace, PublicKey: s.agent.PublicKeyString(), Service: serviceSlug, ApprovedAt: at})
	for i := 1; i < claims; i++ {
		key := sha256.Sum256(binary.LittleEndian.AppendUint64(nil, uint64(i)))
		id := sha256.Sum256(key[:])
		srv.Approve(claimcache.Claim{ID: "clm_" + hex.EncodeToString(id[:11]), Namespace: s.agent.Namespace,
			PublicKey: identity.FormatPublicKey(key[:]), Service: serviceSlug, ApprovedAt: at})
	}
	srv.ExpireChanges() // the log of a million approvals, which no one reads
}

func seed(ctx context.Context, base, token string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/test/seed", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 500))
		return fmt.Errorf("seed: status %d: %s", res.StatusCode, msg)
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// startGateway composes a real gateway with package gateway, configured as
// cmd/gateway would be with defaults, adds the HTTP and MCP connections,
// serves it and waits until it reports ready (claims loaded).
func (s *stack) startGateway(ctx context.Context, dir string, claims int, redisURL string, logger *slog.Logger) error {
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		return err
	}
	var nonces gateway.NonceStore
	if redisURL != "" {
		store, err := redisstore.New(ctx, redisstore.Config{URL: redisURL})
		if err != nil {
			return err
		}
		s.stops = append(s.stops, func() { store.Close() })
		nonces = store
	}
	gw, err := gateway.New(gateway.Config{
		NonceStore:      nonces,
		DataDir:         filepath.Join(dir, "gateway"),
		MasterKey:       key,
		Admin:           admin.AccessOptions{Mode: admin.AccessLoopback},
		ControlPlaneURL: s.controlPlane,
		ServiceAPIKey:   s.serviceKey,
		// The per-namespace tool-call limit (120/min by default) would
		// measure the limiter, not the gateway.
		MCP:    mcpproxy.Options{RateLimitPerMinute: -1},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { gw.Close() })
	s.gw = gw
	secrets := map[string]string{"token": upstreamToken}
	for _, c := range []*credvault.Connection{
		{ID: httpConnection, Service: serviceSlug, Protocol: "http", BaseURL: s.upstream, AuthMode: "bearer", AuthSecretKey: "token"},
		{ID: mcpConnection, Service: serviceSlug, Protocol: "mcp", BaseURL: s.mcpServer, AuthMode: "bearer", AuthSecretKey: "token"},
		{ID: statelessConnection, Service: serviceSlug, Protocol: "mcp", BaseURL: s.statelessServer, AuthMode: "bearer", AuthSecretKey: "token"},
	} {
		if _, err := gw.Vault().Create(ctx, c, secrets); err != nil {
			return err
		}
	}
	if err := gw.Start(context.Background()); err != nil {
		return err
	}
	if s.gateway, err = s.serve(gw); err != nil {
		return err
	}
	ready, cancel := context.WithTimeout(ctx, 15*time.Second+time.Duration(claims)*100*time.Microsecond)
	defer cancel()
	return gw.Up(ready)
}

// connectMCP opens the direct client's session to the MCP server.
func (s *stack) connectMCP(ctx context.Context) error {
	client := newClient()
	client.Transport = bearer{client.Transport}
	c := mcp.NewClient(&mcp.Implementation{Name: "idn-bench", Version: "1.0.0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.mcpServer, HTTPClient: client, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return err
	}
	s.mcpSession = cs
	s.stops = append(s.stops, func() { _ = cs.Close() })
	return nil
}

// connectNative opens a go-sdk session on the gateway's MCP endpoint, every
// request signed by the agent as it is sent (so, unlike the presigned
// targets, the client's signing is part of each call's time).
func (s *stack) connectNative(ctx context.Context) error {
	client := newClient()
	client.Transport = s.agent.Transport(client.Transport, identity.SignOptions{})
	c := mcp.NewClient(&mcp.Implementation{Name: "idn-bench", Version: "1.0.0"}, nil)
	// A 2025-11-25 session, whose id the presigned endpoint target sends:
	// the SDK's client would ask for the stateless revision first.
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.gateway + "/mcp/" + mcpConnection, HTTPClient: client, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return err
	}
	s.nativeSession = cs
	s.stops = append(s.stops, func() { _ = cs.Close() })
	return nil
}

// bearer adds the upstream credential, as the gateway would inject it.
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+upstreamToken)
	return b.base.RoundTrip(r)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tempDir makes the run's scratch directory (databases, gateway data).
func tempDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "idn-bench-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}
