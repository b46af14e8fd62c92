package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idnhq/idn/claimcache"
)

// An agent whose claim cannot be filed is told why, with the control
// plane's code when the cause is its own and AUTH_CLAIM_SUBMIT_FAILED when
// it is the gateway's; never that an owner must approve a claim that does
// not exist. The gateway's log line for the refusal carries the request id
// the agent got.
func TestClaimSubmissionRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		answer     error
		receipt    claimcache.Receipt
		wantStatus int
		wantCode   string
		wantText   string // in the message
		wantClaim  bool
		wantCPCode string // details.control_plane_code
		wantLogged bool
	}{
		{name: "namespace not registered", answer: &claimcache.StatusError{Op: "submit", StatusCode: 404, Code: "NAMESPACE_NOT_FOUND"},
			wantStatus: 404, wantCode: "NAMESPACE_NOT_FOUND", wantText: `namespace "stranger-ns" is not registered`, wantLogged: true},
		{name: "namespace deactivated", answer: &claimcache.StatusError{Op: "submit", StatusCode: 403, Code: "NAMESPACE_DEACTIVATED"},
			wantStatus: 403, wantCode: "NAMESPACE_DEACTIVATED", wantText: "deactivated", wantLogged: true},
		{name: "pending limit of the namespace", answer: &claimcache.StatusError{Op: "submit", StatusCode: 429, Code: "PENDING_LIMIT_REACHED"},
			wantStatus: 429, wantCode: "PENDING_LIMIT_REACHED", wantText: "too many pending claims", wantLogged: true},
		{name: "pending limit of the address", answer: &claimcache.StatusError{Op: "submit", StatusCode: 429, Code: "AGENT_PENDING_LIMIT_REACHED"},
			wantStatus: 429, wantCode: "AGENT_PENDING_LIMIT_REACHED", wantText: "address", wantLogged: true},
		{name: "gateway's api key refused", answer: &claimcache.StatusError{Op: "submit", StatusCode: 401, Code: "API_KEY_INVALID"},
			wantStatus: 502, wantCode: "AUTH_CLAIM_SUBMIT_FAILED", wantCPCode: "API_KEY_INVALID", wantLogged: true},
		{name: "control plane answers without a code", answer: &claimcache.StatusError{Op: "submit", StatusCode: 500},
			wantStatus: 502, wantCode: "AUTH_CLAIM_SUBMIT_FAILED", wantLogged: true},
		{name: "control plane unreachable", answer: errors.New("claimcache: submit: dial tcp: connection refused"),
			wantStatus: 502, wantCode: "AUTH_CLAIM_SUBMIT_FAILED", wantLogged: true},
		{name: "gateway's own rate limit", answer: claimcache.ErrRateLimited,
			wantStatus: 429, wantCode: "AUTH_CLAIM_SUBMIT_RATE_LIMITED"},
		{name: "approved but not loaded yet", receipt: claimcache.Receipt{ClaimID: "clm_x", Status: "approved"},
			wantStatus: 503, wantCode: "AUTH_CLAIMS_UNAVAILABLE", wantText: "clm_x is approved", wantClaim: true},
		{name: "pending", receipt: claimcache.Receipt{ClaimID: "clm_x", Status: "pending"},
			wantStatus: 403, wantCode: "AUTH_CLAIM_REQUIRED", wantClaim: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, gatewayOptions{submitter: func(*gateway, ClaimSubmitter) ClaimSubmitter {
				return submitFunc(func(context.Context, claimcache.Submission) (claimcache.Receipt, error) {
					return tt.receipt, tt.answer
				})
			}})
			a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", ""))
			if a.status != tt.wantStatus || a.env["code"] != tt.wantCode {
				t.Fatalf("got %d %s, want %d %s", a.status, a.body, tt.wantStatus, tt.wantCode)
			}
			if msg, _ := a.env["error"].(string); !strings.Contains(msg, tt.wantText) || strings.Contains(msg, "must approve the claim") != (tt.wantCode == "AUTH_CLAIM_REQUIRED") {
				t.Errorf("message %q, want it to say %q and to ask for an approval only of a filed claim", msg, tt.wantText)
			}
			if _, ok := a.env["claim_id"]; ok != tt.wantClaim {
				t.Errorf("claim_id present %v, want %v: %s", ok, tt.wantClaim, a.body)
			}
			details, _ := a.env["details"].(map[string]any)
			if tt.wantCPCode != "" && details["control_plane_code"] != tt.wantCPCode {
				t.Errorf("details %v, want control_plane_code %s", details, tt.wantCPCode)
			}
			id := a.header.Get("X-Request-Id")
			if id == "" || a.env["request_id"] != id {
				t.Fatalf("request id: header %q, envelope %v", id, a.env["request_id"])
			}
			logged := false
			sc := bufio.NewScanner(strings.NewReader(g.logs.String()))
			for sc.Scan() {
				var line map[string]any
				if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "claim submission refused" {
					logged = true
					if line["request_id"] != id || line["code"] != tt.wantCode || line["connection_id"] != "github" {
						t.Errorf("log line %s, want request_id %s and code %s", sc.Bytes(), id, tt.wantCode)
					}
				}
			}
			if logged != tt.wantLogged {
				t.Errorf("logged %v, want %v:\n%s", logged, tt.wantLogged, g.logs.String())
			}
		})
	}
}

// The refusals whose cause only the gateway's log can tell are logged
// with the request id of the answer.
func TestServerSideRefusalsLoggedWithRequestID(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	tests := []struct {
		name, path, wantCode, wantMsg string
	}{
		{"service not tracked", "/proxy/untracked/x", "AUTH_CLAIMS_LOOKUP_FAILED", "claims lookup failed"},
		{"upstream unreachable", "/proxy/dead/x", "UPSTREAM_ERROR", "upstream request failed"},
	}
	for _, tt := range tests {
		a := g.do(g.request(g.agent, "GET", tt.path, ""))
		id := a.header.Get("X-Request-Id")
		if a.env["code"] != tt.wantCode || id == "" || a.env["request_id"] != id {
			t.Fatalf("%s: %d %s", tt.name, a.status, a.body)
		}
		found := false
		sc := bufio.NewScanner(strings.NewReader(g.logs.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == tt.wantMsg && line["request_id"] == id && line["code"] == tt.wantCode {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no %q log line with request id %s:\n%s", tt.name, tt.wantMsg, id, g.logs.String())
		}
	}
}
