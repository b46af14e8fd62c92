package controlplane

import (
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"strings"
	"testing"

	"github.com/idnhq/idn/identity"
)

// TestReservedNamespacesCoverRoutes checks every route pattern the server
// registers: each literal path segment that is a valid namespace must be
// reserved, so a route added later cannot shadow a namespace without this
// test failing.
func TestReservedNamespacesCoverRoutes(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, ProviderSQLite)
	patterns := e.srv.mux.patterns
	if len(patterns) < 20 {
		t.Fatalf("found only %d route patterns", len(patterns))
	}
	for _, pattern := range patterns {
		_, path, _ := strings.Cut(pattern, " ")
		if path == "" {
			path = pattern
		}
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, "{") || identity.ValidNamespace(seg) != nil {
				continue
			}
			if web.NamespaceProblem(seg) == nil {
				t.Errorf("route %q has segment %q, which is a valid namespace and not reserved", pattern, seg)
			}
		}
	}
}

// TestRouteWordNamespacesRefused: a namespace named after a route word
// would be accepted and then be unreachable (GET /v1/namespaces/claims is
// the feed), so sign-up and the seed refuse it with a validation error.
func TestRouteWordNamespacesRefused(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, ProviderSQLite)
	for i, ns := range []string{"claims", "Claims", "services", "well-known", "reject-pending"} {
		t.Run(ns, func(t *testing.T) {
			// A client address each, so failed sign-ups do not trip the backoff.
			client := withHeader("X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i+1))
			r := e.do("GET", "/v1/auth/signup/options?namespace="+ns, nil, client).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			if !strings.Contains(r.json(t)["error"].(string), "reserved") {
				t.Errorf("message does not say why: %s", r.body)
			}
			e.do("POST", "/v1/auth/signup", map[string]any{"namespace": ns, "credential": map[string]any{}}, fromBrowser, client).
				want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			e.do("POST", "/v1/test/seed", map[string]any{"namespaces": []string{ns}}, withHeader("X-IDN-Test-Seed-Token", seedToken)).
				want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			e.do("POST", "/v1/test/seed", map[string]any{"claims": []map[string]any{{"namespace": ns, "service": "github",
				"public_key": pubKey(newAgent(t, "acme"))}}}, withHeader("X-IDN-Test-Seed-Token", seedToken)).
				want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			var n int
			if err := e.st.db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM namespaces WHERE namespace = $1`, ns).Scan(&n); err != nil || n != 0 {
				t.Fatalf("namespace %q exists after refusal: %d %v", ns, n, err)
			}
		})
	}
	// A name merely containing a route word is fine.
	e.do("GET", "/v1/auth/signup/options?namespace=claims-bot", nil, withHeader("X-Forwarded-For", "192.0.2.99")).want(t, http.StatusOK, "")
}
