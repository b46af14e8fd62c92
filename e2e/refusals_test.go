package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testlog"
)

// TestClaimRefusalsNameTheirCause (issue 28, item 5): an agent whose claim
// the control plane will not take is told why, through a real control
// plane and gateway: its namespace is not registered, or deactivated, or
// the control plane refuses the gateway's own API key. It
// is never told that an owner must approve a claim that does not exist,
// and the gateway's log line about the refusal carries the request id of
// the answer, given by the agent or made by the gateway.
func TestClaimRefusalsNameTheirCause(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.cp.seed(`{"namespaces":["closed"]}`)
	deactivate(t, w.cp, "closed")
	up := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "ok") }))
	t.Cleanup(up.Close)
	var logs testlog.Buffer
	// "mirror" files claims with a key the control plane refuses; the
	// feed of github is read with the key of "github", the first by id.
	mirror := bearer("mirror", up.URL, "upstream-token")
	gw := startGateway(t, w, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		c.ConnectionAPIKey = func(id string) string {
			if id == "mirror" {
				return "idn_sk_revoked"
			}
			return w.apiKey
		}
	}, bearer("github", up.URL, "upstream-token"), mirror)
	eventually(t, 10*time.Second, "the gateway to serve the approved agent", func() bool {
		return call(t, http.DefaultClient, "GET", gw.url+"/proxy/github/user", w.agent, nil).status == http.StatusOK
	})

	tests := []struct {
		name       string
		namespace  string
		connection string
		requestID  string // sent as X-Request-Id; empty lets the gateway make one
		wantStatus int
		wantCode   string
		wantText   string
	}{
		{"namespace never registered", "ghost", "github", "agent-chosen-id.1", 404, "NAMESPACE_NOT_FOUND", `namespace "ghost" is not registered`},
		{"namespace deactivated", "closed", "github", "", 403, "NAMESPACE_DEACTIVATED", `namespace "closed" is deactivated`},
		{"gateway's key refused", "acme", "mirror", "", 502, "AUTH_CLAIM_SUBMIT_FAILED", "could not file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, err := identity.New(tt.namespace)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("GET", gw.url+"/proxy/"+tt.connection+"/user", nil)
			if tt.requestID != "" {
				req.Header.Set("X-Request-Id", tt.requestID)
			}
			if err := agent.Sign(req, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			a, err := do(http.DefaultClient, req)
			if err != nil {
				t.Fatal(err)
			}
			a.want(t, tt.wantStatus, tt.wantCode)
			var env struct {
				Error     string `json:"error"`
				RequestID string `json:"request_id"`
				ClaimID   string `json:"claim_id"`
			}
			_ = json.Unmarshal(a.body, &env)
			if !strings.Contains(env.Error, tt.wantText) || strings.Contains(env.Error, "approve the claim") || env.ClaimID != "" {
				t.Errorf("envelope %s, want it to say %q and name no claim to approve", a.body, tt.wantText)
			}
			id := a.header.Get("X-Request-Id")
			if id == "" || env.RequestID != id || (tt.requestID != "" && id != tt.requestID) {
				t.Fatalf("request id: header %q, envelope %q, sent %q", id, env.RequestID, tt.requestID)
			}
			if line := logLine(logs.String(), "claim submission refused", id); line == nil || line["code"] != tt.wantCode || line["connection_id"] != tt.connection {
				t.Errorf("no log line for request %s with code %s:\n%s", id, tt.wantCode, logs.String())
			}
		})
	}
}

// deactivate marks namespace ns deleted in the control plane's database,
// as an account deletion leaves it.
func deactivate(t *testing.T, cp *controlPlane, ns string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+cp.dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.ExecContext(context.Background(), `UPDATE namespaces SET deactivated_at = $1 WHERE namespace = $2`, time.Now().UnixMicro(), ns)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("deactivate %s: %v (%d rows)", ns, err, n)
	}
}

// logLine returns the first JSON log line with message msg and request id
// id, or nil.
func logLine(logs, msg, id string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg && line["request_id"] == id {
			return line
		}
	}
	return nil
}
