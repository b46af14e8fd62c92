package controlplane

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
)

func TestNamespaceEndpoint(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		agent := newAgent(t, "acme")
		s := e.seed(map[string]any{
			"namespaces": []string{"acme"},
			"services":   []map[string]string{{"slug": "github", "owner": "acme"}},
			"claims":     []map[string]string{{"namespace": "acme", "service": "github", "public_key": pubKey(agent)}},
		})
		if len(s.Sessions["acme"]) == 0 || !strings.HasPrefix(s.APIKeys["github"], "idn_sk_") {
			t.Fatalf("seed answered %+v", s)
		}

		m := e.signed("GET", "/v1/namespaces/acme", nil).want(t, http.StatusOK, "").json(t)
		if m["did"] != "did:idn:acme" || m["namespace"] != "acme" || m["active"] != true || m["active_claims"] != 1.0 ||
			!strings.HasPrefix(m["owner"].(string), "usr_") {
			t.Fatalf("namespace = %v", m)
		}
		if _, err := time.Parse(time.RFC3339, m["created_at"].(string)); err != nil {
			t.Fatalf("created_at: %v", err)
		}

		t.Run("bad format 400", func(t *testing.T) {
			e.signed("GET", "/v1/namespaces/-bad-", nil).want(t, 400, "NAMESPACE_INVALID")
			e.signed("GET", "/v1/namespaces/ab", nil).want(t, 400, "NAMESPACE_INVALID")
		})
		t.Run("unsigned 403", func(t *testing.T) {
			e.do("GET", "/v1/namespaces/acme", nil).want(t, 403, "AUTH_IDENTITY_INVALID")
		})
		t.Run("tampered target 403", func(t *testing.T) {
			e.do("GET", "/v1/namespaces/acme", nil, signedBy(e.agent, identity.SignOptions{}),
				func(r *http.Request) { r.URL.Path = "/v1/namespaces/other" }).want(t, 403, "AUTH_SIGNATURE_INVALID")
		})
		t.Run("stale signature 403", func(t *testing.T) {
			e.do("GET", "/v1/namespaces/acme", nil,
				signedBy(e.agent, identity.SignOptions{Created: time.Now().Add(-10 * time.Minute)})).want(t, 403, "AUTH_SIGNATURE_INVALID")
		})
		t.Run("replayed nonce 403", func(t *testing.T) {
			o := identity.SignOptions{Nonce: "nonce-replay-0001"}
			e.do("GET", "/v1/namespaces/acme", nil, signedBy(e.agent, o)).want(t, 200, "")
			e.do("GET", "/v1/namespaces/acme", nil, signedBy(e.agent, o)).want(t, 403, "AUTH_REPLAY_DETECTED")
			// The nonce is scoped by namespace: another agent may use it.
			e.do("GET", "/v1/namespaces/acme", nil, signedBy(agent, o)).want(t, 200, "")
		})
		t.Run("unknown 404", func(t *testing.T) {
			e.signed("GET", "/v1/namespaces/nobody", nil).want(t, 404, "NAMESPACE_NOT_FOUND")
		})
		t.Run("deactivated stays visible", func(t *testing.T) {
			e.seed(map[string]any{"namespaces": []string{"gone"}})
			e.deactivate("gone")
			m := e.signed("GET", "/v1/namespaces/gone", nil).want(t, 200, "").json(t)
			if m["active"] != false {
				t.Fatalf("active = %v", m["active"])
			}
		})
		t.Run("database down 503", func(t *testing.T) {
			e.st.Close()
			e.signed("GET", "/v1/namespaces/acme", nil).want(t, 503, "DATABASE_UNAVAILABLE")
			e.do("GET", "/health", nil).want(t, 503, "")
		})
	})
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	if m := e.do("GET", "/health", nil).want(t, 200, "").json(t); m["status"] != "ok" {
		t.Fatalf("health = %v", m)
	}
	r := e.do("GET", "/v1/nothing-here", nil).want(t, 404, "NOT_FOUND")
	if r.header.Get("X-Request-Id") == "" || r.json(t)["request_id"] != r.header.Get("X-Request-Id") {
		t.Fatalf("request id header %q vs body %s", r.header.Get("X-Request-Id"), r.body)
	}
}

// TestTwoInstancesShareNonces runs two control planes (two pools, two
// handlers) on one PostgreSQL schema: a nonce of a caller with standing (a
// service key) accepted by one is a replay on the other, and both see the
// same claims. A public lookup's nonce is kept in the memory of the
// instance that saw it.
func TestTwoInstancesShareNonces(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t, ProviderPostgres)
	a := newEnv(t, openStore(t, cfg), nil)
	b := newEnv(t, openStore(t, cfg), nil)
	s := a.seed(map[string]any{"namespaces": []string{"shared"}, "services": []map[string]string{{"slug": "shared-svc", "owner": "shared"}}})
	key := withKey(s.APIKeys["shared-svc"])

	verify := "/v1/verify?" + url.Values{"namespace": {"shared"}, "public_key": {pubKey(a.agent)}}.Encode()
	o := identity.SignOptions{Nonce: "shared-nonce-0001"}
	a.do("GET", verify, nil, key, signedBy(a.agent, o)).want(t, 200, "")
	b.do("GET", verify, nil, key, func(r *http.Request) {
		// Same agent, same nonce, signed for instance b's address.
		if err := a.agent.Sign(r, o); err != nil {
			t.Fatal(err)
		}
	}).want(t, 403, "AUTH_REPLAY_DETECTED")
	b.signed("GET", verify, nil, key).want(t, 200, "")

	lookup := identity.SignOptions{Nonce: "lookup-nonce-0001"}
	a.do("GET", "/v1/namespaces/shared", nil, signedBy(a.agent, lookup)).want(t, 200, "")
	a.do("GET", "/v1/namespaces/shared", nil, signedBy(a.agent, lookup)).want(t, 403, "AUTH_REPLAY_DETECTED")
	var rows int
	if err := a.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM nonces WHERE nonce = $1`, lookup.Nonce).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("lookup nonce rows = %d (%v), want none", rows, err)
	}
}
