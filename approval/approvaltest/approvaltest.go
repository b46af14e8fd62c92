// Package approvaltest is a software passkey for tests of owner-approved
// actions: it makes the WebAuthn assertions a browser would, so tests can
// approve (or forge) without one.
package approvaltest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"

	"github.com/idnhq/idn/approval"
)

// Passkey is an ES256 credential of one relying party and origin.
type Passkey struct {
	ID     []byte
	RPID   string
	Origin string
	key    *ecdsa.PrivateKey
}

// NewPasskey makes a passkey for rpID, used from origin.
func NewPasskey(rpID, origin string) *Passkey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	return &Passkey{ID: id, RPID: rpID, Origin: origin, key: k}
}

// Key is the passkey as a gateway pins it.
func (p *Passkey) Key() approval.Key {
	der, err := x509.MarshalPKIXPublicKey(&p.key.PublicKey)
	if err != nil {
		panic(err)
	}
	return approval.Key{CredentialID: p.ID, PublicKey: der}
}

// Keys pins the given passkeys of one relying party and origin.
func Keys(namespace string, keys ...*Passkey) *approval.Keys {
	k := &approval.Keys{Namespace: namespace, RPID: keys[0].RPID, Origins: []string{keys[0].Origin}}
	for _, p := range keys {
		k.Keys = append(k.Keys, p.Key())
	}
	return k
}

// Flags of the authenticator data: user present and user verified.
const Flags = 0x05

// Assert signs challenge as navigator.credentials.get would, with the
// given authenticator-data flags.
func (p *Passkey) Assert(challenge []byte, flags byte) *approval.Assertion {
	cd, _ := json.Marshal(map[string]any{"type": "webauthn.get", "challenge": base64.RawURLEncoding.EncodeToString(challenge),
		"origin": p.Origin, "crossOrigin": false})
	rp := sha256.Sum256([]byte(p.RPID))
	ad := append(rp[:], flags, 0, 0, 0, 0)
	h := sha256.Sum256(cd)
	msg := sha256.Sum256(append(append([]byte{}, ad...), h[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, p.key, msg[:])
	if err != nil {
		panic(err)
	}
	return &approval.Assertion{CredentialID: p.ID, AuthenticatorData: ad, ClientDataJSON: cd, Signature: sig}
}
