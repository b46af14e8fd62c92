package controlplane

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/idnhq/idn/identity"
)

// TestPairedGatewayAuthority: a gateway its owner paired reads the feeds
// of, files claims for and verifies claims of that owner's services with
// its signature alone, and of nobody else's; a key that is not paired, or
// no longer, stands for nothing.
func TestPairedGatewayAuthority(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		agent := newAgent(t, "agent-one")
		s := e.seed(map[string]any{
			"namespaces": []string{"alice", "bob", "agent-one"},
			"services":   []map[string]any{{"slug": "alice-api", "name": "Alice API", "owner": "alice"}, {"slug": "bob-api", "name": "Bob API", "owner": "bob"}},
			"claims": []map[string]any{
				{"namespace": "agent-one", "service": "alice-api", "public_key": pubKey(agent), "status": "approved"},
				{"namespace": "agent-one", "service": "bob-api", "public_key": pubKey(agent), "status": "approved"},
			},
		})
		g := e.pairedGateway(s.Sessions["alice"])
		by := func(id *identity.Identity) reqOpt { return signedBy(id, identity.SignOptions{}) }
		feed := func(slug string) string { return "/v1/namespaces/claims?service=" + url.QueryEscape(slug) }
		submission := func(slug string) map[string]any {
			return map[string]any{"namespace": "agent-one", "public_key": pubKey(newAgent(t, "agent-one")), "service": slug}
		}
		verify := "/v1/verify?namespace=agent-one&public_key=" + url.QueryEscape(pubKey(agent)) + "&service="

		t.Run("reads its owner's feed", func(t *testing.T) {
			var page struct {
				Claims []struct{ Service string }
				Cursor string
			}
			json.Unmarshal(e.do("GET", feed("alice-api"), nil, by(g.id)).want(t, http.StatusOK, "").body, &page)
			if len(page.Claims) != 1 || page.Claims[0].Service != "alice-api" || page.Cursor == "" {
				t.Fatalf("feed = %+v", page)
			}
			e.do("GET", feed("alice-api")+"&since="+page.Cursor, nil, by(g.id)).want(t, http.StatusOK, "")
		})
		t.Run("files and verifies for its owner's service", func(t *testing.T) {
			e.do("POST", "/v1/claims", submission("alice-api"), by(g.id)).want(t, http.StatusCreated, "")
			var v struct{ Authorized bool }
			json.Unmarshal(e.do("GET", verify+"alice-api", nil, by(g.id)).want(t, http.StatusOK, "").body, &v)
			if !v.Authorized {
				t.Fatal("verify: the approved claim is not authorized")
			}
		})

		stranger := newAgent(t, g.id.Namespace) // the gateway's namespace, another key
		attacks := []struct {
			name, method, path string
			body               any
			opts               []reqOpt
			status             int
			code               string
		}{
			{"paired gateway reads another owner's feed", "GET", feed("bob-api"), nil, []reqOpt{by(g.id)}, http.StatusForbidden, "NAMESPACE_FORBIDDEN"},
			{"paired gateway reads another owner's changes", "GET", feed("bob-api") + "&since=c1", nil, []reqOpt{by(g.id)}, http.StatusForbidden, "NAMESPACE_FORBIDDEN"},
			{"paired gateway files for another owner's service", "POST", "/v1/claims", submission("bob-api"), []reqOpt{by(g.id)}, http.StatusForbidden, "NAMESPACE_FORBIDDEN"},
			{"paired gateway verifies another owner's claim", "GET", verify + "bob-api", nil, []reqOpt{by(g.id)}, http.StatusForbidden, "NAMESPACE_FORBIDDEN"},
			{"paired gateway probes a service that does not exist", "GET", feed("nobody-api"), nil, []reqOpt{by(g.id)}, http.StatusForbidden, "NAMESPACE_FORBIDDEN"},
			{"paired gateway names no service", "GET", "/v1/namespaces/claims", nil, []reqOpt{by(g.id)}, http.StatusBadRequest, "VALIDATION_ERROR"},
			{"unpaired key reads a feed", "GET", feed("alice-api"), nil, []reqOpt{by(newAgent(t, "gw-other"))}, http.StatusUnauthorized, "API_KEY_INVALID"},
			{"unpaired key files a claim", "POST", "/v1/claims", submission("alice-api"), []reqOpt{by(newAgent(t, "gw-other"))}, http.StatusUnauthorized, "API_KEY_INVALID"},
			{"another key under the paired gateway's namespace", "GET", feed("alice-api"), nil, []reqOpt{by(stranger)}, http.StatusUnauthorized, "API_KEY_INVALID"},
			{"paired gateway with a wrong API key gets no fallback", "GET", feed("alice-api"), nil, []reqOpt{withKey("idn_sk_wrong"), by(g.id)}, http.StatusUnauthorized, "API_KEY_INVALID"},
			{"paired gateway with another owner's API key reads only that service", "GET", feed("alice-api"), nil, []reqOpt{withKey(s.APIKeys["bob-api"]), by(g.id)}, http.StatusForbidden, "SERVICE_MISMATCH"},
		}
		for _, a := range attacks {
			t.Run(a.name, func(t *testing.T) {
				e.do(a.method, a.path, a.body, a.opts...).want(t, a.status, a.code)
			})
		}

		t.Run("replayed paired request", func(t *testing.T) {
			req, _ := http.NewRequest("GET", e.ts.URL+feed("alice-api"), nil)
			if err := g.id.Sign(req, identity.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			again := req.Clone(req.Context())
			e.send(req).want(t, http.StatusOK, "")
			e.send(again).want(t, http.StatusForbidden, "AUTH_REPLAY_DETECTED")
		})

		t.Run("gateway unpaired mid-way is refused at once", func(t *testing.T) {
			e.do("GET", feed("alice-api"), nil, by(g.id)).want(t, http.StatusOK, "")
			e.do("DELETE", "/v1/gateways/"+g.ready.GatewayID, nil, withSession(s.Sessions["alice"])).want(t, http.StatusNoContent, "")
			e.do("GET", feed("alice-api"), nil, by(g.id)).want(t, http.StatusUnauthorized, "API_KEY_INVALID")
			e.do("POST", "/v1/claims", submission("alice-api"), by(g.id)).want(t, http.StatusUnauthorized, "API_KEY_INVALID")
		})
	})
}
