package controlplane

import (
	"bytes"
	"encoding/json"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPasskeyCeremonies drives complete ceremonies with ES256, EdDSA and
// RS256 credentials (some Windows Hello authenticators make only RS256): signup, login, verification, a second passkey, rename and
// delete (never the last).
func TestPasskeyCeremonies(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		for _, tc := range []struct{ alg, other string }{{"ES256", "EdDSA"}, {"EdDSA", "RS256"}, {"RS256", "ES256"}} {
			t.Run(tc.alg, func(t *testing.T) {
				ns := "owner-" + strings.ToLower(tc.alg)
				dev := newDevice(t, tc.alg)

				r := e.signup(ns, dev).want(t, http.StatusCreated, "")
				created := r.json(t)
				pk, _ := created["passkey"].(map[string]any)
				if created["namespace"] != ns || created["did"] != "did:idn:"+ns || pk["algorithm"] != tc.alg || pk["name"] != "Passkey" {
					t.Fatalf("signup answer %s", r.body)
				}
				first := sessionOf(t, r)
				me := e.do("GET", "/v1/auth/me", nil, withSession(first)).want(t, http.StatusOK, "").json(t)
				if me["namespace"] != ns || me["created_at"] == "" {
					t.Fatalf("me = %v", me)
				}
				// The DID resolves from signup on.
				e.do("GET", "/1.0/identifiers/did:idn:"+ns, nil).want(t, http.StatusOK, "")

				r = e.login(ns, dev).want(t, http.StatusOK, "")
				tok := sessionOf(t, r)
				e.do("GET", "/v1/auth/me", nil, withSession(tok)).want(t, http.StatusOK, "")
				v := e.verify(tok, dev).want(t, http.StatusOK, "").json(t)
				if v["verified_at"] == "" {
					t.Fatalf("verify answer %v", v)
				}

				second := newDevice(t, tc.other)
				added := e.addPasskey(tok, second, "laptop").want(t, http.StatusCreated, "").json(t)
				if added["name"] != "laptop" || added["algorithm"] != tc.other {
					t.Fatalf("added passkey %v", added)
				}
				// The second passkey signs in too.
				e.login(ns, second).want(t, http.StatusOK, "")
				// Registering the same authenticator again is refused.
				e.verify(tok, dev).want(t, http.StatusOK, "")
				e.addPasskey(tok, second, "again").want(t, http.StatusConflict, "PASSKEY_EXISTS")

				var list struct {
					Passkeys []passkeyRecord `json:"passkeys"`
				}
				if err := json.Unmarshal(e.do("GET", "/v1/auth/passkeys", nil, withSession(tok)).want(t, http.StatusOK, "").body, &list); err != nil {
					t.Fatal(err)
				}
				if len(list.Passkeys) != 2 || list.Passkeys[0].LastUsedAt == "" {
					t.Fatalf("passkeys = %+v", list.Passkeys)
				}
				id0, id1 := list.Passkeys[0].ID, list.Passkeys[1].ID
				renamed := e.do("PATCH", "/v1/auth/passkeys/"+id0, map[string]string{"name": "phone"}, withSession(tok), fromBrowser).
					want(t, http.StatusOK, "").json(t)
				if renamed["name"] != "phone" || renamed["id"] != id0 {
					t.Fatalf("renamed = %v", renamed)
				}
				e.do("PATCH", "/v1/auth/passkeys/"+id0, map[string]string{}, withSession(tok)).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
				e.do("PATCH", "/v1/auth/passkeys/pk_missing", map[string]string{"name": "x"}, withSession(tok)).want(t, http.StatusNotFound, "PASSKEY_NOT_FOUND")
				// The refused registration changed nothing, so the verification
				// made for it still allows one change.
				e.do("DELETE", "/v1/auth/passkeys/"+id0, nil, withSession(tok), fromBrowser).want(t, http.StatusNoContent, "")
				// The remaining passkey is a day old before it confirms changes.
				e.offset.Add(int64(ownerauth.NewPasskeyHold))
				e.verify(tok, second).want(t, http.StatusOK, "")
				e.do("DELETE", "/v1/auth/passkeys/"+id1, nil, withSession(tok), fromBrowser).want(t, http.StatusConflict, "LAST_PASSKEY")
				// The deleted passkey no longer signs in; the remaining one does.
				o := e.do("GET", "/v1/auth/login/options?namespace="+ns, nil).want(t, http.StatusOK, "")
				e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns, "credential": dev.get(t, o.body)}).
					want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
				e.offset.Add(int64(time.Minute)) // past the backoff of that failure
				e.login(ns, second).want(t, http.StatusOK, "")
			})
		}
	})
}

// TestCeremonyOptionsJSON checks the standard WebAuthn options JSON.
func TestCeremonyOptionsJSON(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, ProviderSQLite)
	var creation struct {
		Challenge string `json:"challenge"`
		RP        struct{ ID, Name string }
		User      struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"user"`
		Params []struct {
			Type string `json:"type"`
			Alg  int    `json:"alg"`
		} `json:"pubKeyCredParams"`
	}
	r := e.do("GET", "/v1/auth/signup/options?namespace=alice", nil).want(t, http.StatusOK, "")
	if err := json.Unmarshal(r.body, &creation); err != nil {
		t.Fatal(err)
	}
	if len(creation.Challenge) < 43 || strings.ContainsAny(creation.Challenge, "+/=") || creation.RP.ID != testRPID ||
		creation.User.Name != "alice" || creation.User.ID == "" || len(creation.Params) != 3 ||
		creation.Params[0].Alg != -7 || creation.Params[1].Alg != -8 || creation.Params[2].Alg != -257 || creation.Params[0].Type != "public-key" {
		t.Fatalf("creation options %s", r.body)
	}
	e.signup("alice", newDevice(t, "ES256")).want(t, http.StatusCreated, "")
	var request struct {
		Challenge string `json:"challenge"`
		RPID      string `json:"rpId"`
		Allow     []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"allowCredentials"`
	}
	r = e.do("GET", "/v1/auth/login/options?namespace=alice", nil).want(t, http.StatusOK, "")
	if err := json.Unmarshal(r.body, &request); err != nil {
		t.Fatal(err)
	}
	if request.Challenge == "" || request.RPID != testRPID || len(request.Allow) != 1 || request.Allow[0].Type != "public-key" {
		t.Fatalf("request options %s", r.body)
	}
	e.do("GET", "/v1/auth/signup/options?namespace=alice", nil).want(t, http.StatusConflict, "NAMESPACE_TAKEN")
	e.do("GET", "/v1/auth/signup/options?namespace=-bad", nil).want(t, http.StatusBadRequest, "NAMESPACE_INVALID")
	e.do("GET", "/v1/auth/login/options?namespace=nobody", nil).want(t, http.StatusNotFound, "NAMESPACE_NOT_FOUND")
}

// TestCeremonyAttacks: every row is a ceremony that must be refused.
func TestCeremonyAttacks(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		// Each row gets its own namespace, so backoffs do not interact.
		rows := []struct {
			name   string
			status int
			code   string
			run    func(t *testing.T, ns string, dev *device) resp
		}{
			{"login_from_wrong_origin", 401, "WEBAUTHN_FAILED", func(t *testing.T, ns string, dev *device) resp {
				dev.origin = "https://evil.example"
				return e.login(ns, dev)
			}},
			{"login_for_wrong_rp_id", 401, "WEBAUTHN_FAILED", func(t *testing.T, ns string, dev *device) resp {
				dev.rpID = "evil.example"
				return e.login(ns, dev)
			}},
			{"signup_from_wrong_origin", 401, "WEBAUTHN_FAILED", func(t *testing.T, ns string, _ *device) resp {
				d := newDevice(t, "ES256")
				d.origin = "http://localhost:9999"
				return e.signup(ns+"-x", d)
			}},
			{"signup_for_wrong_rp_id", 401, "WEBAUTHN_FAILED", func(t *testing.T, ns string, _ *device) resp {
				d := newDevice(t, "EdDSA")
				d.rpID = "example.com"
				return e.signup(ns+"-x", d)
			}},
			{"replayed_login_assertion", 401, "CHALLENGE_INVALID", func(t *testing.T, ns string, dev *device) resp {
				o := e.do("GET", "/v1/auth/login/options?namespace="+ns, nil).want(t, http.StatusOK, "")
				body := map[string]any{"namespace": ns, "credential": dev.get(t, o.body)}
				e.do("POST", "/v1/auth/login", body).want(t, http.StatusOK, "")
				return e.do("POST", "/v1/auth/login", body)
			}},
			{"replayed_signup_attestation", 401, "CHALLENGE_INVALID", func(t *testing.T, ns string, _ *device) resp {
				d := newDevice(t, "ES256")
				o := e.do("GET", "/v1/auth/signup/options?namespace="+ns+"-x", nil).want(t, http.StatusOK, "")
				body := map[string]any{"namespace": ns + "-x", "credential": d.create(t, o.body)}
				e.do("POST", "/v1/auth/signup", body).want(t, http.StatusCreated, "")
				// Same challenge for another name: still used up.
				body["namespace"] = ns + "-y"
				return e.do("POST", "/v1/auth/signup", body)
			}},
			{"expired_challenge", 401, "CHALLENGE_EXPIRED", func(t *testing.T, ns string, dev *device) resp {
				o := e.do("GET", "/v1/auth/login/options?namespace="+ns, nil).want(t, http.StatusOK, "")
				e.offset.Add(int64(time.Hour + time.Second))
				return e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns, "credential": dev.get(t, o.body)})
			}},
			{"cloned_authenticator_counter_regression", 401, "PASSKEY_COUNTER_REGRESSION", func(t *testing.T, ns string, dev *device) resp {
				copied := dev.clone()
				dev.counter = 10
				e.login(ns, dev).want(t, http.StatusOK, "") // counter 11 stored
				copied.counter = 4                          // the copy asserts 5
				return e.login(ns, copied)
			}},
			{"cloned_authenticator_same_counter", 401, "PASSKEY_COUNTER_REGRESSION", func(t *testing.T, ns string, dev *device) resp {
				copied := dev.clone()
				e.login(ns, dev).want(t, http.StatusOK, "")
				return e.login(ns, copied)
			}},
			{"login_challenge_of_other_namespace", 401, "CHALLENGE_INVALID", func(t *testing.T, ns string, dev *device) resp {
				e.signup(ns+"-b", newDevice(t, "ES256")).want(t, http.StatusCreated, "")
				o := e.do("GET", "/v1/auth/login/options?namespace="+ns+"-b", nil).want(t, http.StatusOK, "")
				return e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns, "credential": dev.get(t, o.body)})
			}},
			{"signup_challenge_used_for_login", 401, "CHALLENGE_INVALID", func(t *testing.T, ns string, dev *device) resp {
				o := e.do("GET", "/v1/auth/signup/options?namespace="+ns+"-z", nil).want(t, http.StatusOK, "")
				opts, _ := json.Marshal(map[string]any{"challenge": json.RawMessage(jsonField(t, o.body, "challenge"))})
				return e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns, "credential": dev.get(t, opts)})
			}},
			{"verify_challenge_of_other_session", 401, "CHALLENGE_INVALID", func(t *testing.T, ns string, dev *device) resp {
				a, b := sessionOf(t, e.login(ns, dev)), sessionOf(t, e.login(ns, dev))
				o := e.do("GET", "/v1/auth/verify/options", nil, withSession(a)).want(t, http.StatusOK, "")
				return e.do("POST", "/v1/auth/verify", map[string]any{"credential": dev.get(t, o.body)}, withSession(b))
			}},
			{"garbage_credential", 400, "CREDENTIAL_INVALID", func(t *testing.T, ns string, _ *device) resp {
				return e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns, "credential": map[string]string{"id": "x"}})
			}},
			{"missing_credential", 400, "CREDENTIAL_INVALID", func(t *testing.T, ns string, _ *device) resp {
				return e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns})
			}},
			{"cross_site_login_post", 403, "ORIGIN_FORBIDDEN", func(t *testing.T, ns string, dev *device) resp {
				o := e.do("GET", "/v1/auth/login/options?namespace="+ns, nil).want(t, http.StatusOK, "")
				return e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns, "credential": dev.get(t, o.body)},
					withHeader("Origin", "https://evil.example"))
			}},
		}
		for i, row := range rows {
			t.Run(row.name, func(t *testing.T) {
				e.t = t
				ns := "victim-" + string(rune('a'+i))
				dev := newDevice(t, []string{"ES256", "EdDSA"}[i%2])
				e.signup(ns, dev).want(t, http.StatusCreated, "")
				row.run(t, ns, dev).want(t, row.status, row.code)
			})
		}
	})
}

// jsonField returns the raw JSON of one member of an object.
func jsonField(t *testing.T, body []byte, name string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// TestCeremonyRoutesNeedOrigins: without WebAuthn origins the ceremony
// routes do not exist, and the rest refuse configurations that cannot work.
func TestCeremonyRoutesNeedOrigins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	e.do("GET", "/v1/auth/signup/options?namespace=alice", nil).want(t, http.StatusNotFound, "NOT_FOUND")
	tok := e.seed(map[string]any{"namespaces": []string{"alice"}}).Sessions["alice"]
	e.do("GET", "/v1/auth/me", nil, withSession(tok)).want(t, http.StatusOK, "")

	for name, auth := range map[string]AuthConfig{
		"origin_with_path":        {Origins: []string{"https://dash.example/x"}},
		"origin_outside_rp_id":    {Origins: []string{"https://dash.example", "https://other.example"}},
		"rp_id_not_origin_suffix": {Origins: []string{"https://dash.example"}, RPID: "example.org"},
	} {
		if _, err := New(Config{Store: e.st, JWTSecret: testSecret, Auth: auth}); err == nil {
			t.Errorf("%s: New accepted %+v", name, auth)
		}
	}
	if _, err := New(Config{Store: e.st, JWTSecret: testSecret, Auth: AuthConfig{Origins: []string{"https://a.dash.example", "https://dash.example"}, RPID: "dash.example"}}); err != nil {
		t.Errorf("subdomain origin refused: %v", err)
	}
}

// TestConcurrentReplay: one assertion sent by many clients at once signs
// in exactly once (the challenge is consumed by a single DELETE).
func TestConcurrentReplay(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		dev := newDevice(t, "EdDSA")
		e.signup("alice", dev).want(t, http.StatusCreated, "")
		o := e.do("GET", "/v1/auth/login/options?namespace=alice", nil).want(t, http.StatusOK, "")
		body, _ := json.Marshal(map[string]any{"namespace": "alice", "credential": dev.get(t, o.body)})
		const n = 8
		statuses := make(chan int, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				res, err := e.ts.Client().Post(e.ts.URL+"/v1/auth/login", "application/json", bytes.NewReader(body))
				if err != nil {
					statuses <- 0
					return
				}
				res.Body.Close()
				statuses <- res.StatusCode
			})
		}
		wg.Wait()
		close(statuses)
		ok := 0
		for s := range statuses {
			switch s {
			case http.StatusOK:
				ok++
			case http.StatusUnauthorized, http.StatusTooManyRequests:
			default:
				t.Errorf("status %d", s)
			}
		}
		if ok != 1 {
			t.Fatalf("%d logins succeeded with one assertion, want 1", ok)
		}
	})
}

// TestSeededOwnerAddsPasskey: a namespace created without a passkey (test
// seed) cannot sign in until its owner adds one in a session.
func TestSeededOwnerAddsPasskey(t *testing.T) {
	t.Parallel()
	forEachAuthEngine(t, func(t *testing.T, e *env) {
		tok := e.seed(map[string]any{"namespaces": []string{"acme"}}).Sessions["acme"]
		e.do("GET", "/v1/auth/login/options?namespace=acme", nil).want(t, http.StatusConflict, "NO_PASSKEYS")
		e.do("GET", "/v1/auth/verify/options", nil, withSession(tok)).want(t, http.StatusConflict, "NO_PASSKEYS")
		dev := newDevice(t, "EdDSA")
		// The first passkey needs no step-up: there is nothing to verify with.
		e.addPasskey(tok, dev, "").want(t, http.StatusCreated, "")
		e.login("acme", dev).want(t, http.StatusOK, "")
		e.do("GET", "/v1/auth/passkeys/options", nil, withSession(tok)).want(t, http.StatusForbidden, "REAUTH_REQUIRED")
		e.verify(tok, dev).want(t, http.StatusOK, "")
		// A passkey ceremony begun in one session cannot finish in another.
		other := sessionOf(t, e.login("acme", dev))
		o := e.do("GET", "/v1/auth/passkeys/options", nil, withSession(tok)).want(t, http.StatusOK, "")
		e.do("POST", "/v1/auth/passkeys", map[string]any{"credential": newDevice(t, "ES256").create(t, o.body)}, withSession(other)).
			want(t, http.StatusUnauthorized, "CHALLENGE_INVALID")
		e.do("POST", "/v1/auth/passkeys", map[string]any{"passkey_name": strings.Repeat("x", 65), "credential": map[string]string{}},
			withSession(tok)).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
}
