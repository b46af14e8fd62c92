package gateway_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/internal/testlog"
	"github.com/idnhq/idn/internal/textcap"
	"github.com/idnhq/idn/mcpproxy"
)

// Attack: an MCP upstream answers every request with a JSON-RPC error
// whose message is 1 MB. The gateway logs the failure, and stores it in
// the connection's discovery, with at most textcap.Text bytes of it.
func TestUpstreamErrorTextIsBoundedInTheLog(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("e", 1<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&msg)
		if msg.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": -32000, "message": huge}})
	}))
	t.Cleanup(up.Close)

	var logs testlog.Buffer
	cfg := minimalConfig(t)
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	cfg.Proxy.InsecureUnsignedConnections = []string{"m"}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if _, err := gw.Vault().Create(t.Context(), &credvault.Connection{ID: "m", Protocol: credvault.ProtocolMCP, BaseURL: up.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "upstream-token"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	const n = 5
	for range n {
		resp, err := http.Get(srv.URL + "/mcp/m/tools?refresh=force")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Fatalf("status %d, want the upstream's failure", resp.StatusCode)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "eeee") {
		t.Fatalf("the failure was not logged:\n%.2000s", out)
	}
	res, ok := gw.Vault().Lookup("m")
	if !ok {
		t.Fatal("connection m is gone")
	}
	if d := res.Connection.Extensions[mcpproxy.DiscoveryMember]; !strings.Contains(string(d), "eeee") || len(d) > 2*textcap.Text {
		t.Errorf("stored discovery of %d bytes: %.200s", len(d), d)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if len(line) > 4*textcap.Text {
			t.Errorf("a %d-byte log line: %.200s…", len(line), line)
		}
	}
}
