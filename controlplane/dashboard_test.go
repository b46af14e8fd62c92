package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/dashboard"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
)

// page fetches a dashboard path without following redirects.
func (e *env) page(path string, opts ...reqOpt) resp {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range opts {
		o(req)
	}
	client := *e.ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp{status: res.StatusCode, header: res.Header, body: []byte(b.String())}
}

func wantPageHeaders(t *testing.T, path string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", path, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-") {
		t.Errorf("%s: CSP %q allows unsafe code", path, csp)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
		t.Errorf("%s: headers %v lack nosniff or Referrer-Policy same-origin", path, h)
	}
}

// inlineCode finds what the CSP would block: inline scripts, inline event
// handlers, style attributes and javascript: URLs.
var inlineCode = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|<script>|\son[a-z]+=|\sstyle=|javascript:|<style`)

func TestDashboardPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
		withWebhooks(nil)(c)
		c.Auth.Origins = []string{"http://localhost:8787"}
	})
	owner, key := claimWorld(e)
	agent := newAgent(t, "acme")
	e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(t, 201, "")
	gone := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)["claim_id"].(string)
	e.do("POST", "/v1/claims/"+gone+"/approve", nil, owner).want(t, 200, "")
	e.do("POST", "/v1/claims/"+gone+"/revoke", nil, owner).want(t, 200, "")
	turnedDown := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)["claim_id"].(string)
	e.do("POST", "/v1/claims/"+turnedDown+"/reject", nil, owner).want(t, 200, "")
	svcID := e.serviceID(owner)
	e.createWebhook(owner, svcID, map[string]any{"url": "https://hooks.example/idn"})

	for _, tc := range []struct {
		path  string
		owner bool
		want  []string
	}{
		{"/login", false, []string{`<label for="namespace">Namespace</label>`, ">Log in</button>"}},
		{"/signup", false, []string{`<label for="namespace">Namespace</label>`, ">Sign up</button>"}},
		{"/signin", false, []string{"Checking your sign-in link"}},
		{"/claims", true, []string{"Build bot", "a-1", "alice", "127.0.0.1", identity.KeyFragment(agent.PublicKey), ">Approve</button>", ">Reject</button>", `aria-current="page">Pending <span class="count">1</span>`}},
		{"/claims?status=approved", true, []string{"No approved claims"}},
		{"/claims?status=revoked", true, []string{">Approve again</button>", "The agent regains access within a second."}},
		{"/claims?status=rejected", true, []string{">Approve</button>", "which you rejected? The agent gains access within a second."}},
		{"/claims?status=pending&service=github", true, []string{">Reject all pending claims of github</button>"}},
		{"/services", true, []string{">Create service</button>", `<label for="svc-name">Name</label>`, "github"}},
		{"/services/" + svcID, true, []string{`href="/activity?service=github">Activity of this service</a>`, ">Create API key</button>", ">Revoke key</button>", ">Add webhook</button>", ">Send test event</button>", ">Delete webhook</button>", "https://hooks.example/idn"}},
		{"/account", true, []string{">Add passkey</button>", ">Delete account</button>", "Type <strong>acme</strong> to confirm", ">Save settings</button>"}},
		{"/did", true, []string{"did:idn:acme", "/1.0/identifiers/did:idn:acme"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var opts []reqOpt
			if tc.owner {
				opts = append(opts, owner)
			}
			r := e.page(tc.path, opts...)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			wantPageHeaders(t, tc.path, r.header)
			if r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", r.header.Get("Cache-Control"))
			}
			body := string(r.body)
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if m := inlineCode.FindString(body); m != "" {
				t.Errorf("page has inline code the CSP forbids: %q", m)
			}
			if tc.owner {
				if r := e.page(tc.path); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login?next=%2F") {
					t.Errorf("without a session: %d to %q, want 303 to the login page", r.status, r.header.Get("Location"))
				}
			}
		})
	}

	t.Run("without passkeys configured", func(t *testing.T) {
		e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
		s := e.seed(map[string]any{"namespaces": []string{"acme"}})
		for path, want := range map[string]string{"/login": "Passkey sign-in is not configured", "/account": "Passkeys cannot be added here"} {
			var opts []reqOpt
			if path == "/account" {
				opts = append(opts, withSession(s.Sessions["acme"]))
			}
			if r := e.page(path, opts...); r.status != http.StatusOK || !strings.Contains(string(r.body), want) {
				t.Errorf("%s: %d, lacks %q", path, r.status, want)
			}
		}
	})
	t.Run("forged session cookie", func(t *testing.T) {
		if r := e.page("/claims", withSession("not-a-jwt")); r.status != http.StatusSeeOther {
			t.Fatalf("status %d, want the login redirect", r.status)
		}
	})
	t.Run("another owner's service", func(t *testing.T) {
		r := e.page("/services/"+svcID, withSession(e.sessions["bob"]))
		if r.status != http.StatusNotFound || strings.Contains(string(r.body), "github") {
			t.Fatalf("status %d, body %s", r.status, r.body)
		}
	})
	t.Run("service slug in the URL", func(t *testing.T) {
		// An owner who types the slug they know lands on the service.
		if r := e.page("/services/github", owner); r.status != http.StatusSeeOther || r.header.Get("Location") != "/services/"+svcID {
			t.Errorf("/services/github → %d %q, want 303 to /services/%s", r.status, r.header.Get("Location"), svcID)
		}
		r := e.page("/services/no-such-slug", owner)
		if body := string(r.body); r.status != http.StatusNotFound || !strings.Contains(body, "<h1>No such service</h1>") || strings.Contains(body, "Something went wrong") {
			t.Errorf("unknown service: %d %s", r.status, body)
		}
	})
	t.Run("open redirect after login", func(t *testing.T) {
		// The login and sign-in pages carry the checked path for their
		// script, which checks nothing itself.
		for _, page := range []string{"/login", "/signin"} {
			for query, want := range map[string]string{"?next=%2F%09%2Fevil.example": `data-next="/claims"`,
				"?next=%2Fservices%3Fa%3D1%26b%3D2": `data-next="/services?a=1&amp;b=2"`, "": `data-next="/claims"`} {
				if r := e.page(page + query); r.status != http.StatusOK || !strings.Contains(string(r.body), want) {
					t.Errorf("%s%s: %d, lacks %s", page, query, r.status, want)
				}
			}
		}
	})
	t.Run("root", func(t *testing.T) {
		if r := e.page("/"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/login" {
			t.Errorf("anonymous / → %d %q", r.status, r.header.Get("Location"))
		}
		if r := e.page("/", owner); r.status != http.StatusSeeOther || r.header.Get("Location") != "/claims" {
			t.Errorf("owner / → %d %q", r.status, r.header.Get("Location"))
		}
	})
	t.Run("API routes keep their JSON 404", func(t *testing.T) {
		e.do("GET", "/v1/nothing-here", nil).want(t, http.StatusNotFound, "NOT_FOUND")
	})
}

// Markup an owner types (agent names, service names, webhook URLs) is
// text on every page, never markup.
func TestDashboardEscapesStoredText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	owner, key := claimWorld(e)
	agent := newAgent(t, "acme")
	body := submitBody("acme", pubKey(agent), "github")
	body["agent_name"] = `<img src=x onerror=alert(1)>`
	body["subject"] = `"><script>alert(2)</script>`
	e.signed("POST", "/v1/claims", body, withKey(key)).want(t, 201, "")
	r := e.page("/claims", owner)
	if strings.Contains(string(r.body), "<img src=x") || strings.Contains(string(r.body), "<script>alert") {
		t.Fatalf("stored text rendered as markup:\n%s", r.body)
	}
}

// A claim's registry transactions link to the chain's block explorer, and
// a failed write shows its reason.
func TestDashboardRegistryTransactions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
		c.Registry.ExplorerURL = "https://sepolia.basescan.org/"
	})
	owner, key := claimWorld(e)
	ok := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)
	failed := e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key)).want(t, 201, "").json(t)
	hash := "0x" + strings.Repeat("ab", 32)
	if _, err := e.st.db.Exec(context.Background(), `UPDATE claims SET status = 'approved', approved_at = created_at, approval_tx_hash = $1 WHERE id = $2`, hash, ok["claim_id"]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.db.Exec(context.Background(), `UPDATE claims SET status = 'approved', approved_at = created_at, registry_error = 'execution reverted: NotRelayer' WHERE id = $1`, failed["claim_id"]); err != nil {
		t.Fatal(err)
	}
	body := string(e.page("/claims?status=approved", owner).want(t, 200, "").body)
	if !strings.Contains(body, `href="https://sepolia.basescan.org/tx/`+hash+`"`) {
		t.Errorf("approved claim's transaction is not linked to the explorer:\n%s", body)
	}
	if !strings.Contains(body, "registry write failed: execution reverted: NotRelayer") {
		t.Errorf("failed registry write is not shown:\n%s", body)
	}
}

func TestDashboardAssets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	for name, ctype := range map[string]string{"app.js": "text/javascript", "api.js": "text/javascript",
		"webauthn.js": "text/javascript", "app.css": "text/css", "icon.svg": "image/svg+xml"} {
		r := e.page(dashboard.AssetsPath() + "/" + name)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) ||
			!strings.Contains(r.header.Get("Cache-Control"), "immutable") || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %v", name, r.status, r.header)
		}
		if old := e.page("/assets/0123456789ab/" + name); old.header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s under another version: Cache-Control %q, want no-cache", name, old.header.Get("Cache-Control"))
		}
	}
	if r := e.page(dashboard.AssetsPath() + "/../dashboard.go"); r.status == http.StatusOK {
		t.Errorf("path traversal: status %d", r.status)
	}
	if r := e.page(dashboard.AssetsPath() + "/nothing.js"); r.status != http.StatusNotFound {
		t.Errorf("unknown asset: status %d", r.status)
	}
}

// TestSigninLink covers the one-time sign-in link of local deployments.
func TestSigninLink(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *env) {
		claimWorld(e)
		create := func(ns string, opts ...reqOpt) resp {
			return e.do("POST", "/v1/test/signin-links", map[string]string{"namespace": ns}, opts...)
		}
		link := func() string {
			m := create("acme", withHeader("X-IDN-Test-Seed-Token", seedToken)).want(t, http.StatusCreated, "").json(t)
			u := m["url"].(string)
			if !strings.HasPrefix(u, e.ts.URL+"/signin#"+"idn_sl_") {
				t.Fatalf("url = %q", u)
			}
			return u[strings.Index(u, "#")+1:]
		}
		redeem := func(token string) resp {
			return e.do("POST", "/v1/auth/signin-link", map[string]string{"token": token})
		}

		token := link()
		r := redeem(token).want(t, http.StatusOK, "")
		var cookie string
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			if c.Name == SessionCookie {
				cookie = c.Value
			}
		}
		e.do("GET", "/v1/auth/me", nil, withSession(cookie)).want(t, http.StatusOK, "")
		if p := e.page("/claims", withSession(cookie)); p.status != http.StatusOK {
			t.Fatalf("dashboard with the link's session: %d", p.status)
		}

		t.Run("replayed link", func(t *testing.T) {
			redeem(token).want(t, http.StatusUnauthorized, "SIGNIN_LINK_INVALID")
		})
		t.Run("made-up token", func(t *testing.T) {
			redeem("idn_sl_"+"AAAA").want(t, http.StatusUnauthorized, "SIGNIN_LINK_INVALID")
		})
		t.Run("expired link", func(t *testing.T) {
			tok := link()
			e.offset.Store(int64(dashboard.SigninLinkTTL + time.Second))
			defer e.offset.Store(0)
			redeem(tok).want(t, http.StatusUnauthorized, "SIGNIN_LINK_INVALID")
		})
		t.Run("stored hashed", func(t *testing.T) {
			tok := link()
			var n int
			if err := e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM signin_links WHERE token_hash = $1`, tok).Scan(&n); err != nil || n != 0 {
				t.Fatalf("plaintext token found in the table (%d, %v)", n, err)
			}
			if err := e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM signin_links WHERE token_hash = $1`, sha256Hex(tok)).Scan(&n); err != nil || n != 1 {
				t.Fatalf("hashed token not stored (%d, %v)", n, err)
			}
		})
		t.Run("without the seed token", func(t *testing.T) {
			create("acme").want(t, http.StatusNotFound, "NOT_FOUND")
			create("acme", withHeader("X-IDN-Test-Seed-Token", "wrong")).want(t, http.StatusNotFound, "NOT_FOUND")
		})
		t.Run("next page", func(t *testing.T) {
			m := e.do("POST", "/v1/test/signin-links", map[string]string{"namespace": "acme", "next": "/claims?status=approved"},
				withHeader("X-IDN-Test-Seed-Token", seedToken)).want(t, http.StatusCreated, "").json(t)
			if u := m["url"].(string); !strings.HasPrefix(u, e.ts.URL+"/signin?next=%2Fclaims%3Fstatus%3Dapproved#"+"idn_sl_") {
				t.Fatalf("url = %q", u)
			}
		})
		t.Run("open redirect in next", func(t *testing.T) {
			for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example"} {
				e.do("POST", "/v1/test/signin-links", map[string]string{"namespace": "acme", "next": next},
					withHeader("X-IDN-Test-Seed-Token", seedToken)).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			}
		})
		t.Run("unknown namespace", func(t *testing.T) {
			create("nobody", withHeader("X-IDN-Test-Seed-Token", seedToken)).want(t, http.StatusNotFound, "NAMESPACE_NOT_FOUND")
		})
		t.Run("cross-site redemption", func(t *testing.T) {
			tok := link()
			e.do("POST", "/v1/auth/signin-link", map[string]string{"token": tok}, withHeader("Origin", "https://evil.example")).
				want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
		})
	})
}

// The link routes serve loopback clients only: a remote client behind a
// trusted proxy gets the 404 of a missing route, with the right token too.
func TestSigninLinkRemoteClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	claimWorld(e)
	remote := withHeader("X-Forwarded-For", "203.0.113.7")
	e.do("POST", "/v1/test/signin-links", map[string]string{"namespace": "acme"}, remote,
		withHeader("X-IDN-Test-Seed-Token", seedToken)).want(t, http.StatusNotFound, "NOT_FOUND")
	m := e.do("POST", "/v1/test/signin-links", map[string]string{"namespace": "acme"},
		withHeader("X-IDN-Test-Seed-Token", seedToken)).want(t, http.StatusCreated, "").json(t)
	tok := m["url"].(string)[strings.Index(m["url"].(string), "#")+1:]
	e.do("POST", "/v1/auth/signin-link", map[string]string{"token": tok}, remote).want(t, http.StatusNotFound, "NOT_FOUND")
}

func TestSigninLinkAbsentWithoutSeed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) { c.TestSeedToken = "" })
	e.do("POST", "/v1/test/signin-links", map[string]string{"namespace": "acme"}, withHeader("X-IDN-Test-Seed-Token", "")).
		want(t, http.StatusNotFound, "NOT_FOUND")
	e.do("POST", "/v1/auth/signin-link", map[string]string{"token": "x"}).want(t, http.StatusNotFound, "NOT_FOUND")
}

// TestWebhookTestEvent sends a test event through the real queue and
// receiver, signed like every delivery.
func TestWebhookTestEvent(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(nil), func(t *testing.T, e *env, _ StoreConfig) {
		rc := newReceiver(t)
		owner, _ := claimWorld(e)
		svcID := e.serviceID(owner)
		// Subscribed to approvals only: a test event goes out all the same.
		whID, secret := e.createWebhook(owner, svcID, map[string]any{"url": rc.ts.URL, "events": []string{EventApproved}})
		rc.setSecret(secret)

		m := e.do("POST", "/v1/services/"+svcID+"/webhooks/"+whID+"/test", nil, owner).want(t, http.StatusAccepted, "").json(t)
		id := m["delivery_id"].(string)
		if m["event_type"] != EventWebhookTest || e.deliverDue() != 1 {
			t.Fatalf("answer %v", m)
		}
		got, bad := rc.counts()
		if got[id] != 1 || bad != 0 {
			t.Fatalf("receiver got %v (bad %d), want delivery %s once", got, bad, id)
		}
		rc.mu.Lock()
		p := rc.bodies[id]
		rc.mu.Unlock()
		if p.Type != EventWebhookTest || p.Data.Namespace != "acme" || p.Data.Service != "github" || p.Data.ClaimID != "" {
			t.Fatalf("payload = %+v", p)
		}
		list := e.do("GET", "/v1/services/"+svcID+"/webhooks/"+whID+"/deliveries", nil, owner).want(t, 200, "").json(t)["deliveries"].([]any)
		if d := list[0].(map[string]any); d["id"] != id || d["status"] != "delivered" || d["attempts"] != float64(1) {
			t.Fatalf("deliveries = %v", list)
		}

		t.Run("another owner's webhook", func(t *testing.T) {
			e.do("POST", "/v1/services/"+svcID+"/webhooks/"+whID+"/test", nil, withSession(e.sessions["bob"])).
				want(t, http.StatusNotFound, "WEBHOOK_NOT_FOUND")
		})
		t.Run("webhook of another service", func(t *testing.T) {
			e.do("POST", "/v1/services/svc_other/webhooks/"+whID+"/test", nil, owner).want(t, http.StatusNotFound, "WEBHOOK_NOT_FOUND")
		})
		t.Run("cross-site request", func(t *testing.T) {
			e.do("POST", "/v1/services/"+svcID+"/webhooks/"+whID+"/test", nil, owner, withHeader("Origin", "https://evil.example")).
				want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
		})
		t.Run("without a session", func(t *testing.T) {
			e.do("POST", "/v1/services/"+svcID+"/webhooks/"+whID+"/test", nil).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
		})
	})
	t.Run("webhooks off", func(t *testing.T) {
		e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
		owner, _ := claimWorld(e)
		e.do("POST", "/v1/services/x/webhooks/y/test", nil, owner).want(t, http.StatusServiceUnavailable, "WEBHOOKS_DISABLED")
	})
}

// populateOwnerClaims inserts n claims of namespace acme over three
// services, in every status, for the claims page's benchmark and budget.
func populateOwnerClaims(tb testing.TB, st *Store, n int) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	if _, err := claimsAPI(st).Provision(ctx, "acme", claims.ServiceSpec{}); err != nil {
		tb.Fatal(err)
	}
	statuses := []string{StatusPending, StatusApproved, StatusApproved, StatusRevoked, StatusRejected, StatusExpired}
	services := []string{"github", "slack", "weather-api"}
	const batch = 400
	for start := 0; start < n; start += batch {
		var (
			rows []string
			args []any
		)
		for i := start; i < min(start+batch, n); i++ {
			pub, _, _ := ed25519.GenerateKey(rand.Reader)
			p := len(args)
			rows = append(rows, fmt.Sprintf("($%d, 'acme', $%d, $%d, '198.51.100.23', 'alice@example.com', $%d, 'Research assistant', $%d, $%d, $%d)",
				p+1, p+2, p+3, p+4, p+5, p+6, p+6))
			args = append(args, sqldb.NewID("clm_"), identity.FormatPublicKey(pub), services[i%len(services)],
				fmt.Sprintf("agent-%d", i), statuses[i%len(statuses)], sqldb.Micros(now.Add(-time.Duration(n-i)*time.Minute)))
		}
		if _, err := st.db.Exec(ctx, `INSERT INTO claims (id, namespace, public_key, service, agent_ip, subject, agent_id, agent_name, status, created_at, updated_at)
			VALUES `+strings.Join(rows, ", "), args...); err != nil {
			tb.Fatal(err)
		}
	}
	if st.db.PG() {
		st.db.Exec(ctx, `ANALYZE claims`)
	}
}

// assetRef finds the same-origin files a page or module loads.
var assetRef = regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"|from '\./([a-z]+\.js)'`)

// TestClaimsPageTransferBudget adds up everything a browser fetches to show
// the claims page of a namespace with 10,000 claims: the HTML, the style
// sheet, the icon and every module, following imports.
func TestClaimsPageTransferBudget(t *testing.T) {
	t.Parallel()
	const budget = 100 << 10
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	s := e.seed(map[string]any{"namespaces": []string{"acme"}})
	populateOwnerClaims(t, e.st, 10_000)
	r := e.page("/claims", withSession(s.Sessions["acme"]))
	if r.status != http.StatusOK || strings.Count(string(r.body), "<tr data-id=") != dashboard.PageSize {
		t.Fatalf("status %d, rows %d", r.status, strings.Count(string(r.body), "<tr data-id="))
	}
	total := len(r.body)
	sizes := map[string]int{"/claims": len(r.body)}
	queue := []string{string(r.body)}
	base := dashboard.AssetsPath() + "/"
	for len(queue) > 0 {
		doc := queue[0]
		queue = queue[1:]
		for _, m := range assetRef.FindAllStringSubmatch(doc, -1) {
			u := m[1]
			if u == "" {
				u = base + m[2]
			}
			if _, seen := sizes[u]; seen {
				continue
			}
			a := e.page(u)
			if a.status != http.StatusOK {
				t.Fatalf("%s: %d", u, a.status)
			}
			sizes[u] = len(a.body)
			total += len(a.body)
			if strings.HasSuffix(u, ".js") {
				queue = append(queue, string(a.body))
			}
		}
	}
	t.Logf("claims page transfer: %d bytes in %d files %v", total, len(sizes), sizes)
	if total > budget {
		t.Fatalf("claims page transfers %d bytes, budget %d", total, budget)
	}
	if len(sizes) < 6 {
		t.Fatalf("found only %v: the asset scan missed files", sizes)
	}
}

// The DID page tells the owner's services from the document's service
// entries, which are the services where the namespace's agents are
// approved: an owner with two services and an agent approved at one of
// them is not told the account has one service.
func TestDashboardDIDServiceCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	s := e.seed(map[string]any{
		"namespaces": []string{"acme"},
		"services":   []map[string]string{{"slug": "github", "owner": "acme"}, {"slug": "gitlab", "owner": "acme"}},
		"claims":     []map[string]string{{"namespace": "acme", "service": "github", "public_key": pubKey(newAgent(t, "acme"))}},
	})
	r := e.page("/did", withSession(s.Sessions["acme"]))
	body := string(r.body)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, body)
	}
	for _, want := range []string{"1 approved agent key", "1 service entry", "Your account owns 2 services"} {
		if !strings.Contains(body, want) {
			t.Errorf("DID page lacks %q", want)
		}
	}
}

// Two control planes on one host name (two quickstarts on different ports
// of localhost) share their cookies, which ignore ports: with its own
// SessionCookieName each reads only its own session, so signing in to one
// does not sign the owner out of the other.
func TestSessionCookieName(t *testing.T) {
	t.Parallel()
	const name = "idn_session_8788"
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) { c.SessionCookieName = name })
	claimWorld(e)
	m := e.do("POST", "/v1/test/signin-links", map[string]string{"namespace": "acme"}, withHeader("X-IDN-Test-Seed-Token", seedToken)).
		want(t, http.StatusCreated, "").json(t)
	u := m["url"].(string)
	r := e.do("POST", "/v1/auth/signin-link", map[string]string{"token": u[strings.Index(u, "#")+1:]}).want(t, http.StatusOK, "")
	var token string
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		switch c.Name {
		case name:
			token = c.Value
		case SessionCookie:
			t.Errorf("the session was set as %s too", SessionCookie)
		}
	}
	if token == "" {
		t.Fatalf("no %s cookie in %v", name, r.header)
	}
	named := func(n, v string) reqOpt {
		return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: n, Value: v}) }
	}
	e.do("GET", "/v1/auth/me", nil, named(name, token)).want(t, http.StatusOK, "")
	if p := e.page("/claims", named(name, token)); p.status != http.StatusOK {
		t.Errorf("dashboard with %s: %d", name, p.status)
	}
	// The other instance's cookie is not this one's to read.
	e.do("GET", "/v1/auth/me", nil, named(SessionCookie, token)).want(t, http.StatusUnauthorized, "")
	if p := e.page("/claims", named(SessionCookie, token)); p.status != http.StatusSeeOther {
		t.Errorf("dashboard with %s: %d, want the login redirect", SessionCookie, p.status)
	}
	r = e.do("POST", "/v1/auth/logout", nil, named(name, token)).want(t, http.StatusOK, "")
	if c := r.header.Get("Set-Cookie"); !strings.HasPrefix(c, name+"=;") {
		t.Errorf("logout set %q, want %s cleared", c, name)
	}

	t.Run("invalid name", func(t *testing.T) {
		for _, bad := range []string{"idn session", "idn;session", "idn=session", "sessión"} {
			if _, err := New(Config{Store: openStore(t, storeConfig(t, ProviderSQLite)), JWTSecret: make([]byte, 32), SessionCookieName: bad}); err == nil {
				t.Errorf("SessionCookieName %q accepted", bad)
			}
		}
	})
}

// TestPasskeyInvite: an owner signed in without a passkey (by a one-time
// link) is asked on every page to add one, since only another link would
// open the dashboard once the session ends; an owner with a passkey, or a
// control plane that cannot register one, is not.
func TestPasskeyInvite(t *testing.T) {
	t.Parallel()
	const invite = `id="passkey-invite"`
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) { c.Auth = AuthConfig{Origins: []string{testOrigin}} })
	linked := e.seed(map[string]any{"namespaces": []string{"linked"}}).Sessions["linked"]
	for _, path := range []string{"/claims", "/services", "/activity", "/gateways"} {
		if p := e.page(path, withSession(linked)); !strings.Contains(string(p.body), invite) ||
			!strings.Contains(string(p.body), `<a href="/account#passkeys-h">Add a passkey</a>`) {
			t.Errorf("%s does not invite an owner without a passkey to add one", path)
		}
	}
	if p := e.page("/account", withSession(linked)); strings.Contains(string(p.body), invite) ||
		!strings.Contains(string(p.body), "no passkey yet: add one below to log in again once this session ends.") {
		t.Errorf("the account page, where the passkey is added, reads:\n%s", p.body)
	}
	withKey := sessionOf(t, e.signup("keyed", newDevice(t, "EdDSA")).want(t, http.StatusCreated, ""))
	if p := e.page("/claims", withSession(withKey)); strings.Contains(string(p.body), invite) {
		t.Error("an owner with a passkey is asked to add one")
	}

	bare := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	noCeremonies := bare.seed(map[string]any{"namespaces": []string{"linked"}}).Sessions["linked"]
	if p := bare.page("/claims", withSession(noCeremonies)); strings.Contains(string(p.body), invite) {
		t.Error("a control plane without WebAuthn origins invites the owner to add a passkey")
	}
}
