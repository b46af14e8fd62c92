package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestServicesAndKeys(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		s := e.seed(map[string]any{"namespaces": []string{"acme", "other"}})
		acme, other := withSession(s.Sessions["acme"]), withSession(s.Sessions["other"])

		created := e.do("POST", "/v1/services", map[string]any{"name": "My GitHub Proxy!", "service_endpoint": "https://gh.example/api"}, acme).
			want(t, 201, "").json(t)
		svc := created["service"].(map[string]any)
		key := created["api_key"].(map[string]any)
		id := svc["id"].(string)
		if svc["slug"] != "my-github-proxy" || svc["owner"] != "acme" || svc["service_endpoint"] != "https://gh.example/api" {
			t.Fatalf("service = %v", svc)
		}
		plain := key["key"].(string)
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(plain, "idn_sk_"))
		if !strings.HasPrefix(plain, "idn_sk_") || err != nil || len(raw) != 32 {
			t.Fatalf("api key %q is not idn_sk_ + base64url(32 bytes)", plain)
		}
		var stored string
		if err := e.st.db.QueryRowContext(context.Background(), `SELECT key_hash FROM api_keys WHERE id = $1`, key["id"]).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(plain))
		if stored != hex.EncodeToString(sum[:]) || strings.Contains(stored, plain) {
			t.Fatalf("stored key is not the SHA-256 of the key")
		}

		t.Run("explicit slug and conflicts", func(t *testing.T) {
			e.do("POST", "/v1/services", map[string]any{"name": "x", "service_endpoint": "https://a.example", "slug": "custom-1"}, acme).want(t, 201, "")
			e.do("POST", "/v1/services", map[string]any{"name": "y", "service_endpoint": "https://a.example", "slug": "custom-1"}, other).want(t, 409, "SLUG_TAKEN")
		})
		t.Run("validation 400", func(t *testing.T) {
			for name, body := range map[string]map[string]any{
				"missing name":          {"service_endpoint": "https://a.example"},
				"missing endpoint":      {"name": "n1"},
				"endpoint not a URL":    {"name": "n1", "service_endpoint": "ftp://x"},
				"endpoint credentials":  {"name": "n1", "service_endpoint": "https://u:p@a.example"},
				"slug upper case":       {"name": "n1", "service_endpoint": "https://a.example", "slug": "Bad"},
				"slug too short":        {"name": "n1", "service_endpoint": "https://a.example", "slug": "ab"},
				"name gives empty slug": {"name": "!!", "service_endpoint": "https://a.example"},
			} {
				t.Run(name, func(t *testing.T) {
					e.do("POST", "/v1/services", body, acme).want(t, 400, "VALIDATION_ERROR")
				})
			}
			e.do("POST", "/v1/services", nil, acme, withHeader("Content-Type", "text/plain")).want(t, 415, "UNSUPPORTED_MEDIA_TYPE")
		})
		t.Run("auth", func(t *testing.T) {
			e.do("GET", "/v1/services", nil).want(t, 401, "ADMIN_UNAUTHORIZED")
			e.do("GET", "/v1/services", nil, withSession("not-a-jwt")).want(t, 401, "ADMIN_UNAUTHORIZED")
			e.do("POST", "/v1/services", map[string]any{"name": "n1", "service_endpoint": "https://a.example"}, acme,
				withHeader("Origin", "https://evil.example")).want(t, 403, "ORIGIN_FORBIDDEN")
			e.do("POST", "/v1/services", map[string]any{"name": "n1", "service_endpoint": "https://a.example"}, acme,
				withHeader("Sec-Fetch-Site", "cross-site")).want(t, 403, "ORIGIN_FORBIDDEN")
			e.do("POST", "/v1/services", map[string]any{"name": "from dashboard", "service_endpoint": "https://a.example"}, acme,
				withHeader("Origin", "http://localhost:8787")).want(t, 201, "")
		})

		list := e.do("GET", "/v1/services", nil, acme).want(t, 200, "").json(t)["services"].([]any)
		if len(list) != 3 {
			t.Fatalf("services = %v", list)
		}
		if l := e.do("GET", "/v1/services", nil, other).want(t, 200, "").json(t)["services"].([]any); len(l) != 0 {
			t.Fatalf("other owner sees %v", l)
		}
		if g := e.do("GET", "/v1/services/"+id, nil, acme).want(t, 200, "").json(t); g["slug"] != "my-github-proxy" {
			t.Fatalf("get = %v", g)
		}
		e.do("GET", "/v1/services/"+id, nil, other).want(t, 404, "SERVICE_NOT_FOUND")
		e.do("GET", "/v1/services/svc_missing", nil, acme).want(t, 404, "SERVICE_NOT_FOUND")

		p := e.do("PATCH", "/v1/services/"+id, map[string]any{"name": "Renamed"}, acme).want(t, 200, "").json(t)
		if p["name"] != "Renamed" || p["service_endpoint"] != "https://gh.example/api" {
			t.Fatalf("patch = %v", p)
		}
		p = e.do("PATCH", "/v1/services/"+id, map[string]any{"service_endpoint": "https://new.example"}, acme).want(t, 200, "").json(t)
		if p["name"] != "Renamed" || p["service_endpoint"] != "https://new.example" {
			t.Fatalf("patch = %v", p)
		}
		e.do("PATCH", "/v1/services/"+id, map[string]any{"slug": "new-slug"}, acme).want(t, 400, "VALIDATION_ERROR")
		e.do("PATCH", "/v1/services/"+id, map[string]any{}, acme).want(t, 400, "VALIDATION_ERROR")
		e.do("PATCH", "/v1/services/"+id, map[string]any{"name": "x"}, other).want(t, 404, "SERVICE_NOT_FOUND")

		// Keys: the limit is 2 active in this env.
		keys := e.do("GET", "/v1/services/"+id+"/keys", nil, acme).want(t, 200, "").json(t)["api_keys"].([]any)
		if len(keys) != 1 || keys[0].(map[string]any)["key"] != nil {
			t.Fatalf("keys = %v (plaintext must never be listed)", keys)
		}
		second := e.do("POST", "/v1/services/"+id+"/keys", nil, acme).want(t, 201, "").json(t)["api_key"].(map[string]any)
		e.do("POST", "/v1/services/"+id+"/keys", nil, acme).want(t, 409, "API_KEY_LIMIT_REACHED")
		e.do("POST", "/v1/services/"+id+"/keys", nil, other).want(t, 404, "SERVICE_NOT_FOUND")

		// Both keys work; a revoked one is refused.
		e.signed("GET", "/v1/namespaces/claims", nil, withKey(plain)).want(t, 200, "")
		e.signed("GET", "/v1/namespaces/claims", nil, withKey(second["key"].(string))).want(t, 200, "")
		e.do("DELETE", "/v1/services/"+id+"/keys/"+key["id"].(string), nil, other).want(t, 404, "API_KEY_NOT_FOUND")
		e.do("DELETE", "/v1/services/"+id+"/keys/"+key["id"].(string), nil, acme).want(t, 204, "")
		e.do("DELETE", "/v1/services/"+id+"/keys/"+key["id"].(string), nil, acme).want(t, 404, "API_KEY_NOT_FOUND")
		e.signed("GET", "/v1/namespaces/claims", nil, withKey(plain)).want(t, 401, "API_KEY_INVALID")
		keys = e.do("GET", "/v1/services/"+id+"/keys", nil, acme).want(t, 200, "").json(t)["api_keys"].([]any)
		if keys[0].(map[string]any)["revoked_at"] == nil || keys[1].(map[string]any)["last_used_at"] == nil {
			t.Fatalf("keys = %v", keys)
		}
		e.do("POST", "/v1/services/"+id+"/keys", nil, acme).want(t, 201, "") // a slot is free again

		// Delete: the service disappears, its keys stop working and its
		// approved claims are revoked (with events).
		agent := newAgent(t, "acme")
		e.seed(map[string]any{"claims": []map[string]string{{"namespace": "acme", "service": "my-github-proxy", "public_key": pubKey(agent)},
			{"namespace": "acme", "service": "my-github-proxy", "public_key": pubKey(newAgent(t, "acme")), "status": "pending"}}})
		e.drainEvents()
		e.do("DELETE", "/v1/services/"+id, nil, other).want(t, 404, "SERVICE_NOT_FOUND")
		e.do("DELETE", "/v1/services/"+id, nil, acme).want(t, 204, "")
		e.do("GET", "/v1/services/"+id, nil, acme).want(t, 404, "SERVICE_NOT_FOUND")
		e.signed("GET", "/v1/namespaces/claims", nil, withKey(second["key"].(string))).want(t, 401, "API_KEY_INVALID")
		if ev := e.events.next(t); ev.Type != EventRevoked || ev.Claim.Service != "my-github-proxy" || ev.Claim.Status != StatusRevoked {
			t.Fatalf("event = %+v", ev)
		}
		if ev := e.events.next(t); ev.Type != EventRejected || ev.Claim.Status != StatusRejected {
			t.Fatalf("event = %+v", ev)
		}
	})
}

func TestSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	s := e.seed(map[string]any{"namespaces": []string{"acme"}})
	tok := s.Sessions["acme"]
	e.do("GET", "/v1/services", nil, withSession(tok)).want(t, 200, "")

	t.Run("minted by IssueSession", func(t *testing.T) {
		tok2, exp, err := e.srv.IssueSession(t.Context(), "acme")
		if err != nil || exp.Before(e.srv.now().Add(7*24*60*60e9-60e9)) {
			t.Fatalf("IssueSession: exp %v, %v", exp, err)
		}
		e.do("GET", "/v1/services", nil, withSession(tok2)).want(t, 200, "")
	})
	t.Run("no session for unknown namespace", func(t *testing.T) {
		if _, _, err := e.srv.IssueSession(t.Context(), "nobody"); !errors.Is(err, sqldb.ErrNamespaceNotFound) {
			t.Fatalf("IssueSession(nobody) = %v", err)
		}
	})
	t.Run("ended in the database", func(t *testing.T) {
		tok3, _, _ := e.srv.IssueSession(t.Context(), "acme")
		if _, err := e.st.db.Exec(context.Background(), `DELETE FROM sessions WHERE namespace = 'acme'`); err != nil {
			t.Fatal(err)
		}
		e.do("GET", "/v1/services", nil, withSession(tok3)).want(t, 401, "ADMIN_UNAUTHORIZED")
	})
	t.Run("expired", func(t *testing.T) {
		tok4, _, _ := e.srv.IssueSession(t.Context(), "acme")
		e.offset.Store(int64(8 * 24 * 60 * 60e9))
		defer e.offset.Store(0)
		e.do("GET", "/v1/services", nil, withSession(tok4)).want(t, 401, "ADMIN_UNAUTHORIZED")
	})
	t.Run("forged with another secret", func(t *testing.T) {
		other, err := New(Config{Store: e.st, JWTSecret: []byte(strings.Repeat("k", 32))})
		if err != nil {
			t.Fatal(err)
		}
		forged, _, _ := other.IssueSession(t.Context(), "acme")
		e.do("GET", "/v1/services", nil, withSession(forged)).want(t, 401, "ADMIN_UNAUTHORIZED")
	})
	t.Run("alg none", func(t *testing.T) {
		parts := strings.Split(tok, ".")
		none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
		e.do("GET", "/v1/services", nil, withSession(none)).want(t, 401, "ADMIN_UNAUTHORIZED")
	})
	t.Run("deactivated namespace", func(t *testing.T) {
		tok5, _, _ := e.srv.IssueSession(t.Context(), "acme")
		e.deactivate("acme")
		e.do("GET", "/v1/services", nil, withSession(tok5)).want(t, 401, "ADMIN_UNAUTHORIZED")
	})
}

func TestCORS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	pre := func(origin string) resp {
		return e.do("OPTIONS", "/v1/services", nil, withHeader("Origin", origin), withHeader("Access-Control-Request-Method", "POST"))
	}
	r := pre("http://localhost:8787").want(t, 204, "")
	if r.header.Get("Access-Control-Allow-Origin") != "http://localhost:8787" || r.header.Get("Access-Control-Allow-Credentials") != "true" ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "PATCH") {
		t.Fatalf("preflight headers = %v", r.header)
	}
	r = pre("https://evil.example").want(t, 403, "ORIGIN_FORBIDDEN")
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("CORS granted to an unlisted origin")
	}
	r = e.do("GET", "/health", nil, withHeader("Origin", "http://localhost:8787")).want(t, 200, "")
	if r.header.Get("Access-Control-Allow-Origin") != "http://localhost:8787" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "ETag") {
		t.Fatalf("simple request headers = %v", r.header)
	}
	if r := e.do("GET", "/health", nil, withHeader("Origin", "https://evil.example")); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("CORS granted to an unlisted origin")
	}
}

func TestSessionCookie(t *testing.T) {
	t.Parallel()
	st := openStore(t, storeConfig(t, ProviderSQLite))
	for _, tc := range []struct {
		name       string
		insecure   bool
		url        string
		wantSecure bool
	}{
		{"production localhost", false, "http://localhost:8787/", true},
		{"local localhost", true, "http://localhost:8787/", false},
		{"local but another host", true, "http://dev.example:8787/", true},
		{"local loopback IP is not localhost", true, "http://127.0.0.1:8787/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(Config{Store: st, JWTSecret: testSecret, InsecureLocalhostCookie: tc.insecure})
			if err != nil {
				t.Fatal(err)
			}
			r, _ := http.NewRequest("GET", tc.url, nil)
			r.Host = r.URL.Host
			c := srv.sessions.Cookie(r, "tok", srv.now().Add(srv.cfg.SessionTTL))
			if c.Name != "idn_session" || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure != tc.wantSecure {
				t.Fatalf("cookie = %+v", c)
			}
		})
	}
}

func TestSeedEndpointConditions(t *testing.T) {
	t.Parallel()
	st := openStore(t, storeConfig(t, ProviderSQLite))
	body := `{"namespaces":["acme"]}`
	for _, tc := range []struct {
		name   string
		token  string // configured
		sent   string
		remote string
		want   int
	}{
		{"enabled, loopback, right token", seedToken, seedToken, "127.0.0.1:5000", 200},
		{"disabled: route absent", "", seedToken, "127.0.0.1:5000", 404},
		{"wrong token", seedToken, "guess", "127.0.0.1:5000", 404},
		{"no token", seedToken, "", "127.0.0.1:5000", 404},
		{"remote peer", seedToken, seedToken, "203.0.113.9:5000", 404},
		{"remote peer spoofing X-Forwarded-For", seedToken, seedToken, "203.0.113.9:5000", 404},
		{"same-host proxy forwarding for a remote client", seedToken, seedToken, "127.0.0.1:5000", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(Config{Store: st, JWTSecret: testSecret, TestSeedToken: tc.token})
			if err != nil {
				t.Fatal(err)
			}
			r, _ := http.NewRequest("POST", "http://cp.test/v1/test/seed", strings.NewReader(body))
			r.RemoteAddr = tc.remote
			r.Header.Set("Content-Type", "application/json")
			switch tc.name {
			case "remote peer spoofing X-Forwarded-For":
				r.Header.Set("X-Forwarded-For", "127.0.0.1")
			case "same-host proxy forwarding for a remote client":
				r.Header.Set("X-Forwarded-For", "203.0.113.9")
			}
			if tc.sent != "" {
				r.Header.Set("X-IDN-Test-Seed-Token", tc.sent)
			}
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status = %d, want %d: %s", w.Code, tc.want, w.Body)
			}
		})
	}
}
