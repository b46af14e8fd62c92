// Command quickstart runs a whole idn system on loopback with zero
// configuration and shows it working, step by step:
//
//  1. a control plane (SQLite in the data folder),
//  2. a demo upstream API that wants a bearer token,
//  3. a namespace owner with a registered service and its API key,
//  4. an agent identity,
//  5. a gateway holding the upstream's token in its encrypted vault,
//  6. a signed request the gateway refuses while it files a claim,
//  7. the owner approving the claim through the control-plane API,
//  8. the same request succeeding, with the token injected,
//  9. a one-time link that opens the owner dashboard, signed in as the
//     namespace's owner, on the claim it approved.
//
// It then keeps running and prints commands to try, until Ctrl-C. The link
// is single-use and valid for ten minutes; `quickstart link` prints a
// fresh one for the running quickstart, and a passkey added on the
// dashboard's Account page logs in without one. The data folder is reset at every start, so a second
// quickstart on the same folder refuses to start while the first runs
// (a lock file held for the life of the process), and the first one's
// printed commands keep working; give the second its own --dir.
//
//	go run ./examples/quickstart [--dir DIR] [--once]
//	go run ./examples/quickstart link [--dir DIR] [--next PATH]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/idnhq/idn/claimcache"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
)

const (
	agentNamespace = "quickstart-agent"
	agentName      = "Quickstart weather agent" // what the owner sees on its claim
	serviceSlug    = "demo-weather"
	connectionID   = "weather"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart: "+err.Error())
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	dir                 string
	gatewayAddr, cpAddr string
	once                bool
}

// parseOptions reads args; -h prints the usage to out and gives
// flag.ErrHelp.
func parseOptions(args []string, out io.Writer) (options, error) {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage of quickstart:\n  go run ./examples/quickstart [flags]\n  %s  (a fresh dashboard link)\n\nFlags:\n", linkUsage)
		fs.PrintDefaults()
	}
	var o options
	fs.StringVar(&o.dir, "dir", defaultDir(), "data folder (reset at every start)")
	fs.StringVar(&o.gatewayAddr, "gateway-addr", "127.0.0.1:38100", "gateway listen address (a free port is used if taken)")
	fs.StringVar(&o.cpAddr, "controlplane-addr", "127.0.0.1:8787", "control plane listen address (a free port is used if taken)")
	fs.BoolVar(&o.once, "once", false, "run the demo and exit instead of serving until Ctrl-C")
	return o, fs.Parse(args)
}

func defaultDir() string {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "idn-quickstart")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "idn-quickstart")
	}
	return filepath.Join(os.TempDir(), "idn-quickstart")
}

// demo is the running system.
type demo struct {
	out       io.Writer
	step      int
	dir       string
	cpURL     string
	dashboard string // the control plane's dashboard origin, by the name localhost
	gwURL     string
	upstream  string
	token     string // the upstream's secret, held only by the gateway
	agent     *identity.Identity
	client    *http.Client
}

func (d *demo) say(format string, args ...any) {
	d.step++
	fmt.Fprintf(d.out, "%d. %s\n", d.step, fmt.Sprintf(format, args...))
}

func (d *demo) detail(format string, args ...any) {
	fmt.Fprintf(d.out, "   %s\n", fmt.Sprintf(format, args...))
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "link" {
		return runLink(ctx, args[1:], out)
	}
	o, err := parseOptions(args, out)
	if errors.Is(err, flag.ErrHelp) {
		return nil // help asked for and printed: a success
	}
	if err != nil {
		return err
	}
	start := time.Now()
	d := &demo{out: out, dir: o.dir, token: "demo-upstream-token-" + randomHex(8), client: &http.Client{Timeout: 10 * time.Second}}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	unlock, err := lockDir(o.dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := resetDir(o.dir); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var servers []*http.Server
	defer func() {
		for _, s := range servers {
			shutdown(s)
		}
	}()

	// 1. Control plane.
	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(o.dir, "controlplane", "controlplane.db")})
	if err != nil {
		return err
	}
	defer store.Close()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	cpLn, err := listen(o.cpAddr)
	if err != nil {
		return err
	}
	d.cpURL = "http://" + cpLn.Addr().String()
	// Browsers treat http://localhost as a secure context, where passkeys
	// work and the session cookie may drop Secure: the dashboard is opened
	// by that name.
	d.dashboard = fmt.Sprintf("http://localhost:%d", cpLn.Addr().(*net.TCPAddr).Port)
	// Cookies ignore ports: a cookie name of its own keeps a quickstart on
	// another port from signing the owner out of this one.
	cookie := fmt.Sprintf("%s_%d", controlplane.SessionCookie, cpLn.Addr().(*net.TCPAddr).Port)
	webhookKey := make([]byte, 32)
	_, _ = rand.Read(webhookKey)
	cp, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: secret, SigninLinks: true, InsecureLocalhostCookie: true,
		SessionCookieName: cookie, AllowedOrigins: []string{d.dashboard, d.cpURL}, Auth: controlplane.AuthConfig{Origins: []string{d.dashboard}},
		// The demo's webhook receiver listens on loopback.
		Webhooks: controlplane.WebhookConfig{SecretKey: webhookKey, InsecureAllowPrivateTargets: true}})
	if err != nil {
		return err
	}
	if err := cp.Start(ctx); err != nil { // the webhook worker
		return err
	}
	defer cp.Close()
	servers = append(servers, serve(cpLn, cp))
	d.say("Control plane running at %s (SQLite in %s)", d.cpURL, filepath.Join(o.dir, "controlplane"))

	// 2. Demo upstream.
	upLn, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	d.upstream = "http://" + upLn.Addr().String()
	servers = append(servers, serve(upLn, weatherAPI(d.token)))
	d.say("Demo weather API running at %s; it answers only requests carrying its bearer token", d.upstream)

	// 3. Owner, service and API key through the control plane's API.
	apiKey, err := cp.Provision(ctx, agentNamespace, controlplane.ServiceSpec{Slug: serviceSlug, Name: "Demo Weather", Endpoint: d.upstream})
	if err != nil {
		return fmt.Errorf("provision the owner: %w", err)
	}
	session, _, err := cp.IssueSession(ctx, agentNamespace)
	if err != nil {
		return fmt.Errorf("sign the owner in: %w", err)
	}
	d.say("Registered namespace %q (did:idn:%s) with service %q; its API key goes to the gateway",
		agentNamespace, agentNamespace, serviceSlug)

	// A webhook of the service, to a local receiver.
	hooks := newReceiver()
	hookLn, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	servers = append(servers, serve(hookLn, hooks))
	hookURL := "http://" + hookLn.Addr().String() + "/idn-events"
	whsec, err := d.addWebhook(ctx, cookie+"="+session, hookURL)
	if err != nil {
		return fmt.Errorf("add the webhook: %w", err)
	}
	if err := hooks.setSecret(whsec); err != nil {
		return err
	}
	d.say("Webhook receiver running at %s, subscribed to the claim events of %q", hookURL, serviceSlug)

	// 4. Agent identity.
	agentHome := filepath.Join(o.dir, "agent")
	if d.agent, err = identity.NewNamed(agentNamespace, agentName); err != nil {
		return err
	}
	if err := d.agent.Save(agentHome); err != nil {
		return err
	}
	d.say("Created agent identity %s, named %q", d.agent.KeyID(), d.agent.Name())
	d.detail("public key %s, stored in %s", d.agent.PublicKeyString(), identity.Path(agentHome, agentNamespace))

	// 5. Gateway with the upstream token in its vault.
	gwLn, err := listen(o.gatewayAddr)
	if err != nil {
		return err
	}
	d.gwURL = "http://" + gwLn.Addr().String()
	gw, err := startGateway(ctx, o.dir, d.cpURL, apiKey)
	if err != nil {
		return err
	}
	defer gw.Close()
	defer shutdown(serve(gwLn, gw)) // before Close
	if _, err := gw.Vault().Create(ctx, &credvault.Connection{
		ID: connectionID, Name: "Demo Weather", Service: serviceSlug, BaseURL: d.upstream,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token",
	}, map[string]string{"token": d.token}); err != nil {
		return err
	}
	// The gateway loads the service's claims on its own schedule.
	up, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := gw.Up(up); err != nil {
		return err
	}
	d.say("Gateway running at %s with connection %q → %s (token sealed with AES-256-GCM)", d.gwURL, connectionID, d.upstream)

	// 6. The agent is not approved yet: the gateway files a claim.
	target := d.gwURL + "/proxy/" + connectionID + "/forecast?city=Paris"
	status, body, err := d.signedGet(ctx, target)
	if err != nil {
		return err
	}
	var refusal struct {
		Code    errcode.Code `json:"code"`
		ClaimID string       `json:"claim_id"`
		Status  string       `json:"claim_status"`
	}
	_ = json.Unmarshal(body, &refusal)
	if status != http.StatusForbidden || refusal.Code != errcode.AuthClaimRequired || refusal.ClaimID == "" {
		return fmt.Errorf("expected 403 %s with a claim id, got %d %s", errcode.AuthClaimRequired, status, body)
	}
	d.say("Signed GET %s → %d %s; the gateway filed claim %s (%s)", target, status, refusal.Code, refusal.ClaimID, refusal.Status)

	// 7. The owner approves it.
	var approved struct {
		AgentName string `json:"agent_name"`
	}
	err = d.sendJSON(ctx, http.MethodPost, d.cpURL+"/v1/claims/"+refusal.ClaimID+"/approve",
		map[string]string{"Cookie": cookie + "=" + session}, nil, &approved)
	if err != nil {
		return fmt.Errorf("approve the claim: %w", err)
	}
	d.say("Owner approved claim %s of agent %q (the name its certificate carries) through POST /v1/claims/%s/approve",
		refusal.ClaimID, approved.AgentName, refusal.ClaimID)

	// 8. The same call now goes through, with the token injected.
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, body, err = d.signedGet(ctx, target)
		if err != nil {
			return err
		}
		if status == http.StatusOK || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if status != http.StatusOK {
		return fmt.Errorf("approved request still refused: %d %s", status, body)
	}
	d.say("Signed GET %s → 200 %s", target, strings.TrimSpace(string(body)))
	d.detail("the agent never saw the upstream token; the gateway injected it after checking signature, claim and nonce")
	wait, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := hooks.wait(wait, controlplane.ClaimSubmitted, controlplane.ClaimApproved); err != nil {
		return err
	}
	d.say("The webhook receiver got %s and %s, each signed per Standard Webhooks; the service page lists the deliveries",
		controlplane.ClaimSubmitted, controlplane.ClaimApproved)
	link, _, err := cp.SigninLink(ctx, agentNamespace, "/signin?next="+url.QueryEscape("/claims?status=approved"))
	if err != nil {
		return fmt.Errorf("create a dashboard sign-in link: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.dir, dashboardFile), []byte(d.dashboard+"\n"), 0o600); err != nil {
		return err
	}
	d.say("Open the dashboard as %s to see the approved claim (one-time link, valid 10 minutes):", agentNamespace)
	d.detail("%s", d.dashboard+link)
	d.detail("for a fresh link while this runs: go run ./examples/quickstart link%s", dirFlag(o.dir))
	fmt.Fprintf(out, "\nidn quickstart is working (%.1fs). Try it yourself:\n\n", time.Since(start).Seconds())
	fmt.Fprintf(out, "  IDN_HOME=%s go run ./cmd/idn curl '%s/proxy/%s/forecast?city=Tokyo'\n", agentHome, d.gwURL, connectionID)
	fmt.Fprintf(out, "  IDN_HOME=%s go run ./cmd/idn curl -i %s/v1/namespaces/%s\n", agentHome, d.cpURL, agentNamespace)
	fmt.Fprintf(out, "  curl -s %s/api/admin/connections\n", d.gwURL)
	fmt.Fprintf(out, "  curl -s %s/metrics | grep '^idn_gateway'\n", d.gwURL)
	fmt.Fprintf(out, "  curl -s %s/1.0/identifiers/did:idn:%s\n", d.cpURL, agentNamespace)
	if o.once {
		return nil
	}
	fmt.Fprintf(out, "\nPress Ctrl-C to stop.\n")
	<-ctx.Done()
	fmt.Fprintln(out, "\nStopping…")
	return nil
}

// startGateway composes the gateway with package gateway and starts its
// claims poll.
func startGateway(ctx context.Context, dir, cpURL, apiKey string) (*gateway.Gateway, error) {
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		return nil, err
	}
	gw, err := gateway.New(gateway.Config{
		DataDir:         filepath.Join(dir, "gateway"),
		MasterKey:       key,
		Admin:           admin.AccessOptions{Mode: admin.AccessLoopback},
		ControlPlaneURL: cpURL,
		ServiceAPIKey:   apiKey,
		Claims:          claimcache.Options{RefreshInterval: 2 * time.Second},
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	if err := gw.Start(ctx); err != nil {
		gw.Close()
		return nil, err
	}
	return gw, nil
}

// weatherAPI is the demo upstream: it answers only with its bearer token.
func weatherAPI(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":"missing or wrong token"}`)
			return
		}
		city := r.URL.Query().Get("city")
		if city == "" {
			city = "Nowhere"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"city": city, "forecast": "sunny, 21°C", "path": r.URL.Path})
	})
}

func (d *demo) signedGet(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if err := d.agent.Sign(req, identity.SignOptions{}); err != nil {
		return 0, nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// sendJSON sends a method request to url with in as its JSON body (nil:
// none) and decodes a 2xx answer into out (nil: ignored).
func (d *demo) sendJSON(ctx context.Context, method, url string, headers map[string]string, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// listen binds addr, or a free loopback port when addr is taken.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

func serve(ln net.Listener, h http.Handler) *http.Server {
	srv := gateway.NewServer(h)
	go func() { _ = srv.Serve(ln) }()
	return srv
}

// shutdown stops srv, letting requests in flight finish for a few seconds.
func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
