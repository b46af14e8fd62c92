package controlplane

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/pairing/pairwire"
)

// rpcRefusal is a test gateway's JSON-RPC error answer.
type rpcRefusal struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// pinningGateway has gw check each owner_keys.update against the keys it
// pinned, as a real gateway does, and keep the set it accepts.
type pinningGateway struct {
	mu     sync.Mutex
	pinned *approval.Keys
}

func pinKeys(t *testing.T, gw *testGateway) *pinningGateway {
	t.Helper()
	p := &pinningGateway{}
	if err := json.Unmarshal(gw.ready.OwnerKeys, &p.pinned); err != nil {
		t.Fatal(err)
	}
	gw.answerWith(func(req rpcRequest) any {
		var params struct {
			Update approval.KeysUpdate `json:"update"`
		}
		if req.Method != pairwire.MethodOwnerKeysUpdate || json.Unmarshal(req.Params, &params) != nil {
			return rpcRefusal{Code: pairwire.CodeInvalidParams, Message: "not an update"}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		next, err := p.pinned.Apply(&params.Update, gw.ready.GatewayID, time.Now())
		if err != nil {
			return rpcRefusal{Code: pairwire.CodeInvalidParams, Message: err.Error()}
		}
		p.pinned = next
		return map[string]any{"version": next.Version}
	})
	return p
}

func (p *pinningGateway) keys() *approval.Keys {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pinned
}

// keysChallenge is the control plane's prepared change and its challenge.
type keysChallenge struct {
	Update    approval.KeysUpdate `json:"update"`
	Challenge string              `json:"challenge"`
	RPID      string              `json:"rp_id"`
}

// signKeys has d sign the change ch prepared, as the dashboard's script
// would after adding or removing a passkey.
func (e *env) signKeys(d *device, ch keysChallenge) map[string]any {
	e.t.Helper()
	a := e.signChallenge(d, ch.Challenge, ch.RPID)
	b, _ := json.Marshal(a)
	u := ch.Update
	if err := json.Unmarshal(b, &u.Assertion); err != nil {
		e.t.Fatal(err)
	}
	return map[string]any{"update": u}
}

// TestOwnerKeysChange: after the owner adds a passkey, a change signed by
// the passkey the gateway pinned reaches the gateway, which checks it
// itself and then accepts approvals by the new passkey. A change signed by
// the added passkey alone or by another owner's, and a replay, are
// refused; a gateway that was offline gets the change when it reconnects.
func TestOwnerKeysChange(t *testing.T) {
	e := newAuthEnv(t, engines[0])
	alice, bob := e.passkeyOwner("alice"), e.passkeyOwner("bob")
	gw := pinKeys(t, alice.gw)
	second := newDevice(t, "ES256")
	e.verify(alice.tok, alice.device).want(t, http.StatusOK, "")
	e.addPasskey(alice.tok, second, "second").want(t, http.StatusCreated, "")

	var ch keysChallenge
	if err := json.Unmarshal(e.do("GET", "/v1/auth/passkeys/gateways", nil, withSession(alice.tok)).want(t, http.StatusOK, "").body, &ch); err != nil {
		t.Fatal(err)
	}
	if len(ch.Update.Keys.Keys) != 2 || ch.Update.Keys.Version != 1 || len(ch.Update.Gateways) != 1 || ch.Update.Gateways[0] != alice.gw.ready.GatewayID {
		t.Fatalf("prepared change %+v", ch.Update)
	}
	for _, tc := range []struct {
		name   string
		signer *device
	}{{"signed by the passkey being added only", second}, {"signed by another owner's passkey", bob.device}} {
		t.Run(tc.name, func(t *testing.T) {
			e.do("POST", "/v1/auth/passkeys/gateways", e.signKeys(tc.signer, ch), withSession(alice.tok), fromBrowser).
				want(t, http.StatusUnauthorized, "WEBAUTHN_FAILED")
			if k := gw.keys(); len(k.Keys) != 1 {
				t.Fatalf("the gateway pins %d keys", len(k.Keys))
			}
		})
	}

	signed := e.signKeys(alice.device, ch)
	var res struct {
		Version  int64 `json:"version"`
		Gateways []struct {
			GatewayID string `json:"gateway_id"`
			Status    string `json:"status"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(e.do("POST", "/v1/auth/passkeys/gateways", signed, withSession(alice.tok), fromBrowser).want(t, http.StatusOK, "").body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || len(res.Gateways) != 1 || res.Gateways[0].Status != "applied" {
		t.Fatalf("change answered %+v", res)
	}
	c := []byte("an action's challenge")
	a := e.signChallenge(second, b64(c), testRPID)
	b, _ := json.Marshal(a)
	var assertion approval.Assertion
	_ = json.Unmarshal(b, &assertion)
	if err := gw.keys().Verify(&assertion, c); err != nil {
		t.Fatalf("the gateway refuses the added passkey: %v", err)
	}

	t.Run("replayed change", func(t *testing.T) {
		e.do("POST", "/v1/auth/passkeys/gateways", signed, withSession(alice.tok), fromBrowser).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
	})

	// A reconnecting gateway is brought the latest change; a new pairing
	// pins the current set at its version.
	alice.gw.conn.Close(1000, "")
	alice.gw.waitClosed(t)
	ready, err := alice.gw.connect(e.ts.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	var last approval.KeysUpdate
	if err := json.Unmarshal(ready.OwnerKeysUpdate, &last); err != nil || last.Keys.Version != 1 || len(last.Keys.Keys) != 2 {
		t.Fatalf("reconnect brings %s (%v)", ready.OwnerKeysUpdate, err)
	}
	var fresh approval.Keys
	if err := json.Unmarshal(e.pairedGateway(alice.tok).ready.OwnerKeys, &fresh); err != nil || fresh.Version != 1 || len(fresh.Keys) != 2 {
		t.Fatalf("a new pairing pins %+v (%v)", fresh, err)
	}
}
