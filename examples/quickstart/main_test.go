package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/identity"
)

// The quickstart runs the whole system and its demo succeeds.
func TestQuickstartOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	dir := t.TempDir()
	err := run(ctx, []string{"--dir", dir, "--once", "--gateway-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0"}, &out)
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"1. Control plane running",
		"AUTH_CLAIM_REQUIRED; the gateway filed claim clm_",
		"Owner approved claim clm_",
		`of agent "Quickstart weather agent"`,
		`→ 200 {"city":"Paris"`,
		"Webhook receiver running at http://127.0.0.1:",
		"The webhook receiver got claim.submitted and claim.approved",
		"Open the dashboard as quickstart-agent",
		"/signin?next=%2Fclaims%3Fstatus%3Dapproved#idn_sl_",
		"idn quickstart is working",
		"go run ./cmd/idn curl",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "demo-upstream-token-") {
		t.Errorf("output shows the upstream token:\n%s", out.String())
	}

	// The demo service's endpoint, as the dashboard shows it, is the
	// demo upstream's address.
	m := regexp.MustCompile(`Demo weather API running at (\S+);`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no upstream address printed:\n%s", out.String())
	}
	if got := serviceEndpoint(t, dir); got != m[1] {
		t.Errorf("demo service endpoint = %q, want the upstream %q", got, m[1])
	}
}

// serviceEndpoint reads the endpoint of the demo service from the
// control plane database a quickstart left in dir.
func serviceEndpoint(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	st, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: filepath.Join(dir, "controlplane", "controlplane.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp, err := controlplane.New(controlplane.Config{Store: st, JWTSecret: bytes.Repeat([]byte("j"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	session, _, err := cp.IssueSession(ctx, agentNamespace)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/services", nil)
	req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: session})
	rec := httptest.NewRecorder()
	cp.ServeHTTP(rec, req)
	var list struct {
		Services []struct {
			Slug     string `json:"slug"`
			Endpoint string `json:"service_endpoint"`
		} `json:"services"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Services) != 1 || list.Services[0].Slug != serviceSlug {
		t.Fatalf("GET /v1/services: %d %s (%v)", rec.Code, rec.Body, err)
	}
	return list.Services[0].Endpoint
}

// -h prints the usage and is a success: no "exit status 1" after it.
func TestQuickstartHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out); err != nil {
		t.Fatalf("quickstart -h: %v", err)
	}
	if !strings.Contains(out.String(), "Usage of quickstart") || !strings.Contains(out.String(), "-once") {
		t.Errorf("quickstart -h printed:\n%s", out.String())
	}
}

// signalWriter collects output and closes seen once it contains want.
type signalWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.b.String(), w.want)
	w.b.Write(p)
	if !had && strings.Contains(w.b.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A second quickstart on the same folder refuses to start while the first
// runs, and leaves it working: the first run's printed commands still
// succeed. Once the first stops, the folder is free again.
func TestQuickstartTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--dir", dir, "--gateway-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0"}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	first := &signalWriter{want: "Press Ctrl-C", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, first) }()
	select {
	case <-first.seen:
	case err := <-done:
		t.Fatalf("first quickstart ended: %v\n%s", err, first.String())
	case <-time.After(time.Minute):
		t.Fatalf("first quickstart not up after a minute:\n%s", first.String())
	}

	var second bytes.Buffer
	err := run(context.Background(), append(args, "--once"), &second)
	if err == nil || !strings.Contains(err.Error(), "another quickstart (pid ") || !strings.Contains(err.Error(), "--dir") {
		t.Fatalf("second quickstart on the same folder: %v\n%s", err, second.String())
	}

	// The first run's printed `idn curl` command: its agent, its gateway.
	m := regexp.MustCompile(`IDN_HOME=(\S+) go run ./cmd/idn curl '(\S+)'`).FindStringSubmatch(first.String())
	if m == nil {
		t.Fatalf("no idn curl command printed:\n%s", first.String())
	}
	agent, err := identity.Load(m[1], agentNamespace)
	if err != nil {
		t.Fatalf("the first run's agent identity is gone: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, m[2], nil)
	if err := agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Tokyo") {
		t.Fatalf("the first run's printed command now answers %d %s", resp.StatusCode, body)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("first quickstart: %v", err)
	}
	var third bytes.Buffer
	if err := run(context.Background(), append(args, "--once"), &third); err != nil {
		t.Fatalf("quickstart after the first stopped: %v\n%s", err, third.String())
	}
}

// redeem spends a sign-in link as the dashboard's /signin page does and
// returns the status.
func redeem(t *testing.T, link string) int {
	t.Helper()
	origin, token, ok := strings.Cut(link, "#")
	if !ok {
		t.Fatalf("link %q has no token", link)
	}
	origin = origin[:strings.Index(origin, "/signin")]
	req, _ := http.NewRequest(http.MethodPost, origin+"/v1/auth/signin-link", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// After its one-time link is spent, `quickstart link` prints a fresh one
// for the running quickstart, without restarting it (which would wipe its
// data); with no quickstart running it says how to start one.
func TestQuickstartLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	link := func() (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), []string{"link", "--dir", dir, "--next", "/activity"}, &out)
		return out.String(), err
	}
	if out, err := link(); err == nil || !strings.Contains(err.Error(), "no quickstart is running with the data folder "+dir) {
		t.Fatalf("link without a quickstart: %v\n%s", err, out)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := &signalWriter{want: "Press Ctrl-C", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--dir", dir, "--gateway-addr", "127.0.0.1:0", "--controlplane-addr", "127.0.0.1:0"}, w)
	}()
	select {
	case <-w.seen:
	case err := <-done:
		t.Fatalf("quickstart ended: %v\n%s", err, w.String())
	case <-time.After(time.Minute):
		t.Fatalf("quickstart not up after a minute:\n%s", w.String())
	}
	if !strings.Contains(w.String(), "for a fresh link while this runs: go run ./examples/quickstart link --dir "+dir) {
		t.Errorf("the quickstart does not say how to get a fresh link:\n%s", w.String())
	}
	first := regexp.MustCompile(`http://localhost:\d+/signin\S+`).FindString(w.String())
	if got := redeem(t, first); got != http.StatusOK {
		t.Fatalf("the first link: %d", got)
	}
	if got := redeem(t, first); got == http.StatusOK {
		t.Fatal("the first link signs in twice")
	}

	out, err := link()
	if err != nil {
		t.Fatalf("link: %v\n%s", err, out)
	}
	fresh, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(fresh, first[:strings.Index(first, "/signin")]+"/signin?next=%2Factivity#idn_sl_") ||
		!strings.Contains(out, "Add a passkey") {
		t.Fatalf("link printed:\n%s", out)
	}
	if got := redeem(t, fresh); got != http.StatusOK {
		t.Fatalf("the fresh link: %d", got)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("quickstart: %v", err)
	}
	if out, err := link(); err == nil || !strings.Contains(err.Error(), "no quickstart is running") {
		t.Fatalf("link after the quickstart stopped: %v\n%s", err, out)
	}
}
