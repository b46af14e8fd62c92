package controlplane

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/identity"
)

// owner is a signed-up owner with a passkey, a session and a service
// "<ns>-bank", and a gateway paired to it.
type owner struct {
	ns, tok, service string
	device           *device
	gw               *testGateway
}

func (e *env) passkeyOwner(ns string) owner {
	e.t.Helper()
	o := owner{ns: ns, service: ns + "-bank", device: newDevice(e.t, "ES256")}
	o.tok = sessionOf(e.t, e.signup(ns, o.device).want(e.t, http.StatusCreated, ""))
	e.do("POST", "/v1/services", map[string]any{"name": "Bank", "slug": o.service, "service_endpoint": "https://bank.example"},
		withSession(o.tok), fromBrowser).want(e.t, http.StatusCreated, "")
	o.gw = e.pairedGateway(o.tok)
	return o
}

// filing is what a gateway files for a payment of amount.
func filing(gw *testGateway, service, amount string) map[string]any {
	doc := []byte(`{"arguments":{"amount":"` + amount + `","to":"bob"},"connection":"bank","target":"POST /v1/payments"}`)
	id := "act_" + strings.ReplaceAll(amount, ".", "") + strconv.FormatInt(time.Now().UnixNano(), 36)
	return map[string]any{"id": id, "gateway": gw.id.PublicKeyString(), "connection_id": "bank", "service": service,
		"agent_namespace": "agents", "agent_public_key": "ed25519:YWdlbnQta2V5LWZvci10ZXN0cy0wMDAwMDAwMDAwMDA", "subject": "finance",
		"target": "POST /v1/payments", "document": json.RawMessage(doc), "digest": approval.Digest(doc),
		"expires_at": time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)}
}

// assert has d sign the challenge the control plane gives for id and
// terms, and returns it in the approve body's form.
func (e *env) assert(tok string, d *device, id, terms string) map[string]any {
	e.t.Helper()
	var ch struct {
		Challenge     string   `json:"challenge"`
		RPID          string   `json:"rp_id"`
		CredentialIDs []string `json:"credential_ids"`
	}
	if err := json.Unmarshal(e.do("GET", "/v1/actions/"+id+"/challenge?"+terms, nil, withSession(tok)).want(e.t, http.StatusOK, "").body, &ch); err != nil {
		e.t.Fatal(err)
	}
	return e.signChallenge(d, ch.Challenge, ch.RPID)
}

// signChallenge has d sign a base64url challenge, as the dashboard's
// script would.
func (e *env) signChallenge(d *device, challenge, rpID string) map[string]any {
	e.t.Helper()
	opts, _ := json.Marshal(map[string]any{"publicKey": map[string]any{"challenge": challenge, "rpId": rpID, "userVerification": "required"}})
	var cred struct {
		RawID    string `json:"rawId"`
		Response struct {
			AuthenticatorData string `json:"authenticatorData"`
			ClientDataJSON    string `json:"clientDataJSON"`
			Signature         string `json:"signature"`
		} `json:"response"`
	}
	if err := json.Unmarshal(d.get(e.t, opts), &cred); err != nil {
		e.t.Fatal(err)
	}
	return map[string]any{"credential_id": cred.RawID, "authenticator_data": cred.Response.AuthenticatorData,
		"client_data_json": cred.Response.ClientDataJSON, "signature": cred.Response.Signature}
}

// TestActionApprovalByPasskey: a paired gateway files a payment, its
// owner reads it whole and approves it with a passkey, and the gateway
// reads back an assertion that verifies against the keys it pinned at
// pairing, for this action and these terms.
func TestActionApprovalByPasskey(t *testing.T) {
	e := newAuthEnv(t, engines[0])
	alice := e.passkeyOwner("alice")
	f := filing(alice.gw, alice.service, "1250.00")
	id := f["id"].(string)
	e.do("POST", "/v1/gateways/actions", f, signedBy(alice.gw.id, identity.SignOptions{})).want(t, http.StatusCreated, "")

	list := e.do("GET", "/v1/actions", nil, withSession(alice.tok)).want(t, http.StatusOK, "")
	if !strings.Contains(string(list.body), `"amount":"1250.00"`) || !strings.Contains(string(list.body), id) {
		t.Fatalf("the owner's list: %s", list.body)
	}
	if strings.Contains(string(list.body), "secret") {
		t.Fatalf("the list names a secret: %s", list.body)
	}
	body := map[string]any{"uses": 2, "until_minutes": 30, "assertion": e.assert(alice.tok, alice.device, id, "uses=2&until_minutes=30")}
	e.do("POST", "/v1/actions/"+id+"/approve", body, withSession(alice.tok), fromBrowser).want(t, http.StatusOK, "")

	var dec struct {
		Status    string              `json:"status"`
		Uses      int                 `json:"uses"`
		Until     time.Time           `json:"until"`
		Assertion *approval.Assertion `json:"assertion"`
	}
	if err := json.Unmarshal(e.do("GET", "/v1/gateways/actions/"+id, nil, signedBy(alice.gw.id, identity.SignOptions{})).want(t, http.StatusOK, "").body, &dec); err != nil {
		t.Fatal(err)
	}
	var pinned approval.Keys
	if err := json.Unmarshal(alice.gw.ready.OwnerKeys, &pinned); err != nil || len(pinned.Keys) != 1 {
		t.Fatalf("the ready message pins %s (%v)", alice.gw.ready.OwnerKeys, err)
	}
	expires, _ := time.Parse(time.RFC3339, f["expires_at"].(string))
	grant := approval.Grant{ActionID: id, Gateway: alice.gw.id.PublicKeyString(), Digest: f["digest"].(string), ExpiresAt: expires,
		Uses: dec.Uses, Until: dec.Until}
	if dec.Status != "approved" || dec.Uses != 2 || !dec.Until.Equal(expires.Add(30*time.Minute)) {
		t.Fatalf("decision %+v", dec)
	}
	if err := pinned.Verify(dec.Assertion, approval.Challenge(grant)); err != nil {
		t.Fatalf("the gateway's own check of the approval: %v", err)
	}
	e.do("POST", "/v1/actions/"+id+"/deny", nil, withSession(alice.tok), fromBrowser).want(t, http.StatusConflict, "ACTION_STATE_CONFLICT")
}

func TestActionAttacks(t *testing.T) {
	e := newAuthEnv(t, engines[0])
	alice, bob := e.passkeyOwner("alice"), e.passkeyOwner("bob")
	file := func(amount string) string {
		f := filing(alice.gw, alice.service, amount)
		e.do("POST", "/v1/gateways/actions", f, signedBy(alice.gw.id, identity.SignOptions{})).want(t, http.StatusCreated, "")
		return f["id"].(string)
	}

	t.Run("another owner's passkey", func(t *testing.T) {
		id := file("1.00")
		var ch struct {
			Challenge string `json:"challenge"`
		}
		_ = json.Unmarshal(e.do("GET", "/v1/actions/"+id+"/challenge", nil, withSession(alice.tok)).want(t, http.StatusOK, "").body, &ch)
		forged := e.signChallenge(bob.device, ch.Challenge, testRPID)
		e.do("POST", "/v1/actions/"+id+"/approve", map[string]any{"uses": 1, "assertion": forged}, withSession(alice.tok), fromBrowser).
			want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
	})
	t.Run("an assertion for other terms", func(t *testing.T) {
		id := file("2.00")
		a := e.assert(alice.tok, alice.device, id, "uses=1")
		e.do("POST", "/v1/actions/"+id+"/approve", map[string]any{"uses": 50, "assertion": a}, withSession(alice.tok), fromBrowser).
			want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
	})
	t.Run("an assertion for another action id", func(t *testing.T) {
		one, other := file("3.00"), file("4.00")
		a := e.assert(alice.tok, alice.device, one, "uses=1")
		e.do("POST", "/v1/actions/"+other+"/approve", map[string]any{"uses": 1, "assertion": a}, withSession(alice.tok), fromBrowser).
			want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
	})
	t.Run("no assertion", func(t *testing.T) {
		id := file("5.00")
		e.do("POST", "/v1/actions/"+id+"/approve", map[string]any{"uses": 1}, withSession(alice.tok), fromBrowser).
			want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
	t.Run("another owner reads or decides it", func(t *testing.T) {
		id := file("6.00")
		e.do("GET", "/v1/actions/"+id, nil, withSession(bob.tok)).want(t, http.StatusNotFound, "ACTION_NOT_FOUND")
		e.do("POST", "/v1/actions/"+id+"/deny", nil, withSession(bob.tok), fromBrowser).want(t, http.StatusNotFound, "ACTION_NOT_FOUND")
	})
	t.Run("another gateway reads it", func(t *testing.T) {
		id := file("7.00")
		e.do("GET", "/v1/gateways/actions/"+id, nil, signedBy(bob.gw.id, identity.SignOptions{})).want(t, http.StatusNotFound, "ACTION_NOT_FOUND")
	})
	t.Run("a gateway files for another owner's service", func(t *testing.T) {
		e.do("POST", "/v1/gateways/actions", filing(bob.gw, alice.service, "8.00"), signedBy(bob.gw.id, identity.SignOptions{})).
			want(t, http.StatusNotFound, "SERVICE_NOT_FOUND")
	})
	t.Run("an unpaired key files", func(t *testing.T) {
		stranger := newTestGateway(t)
		e.do("POST", "/v1/gateways/actions", filing(stranger, alice.service, "9.00"), signedBy(stranger.id, identity.SignOptions{})).
			want(t, http.StatusForbidden, "GATEWAY_NOT_PAIRED")
	})
	t.Run("a document its digest does not cover", func(t *testing.T) {
		f := filing(alice.gw, alice.service, "10.00")
		f["document"] = json.RawMessage(`{"arguments":{"amount":"1.00","to":"bob"},"connection":"bank","target":"POST /v1/payments"}`)
		e.do("POST", "/v1/gateways/actions", f, signedBy(alice.gw.id, identity.SignOptions{})).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
	t.Run("a gateway files in another's name", func(t *testing.T) {
		f := filing(alice.gw, bob.service, "11.00")
		f["gateway"] = alice.gw.id.PublicKeyString()
		e.do("POST", "/v1/gateways/actions", f, signedBy(bob.gw.id, identity.SignOptions{})).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})
	t.Run("a denial carries no assertion", func(t *testing.T) {
		id := file("12.00")
		e.do("POST", "/v1/actions/"+id+"/deny", nil, withSession(alice.tok), fromBrowser).want(t, http.StatusOK, "")
		r := e.do("GET", "/v1/gateways/actions/"+id, nil, signedBy(alice.gw.id, identity.SignOptions{})).want(t, http.StatusOK, "")
		if !strings.Contains(string(r.body), `"status":"denied"`) || strings.Contains(string(r.body), "assertion") {
			t.Fatalf("decision %s", r.body)
		}
	})
}
