package controlplane

import (
	"context"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestSessionFlow: signup → login → approve a claim → logout → the old
// cookie is refused.
func TestSessionFlow(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		dev := newDevice(t, "ES256")
		e.signup("alice", dev).want(t, http.StatusCreated, "")
		agent := newAgent(t, "alice")
		seeded := e.seed(map[string]any{
			"services": []map[string]string{{"slug": "github", "owner": "ops"}},
			"claims":   []map[string]string{{"namespace": "alice", "service": "github", "public_key": pubKey(agent), "status": "pending"}},
		})
		claimID := seeded.Claims[0].ClaimID

		tok := sessionOf(t, e.login("alice", dev).want(t, http.StatusOK, ""))
		approved := e.do("POST", "/v1/claims/"+claimID+"/approve", nil, withSession(tok), fromBrowser).want(t, http.StatusOK, "").json(t)
		if approved["status"] != StatusApproved {
			t.Fatalf("approve answered %v", approved)
		}
		out := e.do("POST", "/v1/auth/logout", nil, withSession(tok), fromBrowser).want(t, http.StatusOK, "")
		var cleared bool
		for _, c := range (&http.Response{Header: out.header}).Cookies() {
			cleared = cleared || c.Name == SessionCookie && c.Value == "" && c.MaxAge < 0
		}
		if !cleared {
			t.Fatalf("logout did not clear the cookie: %v", out.header)
		}
		e.do("GET", "/v1/auth/me", nil, withSession(tok)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
		e.do("POST", "/v1/claims/"+claimID+"/revoke", nil, withSession(tok)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
		// Logging out again (stale cookie) still answers 200.
		e.do("POST", "/v1/auth/logout", nil, withSession(tok)).want(t, http.StatusOK, "")
		// A cross-site logout is refused.
		e.do("POST", "/v1/auth/logout", nil, withHeader("Origin", "https://evil.example")).want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
	})
}

// TestSettings: PATCH /v1/auth/settings stores per account; me shows them.
func TestSettings(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		tok := sessionOf(t, e.signup("alice", newDevice(t, "EdDSA")))
		other := sessionOf(t, e.signup("bob", newDevice(t, "ES256")))
		set := e.do("GET", "/v1/auth/me", nil, withSession(tok)).want(t, http.StatusOK, "").json(t)["settings"].(map[string]any)
		if set["email_notifications"] != true || set["webhook_failures_notify"] != true {
			t.Fatalf("default settings %v", set)
		}
		got := e.do("PATCH", "/v1/auth/settings", map[string]bool{"webhook_failures_notify": false}, withSession(tok), fromBrowser).
			want(t, http.StatusOK, "").json(t)
		if got["email_notifications"] != true || got["webhook_failures_notify"] != false {
			t.Fatalf("patched settings %v", got)
		}
		set = e.do("GET", "/v1/auth/me", nil, withSession(other)).want(t, http.StatusOK, "").json(t)["settings"].(map[string]any)
		if set["webhook_failures_notify"] != true {
			t.Fatalf("another account's settings changed: %v", set)
		}
		e.do("PATCH", "/v1/auth/settings", map[string]any{}, withSession(tok)).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		e.do("PATCH", "/v1/auth/settings", map[string]any{"email_notifications": "yes"}, withSession(tok)).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		e.do("PATCH", "/v1/auth/settings", map[string]any{"email_notifications": false}, withSession(tok),
			withHeader("Origin", "https://evil.example")).want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
		e.do("PATCH", "/v1/auth/settings", map[string]any{"email_notifications": false}).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
	})
}

// TestAccountDeletion: recent verification is required; afterwards every
// approved claim is revoked with its event, pending ones are rejected, the
// DID is deactivated, the name cannot be registered again and the old
// session is refused.
func TestAccountDeletion(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		dev := newDevice(t, "EdDSA")
		tok := sessionOf(t, e.signup("alice", dev).want(t, http.StatusCreated, ""))
		a1, a2, p1, other := newAgent(t, "alice"), newAgent(t, "alice"), newAgent(t, "alice"), newAgent(t, "bob")
		seeded := e.seed(map[string]any{
			"services": []map[string]string{{"slug": "github", "owner": "ops"}, {"slug": "alice-api", "owner": "alice"}},
			"claims": []map[string]string{
				{"namespace": "alice", "service": "github", "public_key": pubKey(a1), "status": "approved"},
				{"namespace": "alice", "service": "alice-api", "public_key": pubKey(a2), "status": "approved"},
				{"namespace": "alice", "service": "github", "public_key": pubKey(p1), "status": "pending"},
				{"namespace": "bob", "service": "alice-api", "public_key": pubKey(other), "status": "approved"},
				{"namespace": "bob", "service": "github", "public_key": pubKey(other), "status": "approved"},
			},
		})
		e.drainEvents()

		// Signup verified the session, but that was more than 5 minutes ago.
		e.offset.Add(int64(6 * time.Minute))
		e.do("DELETE", "/v1/auth/account", nil, withSession(tok), fromBrowser).want(t, http.StatusForbidden, "REAUTH_REQUIRED")
		// A seeded session (no passkey assertion at all) is not verified either.
		seededTok := seeded.Sessions["alice"]
		e.do("DELETE", "/v1/auth/account", nil, withSession(seededTok)).want(t, http.StatusForbidden, "REAUTH_REQUIRED")
		e.verify(tok, dev).want(t, http.StatusOK, "")
		e.do("DELETE", "/v1/auth/account", nil, withSession(tok), withHeader("Origin", "https://evil.example")).
			want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
		gone := e.do("DELETE", "/v1/auth/account", nil, withSession(tok), fromBrowser).want(t, http.StatusOK, "").json(t)
		if gone["revoked_claims"] != float64(2) || gone["rejected_claims"] != float64(1) {
			t.Fatalf("deletion answered %v", gone)
		}

		// Events: alice's two approvals revoked, her pending claim rejected,
		// and bob's claim on alice's deleted service revoked; bob's claim on
		// github untouched.
		want := map[string]string{
			seeded.Claims[0].ClaimID: EventRevoked, seeded.Claims[1].ClaimID: EventRevoked,
			seeded.Claims[2].ClaimID: EventRejected, seeded.Claims[3].ClaimID: EventRevoked,
		}
		for n := len(want); n > 0; n-- {
			ev := e.events.next(t)
			if want[ev.Claim.ID] != ev.Type {
				t.Errorf("event %s for claim %s, want %q", ev.Type, ev.Claim.ID, want[ev.Claim.ID])
			}
			delete(want, ev.Claim.ID)
		}
		select {
		case ev := <-e.events.ch:
			t.Errorf("unexpected event %s for %s (%s/%s, %s)", ev.Type, ev.Claim.ID, ev.Claim.Namespace, ev.Claim.Service, ev.Claim.Status)
		default:
		}
		var left int
		if err := e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM claims WHERE namespace = 'alice' AND status = 'approved'`).Scan(&left); err != nil || left != 0 {
			t.Fatalf("approved claims left: %d %v", left, err)
		}
		if status := latestStatus(t, e.st, "bob", pubKey(other), "github"); status != StatusApproved {
			t.Fatalf("bob's github claim: %s", status)
		}

		e.do("GET", "/1.0/identifiers/did:idn:alice", nil).want(t, http.StatusGone, "")
		e.do("GET", "/v1/auth/me", nil, withSession(tok)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
		e.do("GET", "/v1/auth/me", nil, withSession(seededTok)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
		e.do("GET", "/v1/auth/signup/options?namespace=alice", nil).want(t, http.StatusConflict, "NAMESPACE_TAKEN")
		e.do("GET", "/v1/auth/login/options?namespace=alice", nil).want(t, http.StatusForbidden, "NAMESPACE_DEACTIVATED")
		var keys int
		if err := e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM passkeys WHERE namespace = 'alice'`).Scan(&keys); err != nil || keys != 0 {
			t.Fatalf("passkeys left: %v %v", keys, err)
		}
		if svcs, err := claimsAPI(e.st).Services(context.Background(), "alice"); err != nil || len(svcs) != 0 {
			t.Fatalf("services left: %v %v", svcs, err)
		}
	})
}

// TestAuthRateLimits: an address gets 5 signups an hour however many
// options it asks for, and failed assertions back off exponentially.
func TestAuthRateLimits(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		ip := withHeader("X-Forwarded-For", "198.51.100.7")
		// Options are not signups: asking again and again uses none up.
		for range 2 * ownerauth.SignupsPerAddressPerHour {
			e.do("GET", "/v1/auth/signup/options?namespace=user-a", nil, ip).want(t, http.StatusOK, "")
		}
		for i := range ownerauth.SignupsPerAddressPerHour {
			e.signup("user-"+string(rune('a'+i)), newDevice(t, "ES256"), ip).want(t, http.StatusCreated, "")
		}
		r := e.do("GET", "/v1/auth/signup/options?namespace=user-f", nil, ip).want(t, http.StatusTooManyRequests, "RATE_LIMITED")
		if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Fatalf("Retry-After = %q", ra)
		}
		// Another client is not affected; after the hour the first one is back.
		e.do("GET", "/v1/auth/signup/options?namespace=user-f", nil, withHeader("X-Forwarded-For", "198.51.100.8")).want(t, http.StatusOK, "")
		e.offset.Add(int64(time.Hour))
		e.do("GET", "/v1/auth/signup/options?namespace=user-f", nil, ip).want(t, http.StatusOK, "")

		dev := newDevice(t, "ES256")
		e.signup("target", dev).want(t, http.StatusCreated, "")
		liar := dev.clone()
		liar.origin = "https://evil.example"
		var last int
		for round := range 4 {
			e.login("target", liar).want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
			// Options say so early, and the finish step is held back too.
			e.do("GET", "/v1/auth/login/options?namespace=target", nil).want(t, http.StatusTooManyRequests, "RATE_LIMITED")
			r := e.do("POST", "/v1/auth/login", map[string]any{"namespace": "target", "credential": map[string]string{}}).
				want(t, http.StatusTooManyRequests, "RATE_LIMITED")
			wait, err := strconv.Atoi(r.header.Get("Retry-After"))
			if err != nil || wait <= last {
				t.Fatalf("round %d: Retry-After %q after %d", round, r.header.Get("Retry-After"), last)
			}
			last = wait
			e.offset.Add(int64(time.Duration(wait) * time.Second))
		}
		if last != 8 {
			t.Fatalf("backoff after 4 failures = %ds, want 8", last)
		}
		// A success clears the backoff.
		e.login("target", dev).want(t, http.StatusOK, "")
		e.login("target", liar).want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
		r = e.do("GET", "/v1/auth/login/options?namespace=target", nil).want(t, http.StatusTooManyRequests, "RATE_LIMITED")
		if ra := r.header.Get("Retry-After"); ra != "1" {
			t.Fatalf("backoff after a success and one failure: Retry-After %q, want 1", ra)
		}
	})
}

// TestMaintainAuth: expired challenges and stale rate-limit rows go.
func TestMaintainAuth(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		e.do("GET", "/v1/auth/signup/options?namespace=alice", nil).want(t, http.StatusOK, "")
		count := func(table string) int {
			var n int
			if err := e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if err := e.srv.accounts.Maintain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if count("webauthn_challenges") != 1 || count("auth_limits") != 1 {
			t.Fatal("maintenance deleted live rows")
		}
		e.offset.Add(int64(time.Hour + time.Second))
		if err := e.srv.accounts.Maintain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if count("webauthn_challenges") != 0 || count("auth_limits") != 0 {
			t.Fatalf("left %d challenges, %d limits", count("webauthn_challenges"), count("auth_limits"))
		}
	})
}

// TestAccountDeletionSendsWebhooks: the revocations of an account deletion
// reach the services' webhooks, signed, like an owner's revoke would.
func TestAccountDeletionSendsWebhooks(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := newEnv(t, openStore(t, storeConfig(t, engine)), func(c *Config) {
				withWebhooks(nil)(c)
				c.Auth = AuthConfig{Origins: []string{testOrigin}}
			})
			dev := newDevice(t, "ES256")
			tok := sessionOf(t, e.signup("alice", dev).want(t, http.StatusCreated, ""))
			a1, a2 := newAgent(t, "alice"), newAgent(t, "alice")
			seeded := e.seed(map[string]any{
				"services": []map[string]string{{"slug": "github", "owner": "ops"}},
				"claims": []map[string]string{
					{"namespace": "alice", "service": "github", "public_key": pubKey(a1), "status": "approved"},
					{"namespace": "alice", "service": "github", "public_key": pubKey(a2), "status": "approved"},
				},
			})
			rc := newReceiver(t)
			ops := withSession(seeded.Sessions["ops"])
			_, secret := e.createWebhook(ops, e.serviceID(ops), map[string]any{"url": rc.ts.URL, "events": []string{EventRevoked}})
			rc.setSecret(secret)

			e.do("DELETE", "/v1/auth/account", nil, withSession(tok), fromBrowser).want(t, http.StatusOK, "")
			if n := e.deliverDue(); n != 2 {
				t.Fatalf("delivered %d webhooks, want 2", n)
			}
			got, bad := rc.counts()
			revoked := map[string]bool{}
			rc.mu.Lock()
			for id := range got {
				if p := rc.bodies[id]; p.Type == EventRevoked && p.Data.Namespace == "alice" {
					revoked[p.Data.ClaimID] = true
				}
			}
			rc.mu.Unlock()
			if bad != 0 || !revoked[seeded.Claims[0].ClaimID] || !revoked[seeded.Claims[1].ClaimID] {
				t.Fatalf("receiver got %v (bad %d), revoked %v", got, bad, revoked)
			}
		})
	}
}
