package controlplane

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGatewayConnectFlow: the control plane starts a connect flow on the
// owner's gateway with its own callback as the redirect URI, and relays
// the provider's redirect (state, iss, code only) to that gateway, once.
// The attack rows: another owner starting a flow on the gateway or
// relaying its redirect, a made-up state, a replayed redirect, a repeated
// parameter, the owner's relay sending the control plane's own methods,
// and a gateway answering a script for the browser to open.
func TestGatewayConnectFlow(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		s := e.seed(map[string]any{"namespaces": []string{"alice", "mallory"}})
		alice, mallory := withSession(s.Sessions["alice"]), withSession(s.Sessions["mallory"])
		g := e.pairedGateway(s.Sessions["alice"])
		gw := g.ready.GatewayID
		var mu sync.Mutex
		var finished []map[string]any
		authURL := "https://accounts.example.com/authorize?client_id=c"
		g.answerWith(func(req rpcRequest) any {
			var p map[string]any
			json.Unmarshal(req.Params, &p)
			switch req.Method {
			case "connections.connect_start":
				if p["redirect_uri"] != e.ts.URL+"/oauth/callback" {
					return rpcRefusal{Code: -32602, Message: "unexpected redirect_uri"}
				}
				return map[string]any{"authorization_url": authURL, "state": "st-" + p["subject"].(string), "expires_at": time.Now().Add(time.Hour)}
			case "connections.connect_finish":
				mu.Lock()
				finished = append(finished, p)
				mu.Unlock()
				if p["subject"] == "carol" {
					return rpcRefusal{Code: -32603, Message: "the provider is down"}
				}
				return map[string]any{"connection_id": p["id"], "subject": p["subject"], "status": "connected"}
			}
			return map[string]any{}
		})
		start := func(subject string, who reqOpt) resp {
			return e.do("POST", "/v1/gateways/"+gw+"/connect", map[string]any{"connection_id": "drive", "subject": subject}, who)
		}
		r := start("alice", alice).want(t, http.StatusOK, "").json(t)
		if r["authorization_url"] != authURL {
			t.Fatalf("start answered %v", r)
		}
		// The flow is kept ten minutes at most, whatever the gateway says.
		if exp, _ := time.Parse(time.RFC3339, r["expires_at"].(string)); exp.After(time.Now().Add(11 * time.Minute)) {
			t.Fatalf("the flow expires at %v", exp)
		}
		start("bob", alice).want(t, http.StatusOK, "")
		start("carol", alice).want(t, http.StatusOK, "")

		step := func(name string, who reqOpt, query string, status int, says string) {
			t.Helper()
			p := e.do("GET", "/oauth/callback?"+query, nil, who)
			if p.status != status || !strings.Contains(string(p.body), says) {
				t.Fatalf("%s: %d, want %d saying %q: %s", name, p.status, status, says, p.body)
			}
		}
		start("mallory", mallory).want(t, http.StatusNotFound, "GATEWAY_NOT_FOUND")
		step("attack: another owner relays alice's redirect", mallory, "state=st-alice&code=c1", http.StatusBadRequest, "No connect flow in progress")
		step("attack: a made-up state", alice, "state=st-made-up&code=c1", http.StatusBadRequest, "No connect flow in progress")
		step("alice's redirect", alice, "state=st-alice&iss="+url.QueryEscape("https://accounts.example.com")+"&code=c1&extra=x", http.StatusOK, "Account connected")
		step("attack: the redirect replayed", alice, "state=st-alice&code=c1", http.StatusBadRequest, "No connect flow in progress")
		step("attack: a repeated iss", alice, "state=st-bob&iss=a&iss=b&code=c2", http.StatusOK, "Account not connected")
		step("bob's flow ended with it", alice, "state=st-bob&code=c2", http.StatusBadRequest, "No connect flow in progress")
		mu.Lock()
		got := finished
		mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("the gateway got %d redirects, want alice's only", len(got))
		}
		q, _ := json.Marshal(got[0])
		if string(q) != `{"id":"drive","query":{"code":"c1","iss":"https://accounts.example.com","state":"st-alice"},"subject":"alice"}` {
			t.Fatalf("connect_finish params %s", q)
		}

		// The relay does not carry the control plane's own methods.
		for _, m := range []string{"connections.connect_start", "connections.connect_finish"} {
			e.do("POST", "/v1/gateways/"+gw+"/rpc", map[string]any{"jsonrpc": "2.0", "id": 1, "method": m,
				"params": map[string]any{"id": "drive", "query": map[string]string{"state": "st-carol", "code": "c3"}}}, alice).
				want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		}
		step("the gateway refuses: its message and code", alice, "state=st-carol&code=c3", http.StatusOK, "the gateway refused: the provider is down (UPSTREAM_ERROR)")
		g.answerWith(func(req rpcRequest) any {
			return map[string]any{"authorization_url": "javascript:alert(document.cookie)", "state": "st-x"}
		})
		start("dave", alice).want(t, http.StatusBadGateway, "UPSTREAM_ERROR")
	})
}
