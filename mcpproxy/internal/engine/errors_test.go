package engine

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idnhq/idn/errcode"
)

func TestErrorTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter time.Duration
	}{
		{"not found", fmt.Errorf("store: %w", ErrConnectionNotFound), http.StatusNotFound, "CONNECTION_NOT_FOUND", 0},
		{"disabled", ErrConnectionDisabled, http.StatusForbidden, "CONNECTION_DISABLED", 0},
		{"not mcp", ErrNotMCP, http.StatusBadRequest, "VALIDATION_ERROR", 0},
		{"unknown tool", ErrToolNotFound, http.StatusNotFound, "MCP_TOOL_NOT_FOUND", 0},
		{"filtered", ErrToolForbidden, http.StatusForbidden, "MCP_TOOL_FORBIDDEN", 0},
		{"arguments", &ArgumentsError{Tool: "t", Failures: []ArgumentFailure{{Path: "/a", Message: "m"}}}, http.StatusBadRequest, "MCP_TOOL_ARGUMENTS_INVALID", 0},
		{"rate limited", &RetryError{Err: ErrRateLimited, RetryAfter: 3 * time.Second}, http.StatusTooManyRequests, "MCP_TOOL_RATE_LIMITED", 3 * time.Second},
		{"circuit open", &RetryError{Err: ErrCircuitOpen, RetryAfter: time.Second}, http.StatusServiceUnavailable, "MCP_CIRCUIT_OPEN", time.Second},
		{"upstream", &UpstreamError{ConnectionID: "c", Message: "x"}, http.StatusBadGateway, "UPSTREAM_ERROR", 0},
		{"unknown error hides its text", errors.New(`Post "https://h/?api_key=s": boom`), http.StatusBadGateway, "UPSTREAM_ERROR", 0},
		{"session not found", ErrSessionNotFound, http.StatusNotFound, "MCP_SESSION_NOT_FOUND", 0},
		{"sessions exhausted", &RetryError{Err: ErrSessionsExhausted, RetryAfter: time.Second}, http.StatusServiceUnavailable, "MCP_SESSIONS_EXHAUSTED", time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ToAPIError(tt.err)
			if c := e.Code(); c.Status() != tt.status || c.String() != tt.code || e.RetryAfter != tt.retryAfter {
				t.Errorf("ToAPIError = %d %s %v, want %d %s %v", c.Status(), c, e.RetryAfter, tt.status, tt.code, tt.retryAfter)
			}
			if tt.name == "unknown error hides its text" && e.Message != errcode.UpstreamError.Message() {
				t.Errorf("message = %q", e.Message)
			}
		})
	}
}

// TestSentinelsArePlain: the Proxy's errors carry no code; ErrorCode, used
// where they become answers, is the one place that gives them theirs.
func TestSentinelsArePlain(t *testing.T) {
	t.Parallel()
	for _, row := range own {
		if code, ok := errcode.Of(row.err); ok {
			t.Errorf("%v carries %s", row.err, code)
		}
		if got := ErrorCode(fmt.Errorf("x: %w", row.err)); got != row.code {
			t.Errorf("ErrorCode(%v) = %s, want %s", row.err, got, row.code)
		}
	}
	if code, ok := errcode.Of(&ArgumentsError{Tool: "t"}); ok {
		t.Errorf("ArgumentsError carries %s", code)
	}
}
