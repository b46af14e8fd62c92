package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/proxy"
	"github.com/idnhq/idn/replay"
)

// nilConnections answers every lookup with a nil *Resolved, as a buggy
// implementation might.
type nilConnections struct{}

func (nilConnections) Lookup(string) (*credvault.Resolved, bool) { return nil, true }

// A proxy.Connections written outside credvault may hand the handler a
// connection it cannot use; the agent gets an error envelope with a stable
// code, never a dropped connection from a panic, and the upstream sees
// nothing.
func TestConnectionsOfOtherImplementations(t *testing.T) {
	t.Parallel()
	agent, _ := identity.New("alice")
	var reached atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		// Echoing the credential would be redacted: say whether it arrived.
		io.WriteString(w, strconv.FormatBool(r.Header.Get("Authorization") == "Bearer from-the-environment"))
	}))
	defer upstream.Close()
	built, err := credvault.NewResolved(&credvault.Connection{ID: "svc", BaseURL: upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "TOKEN"}, "from-the-environment")
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name        string
		connections proxy.Connections
		status      int
		code        string // "" for a forwarded answer
	}{
		{"built_with_NewResolved", connectionMap{"svc": built}, 200, ""},
		{"literal_resolved_without_credential",
			connectionMap{"svc": {Connection: &credvault.Connection{ID: "svc", Protocol: "http", BaseURL: upstream.URL,
				AuthMode: credvault.AuthBearer, AuthSecretKey: "TOKEN"}}}, 500, "CREDENTIAL_UNRESOLVED"},
		{"literal_resolved_without_connection", connectionMap{"svc": {}}, 500, "CONNECTION_MISCONFIGURED"},
		{"nil_resolved_reported_found", nilConnections{}, 500, "CONNECTION_MISCONFIGURED"},
		{"literal_resolved_with_relative_base_url",
			connectionMap{"svc": {Connection: &credvault.Connection{ID: "svc", Protocol: "http", BaseURL: "/api"}}}, 500, "CONNECTION_MISCONFIGURED"},
		{"literal_resolved_with_empty_base_url",
			connectionMap{"svc": {Connection: &credvault.Connection{ID: "svc", Protocol: "http"}}}, 500, "CONNECTION_MISCONFIGURED"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			nonces, _ := replay.New(replay.Config{})
			h, err := proxy.New(proxy.Config{Connections: row.connections, Claims: newClaims(agent, "svc"), Nonces: nonces})
			if err != nil {
				t.Fatal(err)
			}
			gw := httptest.NewServer(h)
			defer gw.Close()
			before := reached.Load()
			client := &http.Client{Transport: agent.Transport(nil, identity.SignOptions{})}
			resp, err := client.Get(gw.URL + "/proxy/svc/x")
			if err != nil {
				t.Fatalf("no answer (a panic drops the connection): %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env struct{ Code string }
			_ = json.Unmarshal(body, &env)
			if resp.StatusCode != row.status || env.Code != row.code {
				t.Fatalf("answer %d %s, want %d %s", resp.StatusCode, body, row.status, row.code)
			}
			if row.code == "" && string(body) != "true" {
				t.Errorf("upstream did not get the credential")
			}
			if forwarded := reached.Load() > before; forwarded != (row.code == "") {
				t.Errorf("upstream reached = %v", forwarded)
			}
			if strings.Contains(string(body), "from-the-environment") && row.code != "" {
				t.Errorf("an error answer shows the credential: %s", body)
			}
		})
	}
}
