// Package e2e is the fault and abuse suite of the whole system (issue 8,
// item 3): a real control plane on SQLite, the gateway composed by
// package gateway (in process) or the built cmd/gateway binary, and
// upstreams that fail in the ways networks fail. Everything runs on
// loopback under plain go test; every loop is bounded in count and time.
//
// Where a test must wait for something that runs on its own clock (the
// gateway's claims poll, a process coming up), it polls a real request in a
// bounded loop (eventually); everything else is awaited on channels.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/claimcache"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/openapicheck"
)

// freeAddr reserves a loopback port and releases it for the caller to
// listen on (the listeners set SO_REUSEADDR, so a restart may reuse it).
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls cond (a real request each time) until it holds or limit
// passes. The gateway polls its control plane on its own clock, so there
// is nothing to await; the poll interval is short against every limit used.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// controlPlane is a real control plane on a SQLite file at a fixed loopback
// address. stop and start simulate an outage: the database file survives,
// the address stays the same.
type controlPlane struct {
	t         testing.TB
	addr      string
	dbPath    string
	configure func(*controlplane.Config) // nil: the defaults
	st        *controlplane.Store
	srv       *http.Server
	served    chan struct{}
	// activity bounds the activity kept; set it between stop and start.
	activity controlplane.ActivityConfig
}

const seedToken = "e2e-seed-token"

func newControlPlane(t testing.TB) *controlPlane { return newControlPlaneWith(t, nil) }

// newControlPlaneWith is newControlPlane with configure applied to the
// server's Config before New.
func newControlPlaneWith(t testing.TB, configure func(*controlplane.Config)) *controlPlane {
	t.Helper()
	cp := &controlPlane{t: t, addr: freeAddr(t), dbPath: filepath.Join(t.TempDir(), "cp.db"), configure: configure}
	cp.start()
	t.Cleanup(cp.stop)
	return cp
}

func (cp *controlPlane) url() string { return "http://" + cp.addr }

func (cp *controlPlane) start() {
	cp.t.Helper()
	st, err := controlplane.Open(context.Background(), controlplane.StoreConfig{SQLitePath: cp.dbPath})
	if err != nil {
		cp.t.Fatal(err)
	}
	cfg := controlplane.Config{Store: st, JWTSecret: bytes.Repeat([]byte("j"), 32), TestSeedToken: seedToken, Activity: cp.activity}
	if cp.configure != nil {
		cp.configure(&cfg)
	}
	api, err := controlplane.New(cfg)
	if err != nil {
		st.Close()
		cp.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cp.addr)
	if err != nil {
		st.Close()
		cp.t.Fatalf("control plane listen on %s: %v", cp.addr, err)
	}
	cp.st, cp.srv, cp.served = st, &http.Server{Handler: openapicheck.Watch(cp.t, api), ReadHeaderTimeout: 5 * time.Second}, make(chan struct{})
	go func(srv *http.Server, done chan struct{}) { defer close(done); _ = srv.Serve(ln) }(cp.srv, cp.served)
}

// stop closes the listener and every connection at once, like a crash of
// the process, and waits until the server has stopped.
func (cp *controlPlane) stop() {
	if cp.srv == nil {
		return
	}
	_ = cp.srv.Close()
	<-cp.served
	_ = cp.st.Close()
	cp.srv, cp.st = nil, nil
}

// seed posts to the test seed endpoint (POST /v1/test/seed) and decodes the answer.
func (cp *controlPlane) seed(body string) seedAnswer {
	cp.t.Helper()
	req, _ := http.NewRequest("POST", cp.url()+"/v1/test/seed", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", seedToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cp.t.Fatal(err)
	}
	defer res.Body.Close()
	var out seedAnswer
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != 200 {
		cp.t.Fatalf("seed: status %d, %v", res.StatusCode, err)
	}
	return out
}

type seedAnswer struct {
	APIKeys  map[string]string `json:"api_keys"`
	Sessions map[string]string `json:"sessions"`
}

// world is a control plane with owner "acme", its service "github", and
// an agent of acme whose claim on github is approved.
type world struct {
	cp     *controlPlane
	apiKey string // the github service key the gateway reads the feed with
	agent  *identity.Identity
}

func newWorld(t testing.TB) *world {
	t.Helper()
	cp := newControlPlane(t)
	agent, err := identity.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	seeded := cp.seed(fmt.Sprintf(`{"services":[{"slug":"github","owner":"acme"}],"claims":[{"namespace":"acme","service":"github","public_key":%q}]}`,
		agent.PublicKeyString()))
	return &world{cp: cp, apiKey: seeded.APIKeys["github"], agent: agent}
}

// conn is a connection to create in a gateway's store, with its secrets.
type conn struct {
	c       credvault.Connection
	secrets map[string]string
}

// bearer is a connection of service github that injects a bearer token.
func bearer(id, baseURL, token string) conn {
	return conn{c: credvault.Connection{ID: id, Service: "github", BaseURL: baseURL, AuthMode: "bearer", AuthSecretKey: "token"},
		secrets: map[string]string{"token": token}}
}

// inproc is a gateway composed by package gateway, serving on loopback
// in this process with the server gateway.NewServer builds, as
// cmd/gateway serves it.
type inproc struct {
	url string
	gw  *gateway.Gateway
}

// startGateway runs a gateway whose claims feed is w's control plane;
// configure, when set, changes its Config before New.
func startGateway(t testing.TB, w *world, configure func(*gateway.Config), conns ...conn) *inproc {
	t.Helper()
	key, err := credvault.GenerateMasterKey()
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{
		DataDir: t.TempDir(), MasterKey: key, Admin: admin.AccessOptions{Mode: admin.AccessLoopback},
		ControlPlaneURL: w.cp.url(), ServiceAPIKey: w.apiKey,
		Claims: claimcache.Options{TTL: 2 * time.Second, RefreshInterval: time.Second},
	}
	if configure != nil {
		configure(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	ctx := context.Background()
	for _, c := range conns {
		if _, err := gw.Vault().Create(ctx, &c.c, c.secrets); err != nil {
			t.Fatal(err)
		}
	}
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := gateway.NewServer(openapicheck.Watch(t, gw))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
		<-served
	})
	return &inproc{url: "http://" + ln.Addr().String(), gw: gw}
}

// answer is one decoded HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// envelope is the gateway's JSON error body.
type envelope struct {
	Error     string `json:"error"`
	Code      string `json:"code"`
	RequestID string `json:"request_id"`
}

// envelope decodes the body as the error envelope, or reports why not.
func (a answer) envelope() (envelope, error) {
	var e envelope
	if err := json.Unmarshal(a.body, &e); err != nil {
		return e, fmt.Errorf("status %d, body %q is not JSON: %w", a.status, a.body, err)
	}
	if e.Code == "" || e.Error == "" || e.RequestID == "" {
		return e, fmt.Errorf("status %d, envelope %s lacks code, error or request_id", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return e, fmt.Errorf("status %d, envelope with Content-Type %q", a.status, ct)
	}
	return e, nil
}

// want fails unless the answer is status with an envelope of code.
func (a answer) want(t testing.TB, status int, code string) {
	t.Helper()
	e, err := a.envelope()
	if err != nil || a.status != status || e.Code != code {
		t.Fatalf("got %d %s (%v), want %d %s", a.status, a.body, err, status, code)
	}
}

// call sends one request, signed by agent unless agent is nil, and fails
// the test on a transport error. Only for the test's own goroutine.
func call(t testing.TB, client *http.Client, method, url string, agent *identity.Identity, body []byte) answer {
	t.Helper()
	a, err := try(client, method, url, agent, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// try is call for any goroutine: it returns the error.
func try(client *http.Client, method, url string, agent *identity.Identity, body []byte) (answer, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if agent != nil {
		if err := agent.Sign(req, identity.SignOptions{}); err != nil {
			return answer{}, err
		}
	}
	return do(client, req)
}

func do(client *http.Client, req *http.Request) (answer, error) {
	res, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}, nil
}
