package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	t.Parallel()
	failing := true
	h := &Health{Version: "v1.2.3", Checks: map[string]func(context.Context) error{
		"store":  func(context.Context) error { return nil },
		"claims": func(context.Context) error { return map[bool]error{true: errors.New("never loaded")}[failing] },
	}}
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	if code, body := get("/health"); code != 200 || body["status"] != "ok" || body["version"] != "v1.2.3" {
		t.Errorf("/health: %d %v", code, body)
	}
	if code, body := get("/health/live"); code != 200 || body["status"] != "ok" {
		t.Errorf("/health/live: %d %v", code, body)
	}
	code, body := get("/health/ready")
	checks, _ := body["checks"].(map[string]any)
	if code != 503 || body["status"] != "not_ready" || checks["claims"] != "never loaded" || checks["store"] != "ok" {
		t.Errorf("/health/ready failing: %d %v", code, body)
	}
	failing = false
	if code, body := get("/health/ready"); code != 200 || body["status"] != "ready" {
		t.Errorf("/health/ready: %d %v", code, body)
	}
}

// wedgedNonces never answers until released, as a deadlocked nonce store
// would not.
type wedgedNonces struct{ entered, release chan struct{} }

func (w *wedgedNonces) CheckNonce(context.Context, string, string, time.Time) error {
	w.entered <- struct{}{}
	<-w.release
	return nil
}

func TestReadinessReportsAWedgedRequestPath(t *testing.T) {
	t.Parallel()
	wedge := &wedgedNonces{entered: make(chan struct{}), release: make(chan struct{})}
	g := newGateway(t, gatewayOptions{nonces: wedge})
	health := &Health{Checks: map[string]func(context.Context) error{"requests": g.handler.Progress}}
	ready := func() (int, string) {
		rec := httptest.NewRecorder()
		health.ServeHTTP(rec, httptest.NewRequest("GET", "/health/ready", nil))
		var body struct{ Checks map[string]string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body.Checks["requests"]
	}
	if code, check := ready(); code != 200 {
		t.Fatalf("idle gateway: %d %q", code, check)
	}

	r := g.request(g.agent, "GET", "/proxy/github/repos", "")
	answered := make(chan int)
	go func() {
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-wedge.entered
	if code, check := ready(); code != 200 {
		t.Fatalf("request just wedged: %d %q", code, check)
	}
	g.clock.advance(15*time.Second - time.Nanosecond)
	if code, check := ready(); code != 200 {
		t.Fatalf("wedged for under StuckAfter: %d %q", code, check)
	}
	g.clock.advance(time.Nanosecond)
	if code, check := ready(); code != 503 || !strings.Contains(check, "stuck") {
		t.Fatalf("wedged for StuckAfter: %d %q, want 503 and the stuck request path", code, check)
	}

	close(wedge.release)
	if status := <-answered; status != 200 {
		t.Fatalf("released request: %d", status)
	}
	if code, check := ready(); code != 200 {
		t.Fatalf("after the request went through: %d %q", code, check)
	}
}
