package controlplane

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/descope/virtualwebauthn"
	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
)

// The dashboard origin and relying party of the auth tests.
const (
	testOrigin = "http://localhost:8787"
	testRPID   = "localhost"
)

// device is a software authenticator holding one credential. ES256
// credentials are virtualwebauthn's; virtualwebauthn has no Ed25519 keys, so
// EdDSA credentials are encoded here (attestation "none", COSE OKP key).
// origin and rpID are what the device answers with, so tests can make it
// lie.
type device struct {
	alg     string // "ES256", "EdDSA" or "RS256"
	origin  string
	rpID    string
	counter uint32 // signature counter; bumped by every assertion

	auth  virtualwebauthn.Authenticator
	cred  virtualwebauthn.Credential // ES256, RS256
	edKey ed25519.PrivateKey         // EdDSA
	edID  []byte
}

func newDevice(t testing.TB, alg string) *device {
	t.Helper()
	d := &device{alg: alg, origin: testOrigin, rpID: testRPID, auth: virtualwebauthn.NewAuthenticator()}
	switch alg {
	case "ES256":
		// virtualwebauthn encodes P-256 coordinates without their leading
		// zero bytes, which verifiers rightly refuse; keep to keys whose
		// coordinates fill 32 bytes.
		for {
			d.cred = virtualwebauthn.NewCredential(virtualwebauthn.KeyTypeEC2)
			k, err := x509.ParsePKCS8PrivateKey(d.cred.Key.Data)
			if err != nil {
				t.Fatal(err)
			}
			point, err := k.(*ecdsa.PrivateKey).PublicKey.Bytes() // 0x04 || X || Y
			if err != nil {
				t.Fatal(err)
			}
			if point[1] != 0 && point[33] != 0 {
				break
			}
		}
	case "RS256":
		d.cred = virtualwebauthn.NewCredential(virtualwebauthn.KeyTypeRSA)
	case "EdDSA":
		_, d.edKey, _ = ed25519.GenerateKey(rand.Reader)
		d.edID = make([]byte, 32)
		rand.Read(d.edID)
	default:
		t.Fatalf("unknown algorithm %s", alg)
	}
	return d
}

// clone returns a second device holding the same credential and counter,
// as an attacker who copied the key would.
func (d *device) clone() *device {
	c := *d
	return &c
}

func (d *device) rp() virtualwebauthn.RelyingParty {
	return virtualwebauthn.RelyingParty{ID: d.rpID, Name: "idn", Origin: d.origin}
}

// create answers creation options (bare or under "publicKey") with a
// PublicKeyCredential JSON.
func (d *device) create(t testing.TB, options []byte) json.RawMessage {
	t.Helper()
	opts, err := virtualwebauthn.ParseAttestationOptions(string(options))
	if err != nil {
		t.Fatalf("creation options %s: %v", options, err)
	}
	if d.alg != "EdDSA" {
		return json.RawMessage(virtualwebauthn.CreateAttestationResponse(d.rp(), d.auth, d.cred, *opts))
	}
	cose, err := webauthncbor.Marshal(struct {
		KeyType   int64  `cbor:"1,keyasint"`
		Algorithm int64  `cbor:"3,keyasint"`
		Curve     int64  `cbor:"-1,keyasint"`
		X         []byte `cbor:"-2,keyasint"`
	}{1, -8, 6, d.edKey.Public().(ed25519.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	authData := d.authData(0x45) // UP | UV | AT
	authData = append(authData, make([]byte, 16)...)
	authData = binary.BigEndian.AppendUint16(authData, uint16(len(d.edID)))
	authData = append(append(authData, d.edID...), cose...)
	att, err := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": authData})
	if err != nil {
		t.Fatal(err)
	}
	return credentialJSON(d.edID, map[string]string{
		"attestationObject": b64(att),
		"clientDataJSON":    b64(d.clientData("webauthn.create", opts.Challenge)),
	})
}

// get answers request options with an assertion, counter bumped first.
func (d *device) get(t testing.TB, options []byte) json.RawMessage {
	t.Helper()
	opts, err := virtualwebauthn.ParseAssertionOptions(string(options))
	if err != nil {
		t.Fatalf("request options %s: %v", options, err)
	}
	d.counter++
	if d.alg != "EdDSA" {
		d.cred.Counter = d.counter
		return json.RawMessage(virtualwebauthn.CreateAssertionResponse(d.rp(), d.auth, d.cred, *opts))
	}
	authData := d.authData(0x05) // UP | UV
	clientData := d.clientData("webauthn.get", opts.Challenge)
	digest := sha256.Sum256(clientData)
	sig := ed25519.Sign(d.edKey, append(append([]byte(nil), authData...), digest[:]...))
	return credentialJSON(d.edID, map[string]string{
		"authenticatorData": b64(authData),
		"clientDataJSON":    b64(clientData),
		"signature":         b64(sig),
	})
}

func (d *device) authData(flags byte) []byte {
	h := sha256.Sum256([]byte(d.rpID))
	return binary.BigEndian.AppendUint32(append(h[:], flags), d.counter)
}

func (d *device) clientData(typ string, challenge []byte) []byte {
	b, _ := json.Marshal(map[string]string{"type": typ, "challenge": b64(challenge), "origin": d.origin})
	return b
}

func credentialJSON(id []byte, response map[string]string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"id": b64(id), "rawId": b64(id), "type": "public-key", "response": response})
	return b
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// newAuthEnv is an env whose passkey ceremonies run at testOrigin.
func newAuthEnv(t *testing.T, engine string) *env {
	t.Helper()
	return newEnv(t, openStore(t, storeConfig(t, engine)), func(c *Config) {
		c.Auth = AuthConfig{Origins: []string{testOrigin}}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
}

// forEachAuthEngine is forEachEngine with passkey sign-in configured.
func forEachAuthEngine(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			fn(t, newAuthEnv(t, engine))
		})
	}
}

// fromBrowser marks a request as sent by the dashboard.
var fromBrowser = withHeader("Origin", testOrigin)

// sessionOf returns the idn_session cookie value an answer set.
func sessionOf(t *testing.T, r resp) string {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == SessionCookie && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("no session cookie in %v (status %d, %s)", r.header, r.status, r.body)
	return ""
}

// signupClients numbers the client addresses of signups, so the per-IP
// signup limit only meets the tests that aim for it.
var signupClients atomic.Uint32

// signup runs the signup ceremony of ns with d and returns the finish
// answer. Each call comes from its own client address (X-Forwarded-For
// from the trusted loopback proxy) unless opts set one.
func (e *env) signup(ns string, d *device, opts ...reqOpt) resp {
	e.t.Helper()
	n := signupClients.Add(1)
	opts = append([]reqOpt{withHeader("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff))}, opts...)
	o := e.do("GET", "/v1/auth/signup/options?namespace="+ns, nil, opts...).want(e.t, http.StatusOK, "")
	return e.do("POST", "/v1/auth/signup", map[string]any{"namespace": ns, "credential": d.create(e.t, o.body)},
		append([]reqOpt{fromBrowser}, opts...)...)
}

// login runs the login ceremony of ns with d and returns the finish answer.
func (e *env) login(ns string, d *device) resp {
	e.t.Helper()
	o := e.do("GET", "/v1/auth/login/options?namespace="+ns, nil).want(e.t, http.StatusOK, "")
	return e.do("POST", "/v1/auth/login", map[string]any{"namespace": ns, "credential": d.get(e.t, o.body)}, fromBrowser)
}

// verify runs the recent-verification ceremony in session tok.
func (e *env) verify(tok string, d *device) resp {
	e.t.Helper()
	o := e.do("GET", "/v1/auth/verify/options", nil, withSession(tok)).want(e.t, http.StatusOK, "")
	return e.do("POST", "/v1/auth/verify", map[string]any{"credential": d.get(e.t, o.body)}, withSession(tok), fromBrowser)
}

// addPasskey registers d as another passkey in session tok.
func (e *env) addPasskey(tok string, d *device, name string) resp {
	e.t.Helper()
	o := e.do("GET", "/v1/auth/passkeys/options", nil, withSession(tok)).want(e.t, http.StatusOK, "")
	return e.do("POST", "/v1/auth/passkeys", map[string]any{"passkey_name": name, "credential": d.create(e.t, o.body)},
		withSession(tok), fromBrowser)
}

// passkeyRecord and sessionRecord are the JSON of a passkey and a session
// in the /v1/auth listings.
type passkeyRecord struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Algorithm  string `json:"algorithm"`
	CreatedAt  string `json:"created_at"`
	LastUsedAt string `json:"last_used_at,omitempty"`
}

type sessionRecord struct {
	ID            string `json:"id"`
	Current       bool   `json:"current"`
	CreatedAt     string `json:"created_at"`
	ExpiresAt     string `json:"expires_at"`
	VerifiedAt    string `json:"verified_at,omitempty"`
	PasskeyID     string `json:"passkey_id,omitempty"`
	UserAgent     string `json:"user_agent,omitempty"`
	ClientAddress string `json:"client_address,omitempty"`
}
