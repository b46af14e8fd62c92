package controlplane

import (
	"encoding/json"
	"github.com/idnhq/idn/controlplane/internal/alertmail/alertmailtest"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// passkeyIDs lists the passkey ids of the session's account, oldest first.
func (e *env) passkeyIDs(tok string) []string {
	e.t.Helper()
	var list struct {
		Passkeys []passkeyRecord `json:"passkeys"`
	}
	if err := json.Unmarshal(e.do("GET", "/v1/auth/passkeys", nil, withSession(tok)).want(e.t, http.StatusOK, "").body, &list); err != nil {
		e.t.Fatal(err)
	}
	ids := make([]string, len(list.Passkeys))
	for i, p := range list.Passkeys {
		ids[i] = p.ID
	}
	return ids
}

// wantReauth asserts a 403 REAUTH_REQUIRED for the given reason.
func wantReauth(t *testing.T, r resp, reason string) {
	t.Helper()
	r.want(t, http.StatusForbidden, "REAUTH_REQUIRED")
	var body struct {
		Details map[string]string `json:"details"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Details["reason"] != reason {
		t.Fatalf("REAUTH_REQUIRED details %s, want reason %s", r.body, reason)
	}
}

// TestStepUpAttacks: a thief holding the owner's session cookie tries to
// take the account over. Each row starts from an owner with one passkey
// and the stolen cookie of a session the owner logged in to just now.
func TestStepUpAttacks(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		type world struct {
			ns     string
			owner  *device
			stolen string // the cookie of a freshly verified session
		}
		del := func(tok, id string) resp {
			return e.do("DELETE", "/v1/auth/passkeys/"+id, nil, withSession(tok), fromBrowser)
		}
		deleteAccount := func(tok string) resp {
			return e.do("DELETE", "/v1/auth/account", nil, withSession(tok), fromBrowser)
		}
		rows := []struct {
			name   string
			reason string
			run    func(t *testing.T, w world) resp
		}{
			{"stale_stolen_cookie_asks_to_enrol", "verification_expired", func(t *testing.T, w world) resp {
				e.offset.Add(int64(ownerauth.RecentVerification + time.Second))
				return e.do("GET", "/v1/auth/passkeys/options", nil, withSession(w.stolen))
			}},
			{"stale_stolen_cookie_finishes_enrolment_begun_while_fresh", "verification_expired", func(t *testing.T, w world) resp {
				o := e.do("GET", "/v1/auth/passkeys/options", nil, withSession(w.stolen)).want(t, http.StatusOK, "")
				e.offset.Add(int64(ownerauth.RecentVerification + time.Second))
				return e.do("POST", "/v1/auth/passkeys", map[string]any{"credential": newDevice(t, "ES256").create(t, o.body)},
					withSession(w.stolen), fromBrowser)
			}},
			{"stale_stolen_cookie_removes_owner_passkey", "verification_expired", func(t *testing.T, w world) resp {
				e.addPasskey(w.stolen, newDevice(t, "EdDSA"), "laptop").want(t, http.StatusCreated, "")
				e.verify(w.stolen, w.owner).want(t, http.StatusOK, "")
				e.offset.Add(int64(ownerauth.RecentVerification + time.Second))
				return del(w.stolen, e.passkeyIDs(w.stolen)[0])
			}},
			{"seeded_style_unverified_session_removes_passkey", "not_verified", func(t *testing.T, w world) resp {
				e.addPasskey(w.stolen, newDevice(t, "EdDSA"), "laptop").want(t, http.StatusCreated, "")
				tok, _, err := e.srv.IssueSession(t.Context(), w.ns)
				if err != nil {
					t.Fatal(err)
				}
				return del(tok, e.passkeyIDs(tok)[0])
			}},
			{"fresh_stolen_cookie_enrols_then_removes_owner_passkey", "credentials_changed_since_verification", func(t *testing.T, w world) resp {
				e.addPasskey(w.stolen, newDevice(t, "ES256"), "mine now").want(t, http.StatusCreated, "")
				return del(w.stolen, e.passkeyIDs(w.stolen)[0])
			}},
			{"enrolled_passkey_reverifies_stolen_session_to_remove_owner_passkey", "passkey_too_new", func(t *testing.T, w world) resp {
				thief := newDevice(t, "ES256")
				e.addPasskey(w.stolen, thief, "mine now").want(t, http.StatusCreated, "")
				e.verify(w.stolen, thief).want(t, http.StatusOK, "")
				return del(w.stolen, e.passkeyIDs(w.stolen)[0])
			}},
			{"enrolled_passkey_reverifies_stolen_session_to_delete_account", "passkey_too_new", func(t *testing.T, w world) resp {
				thief := newDevice(t, "EdDSA")
				e.addPasskey(w.stolen, thief, "mine now").want(t, http.StatusCreated, "")
				e.verify(w.stolen, thief).want(t, http.StatusOK, "")
				return deleteAccount(w.stolen)
			}},
			{"enrolled_passkey_logs_in_to_own_session_to_remove_owner_passkey", "passkey_too_new", func(t *testing.T, w world) resp {
				thief := newDevice(t, "ES256")
				e.addPasskey(w.stolen, thief, "mine now").want(t, http.StatusCreated, "")
				own := sessionOf(t, e.login(w.ns, thief).want(t, http.StatusOK, ""))
				return del(own, e.passkeyIDs(own)[0])
			}},
			{"enrolled_passkey_logs_in_to_own_session_to_delete_account", "passkey_too_new", func(t *testing.T, w world) resp {
				thief := newDevice(t, "EdDSA")
				e.addPasskey(w.stolen, thief, "mine now").want(t, http.StatusCreated, "")
				return deleteAccount(sessionOf(t, e.login(w.ns, thief).want(t, http.StatusOK, "")))
			}},
			{"enrolled_passkey_logs_in_to_own_session_to_enrol_another", "passkey_too_new", func(t *testing.T, w world) resp {
				thief := newDevice(t, "EdDSA")
				e.addPasskey(w.stolen, thief, "mine now").want(t, http.StatusCreated, "")
				own := sessionOf(t, e.login(w.ns, thief).want(t, http.StatusOK, ""))
				return e.do("GET", "/v1/auth/passkeys/options", nil, withSession(own))
			}},
			{"one_verification_two_enrolments", "credentials_changed_since_verification", func(t *testing.T, w world) resp {
				e.addPasskey(w.stolen, newDevice(t, "ES256"), "one").want(t, http.StatusCreated, "")
				return e.do("GET", "/v1/auth/passkeys/options", nil, withSession(w.stolen))
			}},
			{"verification_in_another_session_of_the_owner", "not_verified", func(t *testing.T, w world) resp {
				e.addPasskey(w.stolen, newDevice(t, "ES256"), "one").want(t, http.StatusCreated, "")
				seeded, _, err := e.srv.IssueSession(t.Context(), w.ns)
				if err != nil {
					t.Fatal(err)
				}
				e.verify(w.stolen, w.owner).want(t, http.StatusOK, "")
				return del(seeded, e.passkeyIDs(seeded)[1])
			}},
		}
		for i, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				e.t = t
				w := world{ns: "owner-" + string(rune('a'+i)), owner: newDevice(t, []string{"ES256", "EdDSA"}[i%2])}
				e.signup(w.ns, w.owner).want(t, http.StatusCreated, "")
				w.stolen = sessionOf(t, e.login(w.ns, w.owner).want(t, http.StatusOK, ""))
				wantReauth(t, row.run(t, w), row.reason)
				// Whatever the thief did, the owner's passkey is still there
				// and still signs in.
				e.login(w.ns, w.owner).want(t, http.StatusOK, "")
			})
		}
	})
}

// TestStepUpOneChangePerVerification: two removals racing on one
// verification: exactly one passes (the namespace row is locked, or
// SQLite's write lock serialises them).
func TestStepUpOneChangePerVerification(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		a := newDevice(t, "ES256")
		tok := sessionOf(t, e.signup("alice", a).want(t, http.StatusCreated, ""))
		e.addPasskey(tok, newDevice(t, "EdDSA"), "b").want(t, http.StatusCreated, "")
		e.verify(tok, a).want(t, http.StatusOK, "")
		e.addPasskey(tok, newDevice(t, "ES256"), "c").want(t, http.StatusCreated, "")
		ids := e.passkeyIDs(tok)
		e.verify(tok, a).want(t, http.StatusOK, "")
		statuses := make([]int, 2)
		var wg sync.WaitGroup
		for i, id := range ids[1:] {
			wg.Go(func() {
				req, _ := http.NewRequest("DELETE", e.ts.URL+"/v1/auth/passkeys/"+id, nil)
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tok})
				res, err := e.ts.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				statuses[i] = res.StatusCode
			})
		}
		wg.Wait()
		if !(statuses[0] == 204 && statuses[1] == 403 || statuses[0] == 403 && statuses[1] == 204) {
			t.Fatalf("racing removals answered %v, want one 204 and one 403", statuses)
		}
		if n := len(e.passkeyIDs(tok)); n != 2 {
			t.Fatalf("%d passkeys left, want 2", n)
		}
	})
}

// TestStepUpOwnerRecovers: after a thief with a fresh cookie enrolled a
// passkey, the alert names it; the owner ends the stolen session, removes
// the passkey (which ends the sessions it started) with their own, and a
// passkey of their own becomes able to confirm changes after the hold.
func TestStepUpOwnerRecovers(t *testing.T) {
	t.Parallel()
	smtpAddr, mails := alertmailtest.Server(t)
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			e := newAuthEnvWith(t, engine, func(c *Config) {
				c.Webhooks.Alert = AlertConfig{From: "idn@example.com", To: []string{"ops@example.com"}, SMTPAddr: smtpAddr}
			})
			mail := func(want ...string) {
				t.Helper()
				select {
				case m := <-mails:
					for _, w := range want {
						if !strings.Contains(m, w) {
							t.Fatalf("alert mail lacks %q: %q", w, m)
						}
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no alert e-mail")
				}
			}
			owner := newDevice(t, "ES256")
			e.signup("alice", owner).want(t, http.StatusCreated, "")
			mine := sessionOf(t, e.login("alice", owner).want(t, http.StatusOK, ""))
			stolen := sessionOf(t, e.login("alice", owner).want(t, http.StatusOK, ""))
			// The owner turned notifications off; security alerts go anyway.
			e.do("PATCH", "/v1/auth/settings", map[string]bool{"email_notifications": false}, withSession(mine), fromBrowser).want(t, http.StatusOK, "")

			thief := newDevice(t, "EdDSA")
			added := e.addPasskey(stolen, thief, "totally mine").want(t, http.StatusCreated, "").json(t)
			thiefKey := added["id"].(string)
			mail("Subject: idn: passkey added for namespace alice", thiefKey, "totally mine", "RCPT TO:<ops@example.com>")
			thiefSession := sessionOf(t, e.login("alice", thief).want(t, http.StatusOK, ""))

			var list struct {
				Sessions []sessionRecord `json:"sessions"`
			}
			if err := json.Unmarshal(e.do("GET", "/v1/auth/sessions", nil, withSession(mine)).want(t, http.StatusOK, "").body, &list); err != nil {
				t.Fatal(err)
			}
			// Newest first: the thief's own login, then the stolen one.
			if len(list.Sessions) != 4 || list.Sessions[0].PasskeyID != thiefKey || list.Sessions[1].Current || !list.Sessions[2].Current {
				t.Fatalf("sessions = %+v", list.Sessions)
			}
			stolenID := list.Sessions[1].ID
			e.do("DELETE", "/v1/auth/sessions/"+stolenID, nil, withSession(mine), fromBrowser).want(t, http.StatusNoContent, "")
			e.do("GET", "/v1/auth/me", nil, withSession(stolen)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")

			e.verify(mine, owner).want(t, http.StatusOK, "")
			e.do("DELETE", "/v1/auth/passkeys/"+thiefKey, nil, withSession(mine), fromBrowser).want(t, http.StatusNoContent, "")
			mail("Subject: idn: passkey removed for namespace alice", thiefKey)
			e.do("GET", "/v1/auth/me", nil, withSession(thiefSession)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
			e.do("GET", "/v1/auth/me", nil, withSession(mine)).want(t, http.StatusOK, "")

			// A passkey of the owner's own confirms changes once a day old.
			laptop := newDevice(t, "EdDSA")
			e.verify(mine, owner).want(t, http.StatusOK, "")
			e.addPasskey(mine, laptop, "laptop").want(t, http.StatusCreated, "")
			mail("passkey added")
			e.verify(mine, laptop).want(t, http.StatusOK, "")
			wantReauth(t, e.do("DELETE", "/v1/auth/passkeys/"+e.passkeyIDs(mine)[0], nil, withSession(mine), fromBrowser), "passkey_too_new")
			e.offset.Add(int64(ownerauth.NewPasskeyHold))
			e.verify(mine, laptop).want(t, http.StatusOK, "")
			e.do("DELETE", "/v1/auth/passkeys/"+e.passkeyIDs(mine)[0], nil, withSession(mine), fromBrowser).want(t, http.StatusNoContent, "")
			mail("passkey removed")
		})
	}
}

// TestOwnerSessions: the owner lists live sessions with where they came
// from (network only) and ends any of them; another namespace's session
// is not found.
func TestOwnerSessions(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		dev := newDevice(t, "ES256")
		first := sessionOf(t, e.signup("alice", dev, withHeader("X-Forwarded-For", "203.0.113.77"), withHeader("User-Agent", "Firefox/130\tx\xff")).
			want(t, http.StatusCreated, ""))
		o := e.do("GET", "/v1/auth/login/options?namespace=alice", nil).want(t, http.StatusOK, "")
		second := sessionOf(t, e.do("POST", "/v1/auth/login", map[string]any{"namespace": "alice", "credential": dev.get(t, o.body)},
			fromBrowser, withHeader("X-Forwarded-For", "2001:db8:1:2:3::9"), withHeader("User-Agent", "curl/8")).want(t, http.StatusOK, ""))
		bob := sessionOf(t, e.signup("bob", newDevice(t, "EdDSA")))

		var list struct {
			Sessions []sessionRecord `json:"sessions"`
		}
		if err := json.Unmarshal(e.do("GET", "/v1/auth/sessions", nil, withSession(second)).want(t, http.StatusOK, "").body, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Sessions) != 2 {
			t.Fatalf("sessions = %+v", list.Sessions)
		}
		cur, old := list.Sessions[0], list.Sessions[1]
		if !cur.Current || old.Current || cur.ClientAddress != "2001:db8:1::/48" || cur.UserAgent != "curl/8" ||
			old.ClientAddress != "203.0.113.0/24" || old.UserAgent != "Firefox/130?x?" || cur.VerifiedAt == "" ||
			cur.PasskeyID == "" || cur.PasskeyID != old.PasskeyID || cur.CreatedAt == "" || cur.ExpiresAt == "" {
			t.Fatalf("sessions = %+v", list.Sessions)
		}

		var bobList struct {
			Sessions []sessionRecord `json:"sessions"`
		}
		if err := json.Unmarshal(e.do("GET", "/v1/auth/sessions", nil, withSession(bob)).want(t, http.StatusOK, "").body, &bobList); err != nil {
			t.Fatal(err)
		}
		// Another namespace's session, and a made-up one, are not found.
		e.do("DELETE", "/v1/auth/sessions/"+bobList.Sessions[0].ID, nil, withSession(second), fromBrowser).want(t, http.StatusNotFound, "SESSION_NOT_FOUND")
		e.do("DELETE", "/v1/auth/sessions/ses_nope", nil, withSession(second), fromBrowser).want(t, http.StatusNotFound, "SESSION_NOT_FOUND")
		e.do("GET", "/v1/auth/me", nil, withSession(bob)).want(t, http.StatusOK, "")
		// Cross-site and sessionless requests are refused.
		e.do("DELETE", "/v1/auth/sessions/"+old.ID, nil, withSession(second), withHeader("Origin", "https://evil.example")).
			want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
		e.do("GET", "/v1/auth/sessions", nil).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")

		e.do("DELETE", "/v1/auth/sessions/"+old.ID, nil, withSession(second), fromBrowser).want(t, http.StatusNoContent, "")
		e.do("GET", "/v1/auth/me", nil, withSession(first)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
		// Ending the current session clears its cookie, like logout.
		r := e.do("DELETE", "/v1/auth/sessions/"+cur.ID, nil, withSession(second), fromBrowser).want(t, http.StatusNoContent, "")
		if c := (&http.Response{Header: r.header}).Cookies(); len(c) != 1 || c[0].Name != SessionCookie || c[0].MaxAge >= 0 {
			t.Fatalf("cookies after ending the current session: %v", c)
		}
		e.do("GET", "/v1/auth/me", nil, withSession(second)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
	})
}

// TestStrangersCannotLockOwnerOut: one address hammers login options and
// sends failed assertions for the owner's namespace; it is throttled, and
// the owner signs in and verifies from another address all along.
func TestStrangersCannotLockOwnerOut(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		owner := newDevice(t, "ES256")
		e.signup("victim", owner).want(t, http.StatusCreated, "")
		attacker := withHeader("X-Forwarded-For", "203.0.113.66")
		home := withHeader("X-Forwarded-For", "198.51.100.20")
		ownerLogin := func() {
			t.Helper()
			o := e.do("GET", "/v1/auth/login/options?namespace=victim", nil, home).want(t, http.StatusOK, "")
			tok := sessionOf(t, e.do("POST", "/v1/auth/login", map[string]any{"namespace": "victim", "credential": owner.get(t, o.body)},
				fromBrowser, home).want(t, http.StatusOK, ""))
			// Step-up options no longer share a counter with strangers.
			o = e.do("GET", "/v1/auth/verify/options", nil, withSession(tok), home).want(t, http.StatusOK, "")
			e.do("POST", "/v1/auth/verify", map[string]any{"credential": owner.get(t, o.body)}, withSession(tok), fromBrowser, home).
				want(t, http.StatusOK, "")
		}

		// Options are not attempts: the attacker collects challenges up to
		// the per-address budget, and the owner is unaffected.
		var challenges [][]byte
		for range ownerauth.OptionsPerAddressPerHour {
			challenges = append(challenges, e.do("GET", "/v1/auth/login/options?namespace=victim", nil, attacker).want(t, http.StatusOK, "").body)
		}
		r := e.do("GET", "/v1/auth/login/options?namespace=victim", nil, attacker).want(t, http.StatusTooManyRequests, "RATE_LIMITED")
		if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Fatalf("options budget Retry-After = %q", ra)
		}
		ownerLogin()

		// Failed assertions back the attacker's address off, doubling.
		stranger := newDevice(t, "EdDSA")
		fail := func() resp {
			c := challenges[0]
			challenges = challenges[1:]
			return e.do("POST", "/v1/auth/login", map[string]any{"namespace": "victim", "credential": stranger.get(t, c)}, fromBrowser, attacker)
		}
		for round, want := range []string{"1", "2", "4", "8"} {
			fail().want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
			r := fail().want(t, http.StatusTooManyRequests, "RATE_LIMITED")
			if ra := r.header.Get("Retry-After"); ra != want {
				t.Fatalf("round %d: Retry-After %q, want %s", round, ra, want)
			}
			ownerLogin()
			e.offset.Add(int64(time.Duration(round+1) * 8 * time.Second))
		}

		// Spraying made-up namespaces from the address ends at the
		// address's failure budget, and still leaves the owner alone.
		for i := range ownerauth.AssertFailuresPerAddressPerHour - 4 {
			e.do("POST", "/v1/auth/login", map[string]any{"namespace": "spray-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26),
				"credential": map[string]string{}}, attacker).want(t, http.StatusBadRequest, "CREDENTIAL_INVALID")
		}
		e.do("POST", "/v1/auth/login", map[string]any{"namespace": "fresh-one", "credential": map[string]string{}}, attacker).
			want(t, http.StatusTooManyRequests, "RATE_LIMITED")
		ownerLogin()
	})
}

// newAuthEnvWith is newAuthEnv with a further configuration change.
func newAuthEnvWith(t *testing.T, engine string, mod func(*Config)) *env {
	t.Helper()
	return newEnv(t, openStore(t, storeConfig(t, engine)), func(c *Config) {
		c.Auth = AuthConfig{Origins: []string{testOrigin}}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		mod(c)
	})
}

// TestAlertsHonourEmailNotifications: passkey changes are mailed to the
// owner's address while email_notifications is on and not once it is off;
// the operator copy goes either way; turning the setting off, or moving
// to another address, is itself mailed to the address that stops getting
// mail.
func TestAlertsHonourEmailNotifications(t *testing.T) {
	t.Parallel()
	smtpAddr, mails := alertmailtest.Server(t)
	e := newAuthEnvWith(t, ProviderSQLite, func(c *Config) {
		c.Webhooks.Alert = AlertConfig{From: "idn@example.com", To: []string{"ops@example.com"}, SMTPAddr: smtpAddr}
	})
	next := func() string {
		t.Helper()
		select {
		case m := <-mails:
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("no alert e-mail")
			return ""
		}
	}
	none := func() {
		t.Helper()
		select {
		case m := <-mails:
			t.Fatalf("unexpected mail: %q", m)
		default:
		}
	}
	want := func(m string, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(m, p) {
				t.Fatalf("mail lacks %q: %q", p, m)
			}
		}
	}
	owner := newDevice(t, "ES256")
	e.signup("alice", owner).want(t, http.StatusCreated, "")
	tok := sessionOf(t, e.login("alice", owner).want(t, http.StatusOK, ""))
	settings := func(body map[string]any) resp {
		return e.do("PATCH", "/v1/auth/settings", body, withSession(tok), fromBrowser)
	}
	for _, bad := range []string{"not an address", "Alice <alice@example.com>", "a@example.com, b@example.com", strings.Repeat("a", 250) + "@example.com"} {
		settings(map[string]any{"email": bad}).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	}
	if set := settings(map[string]any{"email": "alice@example.com"}).want(t, http.StatusOK, "").json(t); set["email"] != "alice@example.com" || set["email_notifications"] != true {
		t.Fatalf("settings = %v", set)
	}

	e.verify(tok, owner).want(t, http.StatusOK, "")
	e.addPasskey(tok, newDevice(t, "EdDSA"), "phone").want(t, http.StatusCreated, "")
	want(next(), "RCPT TO:<alice@example.com>", "Subject: idn: passkey added for namespace alice", "phone")
	want(next(), "RCPT TO:<ops@example.com>", "Subject: idn: passkey added for namespace alice")

	settings(map[string]any{"email_notifications": false}).want(t, http.StatusOK, "")
	want(next(), "RCPT TO:<alice@example.com>", "E-mail notifications were turned off")
	none()

	e.verify(tok, owner).want(t, http.StatusOK, "")
	e.addPasskey(tok, newDevice(t, "EdDSA"), "tablet").want(t, http.StatusCreated, "")
	m := next()
	want(m, "RCPT TO:<ops@example.com>", "tablet")
	if strings.Contains(m, "alice@example.com") {
		t.Fatalf("the owner opted out but was mailed: %q", m)
	}
	none()

	// Back on, then another address: the old one is told.
	settings(map[string]any{"email_notifications": true}).want(t, http.StatusOK, "")
	settings(map[string]any{"email": "new@example.com"}).want(t, http.StatusOK, "")
	want(next(), "RCPT TO:<alice@example.com>", "Alerts now go to another address")
	none()
}
