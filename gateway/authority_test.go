package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
)

// pairedControlPlane answers the feed and the submissions of requests that
// carry no Authorization header, as a control plane answers a paired
// gateway's, and refuses any that carry one; it records what it was sent.
type pairedControlPlane struct {
	*httptest.Server
	mu   sync.Mutex
	sent []string // "GET /v1/namespaces/claims?service=…" or "POST /v1/claims", with " key" when a key came
}

func newPairedControlPlane(t *testing.T) *pairedControlPlane {
	cp := &pairedControlPlane{}
	cp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := r.Method + " " + r.URL.Path
		if r.Method == http.MethodGet {
			what += "?service=" + r.URL.Query().Get("service")
		}
		_, keyed := r.Header["Authorization"]
		if keyed {
			what += " key"
		}
		cp.mu.Lock()
		cp.sent = append(cp.sent, what)
		cp.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case keyed:
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"code":"API_KEY_INVALID","error":"this control plane takes a paired gateway's signature only"}`))
		case r.URL.Query().Get("service") == "not-the-owners":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"code":"NAMESPACE_FORBIDDEN","error":"the service is not one of the services of the owner who paired this gateway"}`))
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"claim_id":"clm_paired","status":"pending"}`))
		default:
			w.Write([]byte(`{"claims":[],"pagination":{"limit":2000,"offset":0,"total":0,"has_more":false}}`))
		}
	}))
	t.Cleanup(cp.Close)
	return cp
}

func (cp *pairedControlPlane) requests() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return slices.Clone(cp.sent)
}

// createConnection posts a connection to the gateway's admin API with the
// admin token and returns the status and the decoded answer.
func createConnection(t *testing.T, gw *gateway.Gateway, dataDir, body string) (int, map[string]any) {
	t.Helper()
	token, err := gateway.AdminToken(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/api/admin/connections", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

const weatherConnection = `{"id":"my-weather","service":"weather","base_url":"http://127.0.0.1:1","auth_mode":"bearer","auth_secret_key":"token","secrets":{"token":"t0ken-0123456789"}}`

// TestPairedGatewayNeedsNoServiceKey: a paired gateway with no service API
// key accepts a connection, loads its claims without a restart and files
// claims for it, sending no Authorization header: its signature stands
// for its owner's services.
func TestPairedGatewayNeedsNoServiceKey(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"Config.Paired", "pairing state in DataDir"} {
		t.Run(how, func(t *testing.T) {
			cp := newPairedControlPlane(t)
			cfg := minimalConfig(t)
			cfg.ControlPlaneURL = cp.URL
			if how == "Config.Paired" {
				cfg.Paired = func() bool { return true }
			} else {
				state := `{"gateway_id":"gw_1","namespace":"alice","registry_url":"` + cp.URL + `","paired_at":"2026-01-02T03:04:05Z"}`
				if err := os.WriteFile(filepath.Join(cfg.DataDir, "pairing.json"), []byte(state), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			gw, err := gateway.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gw.Close() })
			if err := gw.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			if status, out := createConnection(t, gw, cfg.DataDir, weatherConnection); status != http.StatusCreated {
				t.Fatalf("create: %d %v", status, out)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := gw.Up(ctx); err != nil {
				t.Fatalf("the new connection's claims never loaded: %v", err)
			}

			agent, _ := identity.New("agent-one")
			srv := httptest.NewServer(gw)
			t.Cleanup(srv.Close)
			req, _ := http.NewRequest("GET", srv.URL+"/proxy/my-weather/today", nil)
			if err := agent.Sign(req, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"claim_id":"clm_paired"`) {
				t.Fatalf("unknown agent: %d %s, want 403 with the filed claim", res.StatusCode, body)
			}
			sent := cp.requests()
			if !slices.Contains(sent, "GET /v1/namespaces/claims?service=weather") || !slices.Contains(sent, "POST /v1/claims") {
				t.Fatalf("requests to the control plane: %q", sent)
			}

			// A service the control plane says is not the owner's is
			// refused at creation, as a slug mistyped in the dashboard
			// would otherwise serve nobody.
			status, out := createConnection(t, gw, cfg.DataDir, strings.Replace(strings.Replace(weatherConnection, `"weather"`, `"not-the-owners"`, 1), "my-weather", "theirs", 1))
			if msg, _ := out["error"].(string); status != http.StatusNotFound || out["code"] != "SERVICE_NOT_FOUND" || !strings.Contains(msg, `"not-the-owners"`) {
				t.Fatalf("another owner's service: %d %v", status, out)
			}
			if _, err := gw.Vault().Connection("theirs"); err == nil {
				t.Fatal("the refused connection was stored")
			}
			// Nor may an update move a connection onto it.
			token, _ := gateway.AdminToken(cfg.DataDir)
			req, _ = http.NewRequest("PATCH", srv.URL+"/api/admin/connections/my-weather", strings.NewReader(`{"service":"not-the-owners"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			res, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound {
				t.Fatalf("moving a connection to another owner's service: %d", res.StatusCode)
			}
			if c, _ := gw.Vault().Connection("my-weather"); c.ServiceSlug() != "weather" {
				t.Fatalf("the connection's service became %q", c.ServiceSlug())
			}
		})
	}
}

// TestUnpairedGatewayRefusesKeylessConnection: a gateway that is not paired
// and has no key for a connection's service refuses the connection at
// creation, naming the variables that would give it one; with a key, or
// for a connection that skips the claim check, it accepts it.
func TestUnpairedGatewayRefusesKeylessConnection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config func(*gateway.Config)
		want   int
	}{
		{"no key, not paired", func(*gateway.Config) {}, http.StatusConflict},
		{"shared key", func(c *gateway.Config) { c.ServiceAPIKey = "idn_sk_shared" }, http.StatusCreated},
		{"the connection's own key", func(c *gateway.Config) {
			c.ConnectionAPIKey = func(id string) string { return map[string]string{"my-weather": "idn_sk_own"}[id] }
		}, http.StatusCreated},
		{"another connection's key only", func(c *gateway.Config) {
			c.ConnectionAPIKey = func(id string) string { return map[string]string{"other": "idn_sk_other"}[id] }
		}, http.StatusConflict},
		{"connection that skips the claim check", func(c *gateway.Config) {
			c.Proxy.InsecureUnsignedConnections = []string{"my-weather"}
		}, http.StatusCreated},
		{"paired", func(c *gateway.Config) { c.Paired = func() bool { return true } }, http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := minimalConfig(t)
			tt.config(&cfg)
			gw, err := gateway.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gw.Close() })
			status, out := createConnection(t, gw, cfg.DataDir, weatherConnection)
			if status != tt.want {
				t.Fatalf("create: %d %v, want %d", status, out, tt.want)
			}
			if status != http.StatusConflict {
				return
			}
			msg, _ := out["error"].(string)
			if out["code"] != "SERVICE_API_KEY_MISSING" || !strings.Contains(msg, "IDN_SERVICE_API_KEY_MY_WEATHER") ||
				!strings.Contains(msg, "gateway pair") {
				t.Fatalf("refusal = %v", out)
			}
			settings, _ := json.Marshal(out["settings"])
			if string(settings) != `["IDN_SERVICE_API_KEY_MY_WEATHER","IDN_SERVICE_API_KEY"]` {
				t.Fatalf("settings = %s", settings)
			}
			if len(gw.Vault().Connections()) != 0 {
				t.Fatal("the refused connection was stored")
			}
		})
	}
}

// TestMissingKeyErrorNamesTheVariables: the feed's failure for a service
// without a key, which the gateway logs at every poll, names the
// variables an operator sets, not only Go fields.
func TestMissingKeyErrorNamesTheVariables(t *testing.T) {
	err := &gateway.MissingKeyError{Service: "weather", Connections: []string{"my-weather", "weather-2"}}
	for _, want := range []string{`service "weather"`, "IDN_SERVICE_API_KEY_MY_WEATHER or IDN_SERVICE_API_KEY_WEATHER_2 or IDN_SERVICE_API_KEY", "gateway pair"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
