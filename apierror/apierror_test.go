package apierror

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/errcode"
)

func TestWriteEnvelope(t *testing.T) {
	var gotID string
	h := RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotID = RequestIDFrom(r.Context())
		e := Coded(errcode.AuthClaimsUnavailable, "claims unavailable").With("claim_id", "clm_1")
		e.RetryAfter = 1500 * time.Millisecond
		Write(w, r, e)
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Request-Id", "abc-123")
	h.ServeHTTP(rec, req)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 503 || body["code"] != "AUTH_CLAIMS_UNAVAILABLE" || body["error"] != "claims unavailable" ||
		body["request_id"] != "abc-123" || body["claim_id"] != "clm_1" || gotID != "abc-123" ||
		body["docs_url"] != "https://github.com/idnhq/idn/blob/main/docs/errors.md#AUTH_CLAIMS_UNAVAILABLE" {
		t.Errorf("envelope: %d %v", rec.Code, body)
	}
	if _, err := time.Parse(time.RFC3339, body["timestamp"].(string)); err != nil {
		t.Errorf("timestamp: %v", err)
	}
	if rec.Header().Get("Retry-After") != "2" || rec.Header().Get("X-Request-Id") != "abc-123" ||
		rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get(MarkHeader) != "AUTH_CLAIMS_UNAVAILABLE" {
		t.Errorf("headers: %v", rec.Header())
	}
}

func TestRequestIDValidation(t *testing.T) {
	for name, in := range map[string]string{
		"header injection": "a\r\nSet-Cookie: x",
		"too long":         strings.Repeat("a", 129),
		"spaces":           "a b",
		"empty":            "",
	} {
		var got string
		h := RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = RequestIDFrom(r.Context()) }))
		req := httptest.NewRequest("GET", "/", nil)
		req.Header["X-Request-Id"] = []string{in}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if got == in || !strings.HasPrefix(got, "req_") {
			t.Errorf("%s: request id %q, want a generated one", name, got)
		}
	}
}

func TestDefaultMessage(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, httptest.NewRequest("GET", "/", nil), Coded(errcode.SlugTaken, ""))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 409 || body["code"] != "SLUG_TAKEN" || body["error"] != errcode.SlugTaken.Message() {
		t.Errorf("envelope: %d %v", rec.Code, body)
	}
}
