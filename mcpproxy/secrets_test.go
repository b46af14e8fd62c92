package mcpproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/mcpproxy"
)

// credTransport injects a bearer token, as the credential vault's transport
// does, and can be told to fail with an error that quotes the token.
type credTransport struct {
	token   string
	leakErr atomic.Bool
}

func (c *credTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.leakErr.Load() {
		return nil, fmt.Errorf("vault: token %s rejected for %s", c.token, r.URL)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+c.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const querySecret, headerSecret = "QSECRET-4f9a", "HSECRET-77c1"
	var logs bytes.Buffer
	var mu sync.Mutex
	var stored []string
	cred := &credTransport{token: headerSecret}
	cfg := mcpproxy.Config{
		// Every failure must reach the upstream, not an open breaker.
		Options: mcpproxy.Options{BreakerFailures: -1},
		Logger:  slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnDiscovery: func(_ context.Context, _ string, d mcpproxy.Discovery) {
			mu.Lock()
			defer mu.Unlock()
			stored = append(stored, d.LastError)
		},
	}
	e := newEnv(t, cfg, mcpproxy.Connection{
		Endpoint:  "/mcp?api_key=" + querySecret,
		Transport: cred,
		Redact:    []string{headerSecret},
	})

	wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusOK, "")
	e.up.mu.Lock()
	gotAuth := e.up.seen[0].Get("Authorization")
	e.up.mu.Unlock()
	if gotAuth != "Bearer "+headerSecret {
		t.Fatalf("upstream saw Authorization %q: credential transport not used", gotAuth)
	}

	var answers []string
	check := func(r response) {
		if r.status != http.StatusBadGateway {
			t.Errorf("status %d, want 502: %s", r.status, r.raw)
		}
		answers = append(answers, r.raw)
	}
	// The credential transport fails with an error quoting the token and URL.
	cred.leakErr.Store(true)
	check(e.do(http.MethodGet, "/mcp/mcp1/tools?refresh=force", "s", ""))
	check(e.call("s", "a.echo", `{"text":"x"}`))
	cred.leakErr.Store(false)
	// The upstream is gone: Go's dial error quotes the full URL.
	e.up.srv.Close()
	check(e.do(http.MethodGet, "/mcp/mcp1/tools?refresh=force", "s", ""))
	check(e.call("s", "a.echo", `{"text":"x"}`))
	_, err := e.proxy.Discover(context.Background(), mustConn(t, e), mcpproxy.RefreshForce)
	if !errors.Is(err, mcpproxy.ErrUpstream) {
		t.Fatalf("Discover error = %v, want ErrUpstream", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(stored) < 3 || stored[len(stored)-1] == "" {
		t.Fatalf("stored discovery errors = %q", stored)
	}
	places := map[string]string{
		"responses":       strings.Join(answers, "\n"),
		"logs":            logs.String(),
		"stored errors":   strings.Join(stored, "\n"),
		"returned errors": err.Error(),
	}
	for where, text := range places {
		for _, secret := range []string{querySecret, headerSecret, "api_key="} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain %q:\n%s", where, secret, text)
			}
		}
	}
	if !strings.Contains(logs.String(), "[redacted]") {
		t.Errorf("logs show no scrubbed error at all:\n%s", logs.String())
	}
}

// TestDiscoveryShortSecretKeepsCatalogue: a secret that is one letter,
// "t", is replaced once in what the upstream says (names, descriptions),
// and never in the gateway's own discovery fields ("tools"), so the
// stored catalogue keeps every tool.
func TestDiscoveryShortSecretKeepsCatalogue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Redact: []string{"t"}})
	d, err := e.proxy.Discover(context.Background(), mustConn(t, e), mcpproxy.RefreshForce)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tools) != 6 {
		t.Fatalf("discovery kept %d tools, want 6: %+v", len(d.Tools), d)
	}
	for _, tool := range d.Tools {
		if tool.Name == "a.echo" && tool.Description != "echoes [redacted]ex[redacted]" {
			t.Errorf("description = %q, want each t replaced once", tool.Description)
		}
		if tool.Name == "a.o[redacted]her" {
			return
		}
	}
	t.Errorf("tool a.other not found with its t replaced once: %+v", d.Tools)
}
