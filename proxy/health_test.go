package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
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
