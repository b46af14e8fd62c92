package gateway_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/testlog"
	"github.com/idnhq/idn/kit/textcap"
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

// TestMetricsAccessBehindAProxy: the gateway's /metrics, by the rule the
// control plane's shares (clientip.Resolver.IsLoopback): a loopback
// client is served; a same-host reverse proxy not listed as trusted is
// refused whatever forwarding header it sends, as a remote client
// without the admin token is; behind a trusted proxy the client it names
// decides.
func TestMetricsAccessBehindAProxy(t *testing.T) {
	t.Parallel()
	const loopback, remote, proxyPeer = "127.0.0.1:4000", "203.0.113.9:4000", "10.0.0.1:4000"
	tests := []struct {
		name    string
		trusted string
		peer    string
		headers map[string]string
		want    int
		code    string
	}{
		{"loopback client", "", loopback, nil, http.StatusOK, ""},
		{"remote client without token", "", remote, nil, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED"},
		{"same-host proxy, untrusted, X-Forwarded-For", "", loopback, map[string]string{"X-Forwarded-For": "203.0.113.9"}, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED"},
		{"same-host proxy, untrusted, Forwarded", "", loopback, map[string]string{"Forwarded": "for=203.0.113.9"}, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED"},
		{"same-host proxy, untrusted, X-Real-IP", "", loopback, map[string]string{"X-Real-IP": "203.0.113.9"}, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED"},
		{"trusted proxy relaying a loopback client", "10.0.0.0/8", proxyPeer, map[string]string{"X-Forwarded-For": "127.0.0.1"}, http.StatusOK, ""},
		{"trusted proxy relaying a remote client", "10.0.0.0/8", proxyPeer, map[string]string{"X-Forwarded-For": "203.0.113.9"}, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := minimalConfig(t)
			if tt.trusted != "" {
				cfg.Proxy.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(tt.trusted)}
			}
			gw, err := gateway.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gw.Close() })
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Host = "127.0.0.1:38100"
			req.RemoteAddr = tt.peer
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			gw.ServeHTTP(rec, req)
			if rec.Code != tt.want || tt.code != "" && !strings.Contains(rec.Body.String(), `"code":"`+tt.code+`"`) {
				t.Fatalf("%d %s, want %d %s", rec.Code, rec.Body, tt.want, tt.code)
			}
		})
	}
}
