package approval

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Key is one of the owner's passkeys as the gateway pins it: the
// credential id and the public key (PKIX, DER).
type Key struct {
	CredentialID []byte `json:"credential_id"`
	PublicKey    []byte `json:"public_key"`
}

// Keys are the owner's pinned passkeys and where they are used: the
// WebAuthn relying party id and the dashboard origins. A gateway learns
// them when it is paired (or from its operator) and keeps them; the
// control plane cannot change them behind its back.
type Keys struct {
	Namespace string   `json:"namespace"`
	RPID      string   `json:"rp_id"`
	Origins   []string `json:"origins"`
	Keys      []Key    `json:"keys"`
	// Version counts the owner's changes of the set (KeysUpdate); a
	// gateway accepts only a higher one.
	Version int64 `json:"version,omitempty"`
}

// Assertion is a WebAuthn assertion (navigator.credentials.get). In
// JSON its members are base64url without padding, as browsers give them.
type Assertion struct {
	CredentialID      []byte
	AuthenticatorData []byte
	ClientDataJSON    []byte
	Signature         []byte
}

type assertionJSON struct {
	CredentialID      string `json:"credential_id"`
	AuthenticatorData string `json:"authenticator_data"`
	ClientDataJSON    string `json:"client_data_json"`
	Signature         string `json:"signature"`
}

// MarshalJSON encodes the members as unpadded base64url.
func (a Assertion) MarshalJSON() ([]byte, error) {
	e := base64.RawURLEncoding.EncodeToString
	return json.Marshal(assertionJSON{e(a.CredentialID), e(a.AuthenticatorData), e(a.ClientDataJSON), e(a.Signature)})
}

// UnmarshalJSON decodes base64url members, padded or not.
func (a *Assertion) UnmarshalJSON(data []byte) error {
	var j assertionJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var out Assertion
	for _, f := range []struct {
		src string
		dst *[]byte
	}{{j.CredentialID, &out.CredentialID}, {j.AuthenticatorData, &out.AuthenticatorData}, {j.ClientDataJSON, &out.ClientDataJSON}, {j.Signature, &out.Signature}} {
		v, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(f.src, "="))
		if err != nil {
			return fmt.Errorf("approval: assertion member is not base64url: %w", err)
		}
		*f.dst = v
	}
	*a = out
	return nil
}

// ErrAssertion is the one sentinel of a refused assertion; the wrapped
// message says which check failed.
var ErrAssertion = errors.New("approval: assertion refused")

func refuse(why string) error { return fmt.Errorf("%w: %s", ErrAssertion, why) }

// Authenticator-data flags (WebAuthn §6.1).
const (
	flagUserPresent  = 0x01
	flagUserVerified = 0x04
)

// Verify checks a WebAuthn assertion (WebAuthn Level 2 §7.2) against the
// pinned keys. The credential must be one of them. The client data must
// be a "webauthn.get" of challenge from a pinned origin. The authenticator
// data must name the pinned relying party, with the user present and
// verified. The signature over authenticatorData ‖ SHA-256(clientDataJSON)
// must hold.
//
// Signature counters are not checked: synced passkeys keep them at zero.
func (k *Keys) Verify(a *Assertion, challenge []byte) error {
	if k == nil || a == nil {
		return refuse("no pinned keys")
	}
	i := slices.IndexFunc(k.Keys, func(key Key) bool { return bytes.Equal(key.CredentialID, a.CredentialID) })
	if i < 0 {
		return refuse("credential is not one of the owner's pinned passkeys")
	}
	var cd struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
		Origin    string `json:"origin"`
	}
	if err := json.Unmarshal(a.ClientDataJSON, &cd); err != nil {
		return refuse("client data is not JSON")
	}
	want := base64.RawURLEncoding.EncodeToString(challenge)
	switch {
	case cd.Type != "webauthn.get":
		return refuse("client data type is not webauthn.get")
	case subtle.ConstantTimeCompare([]byte(cd.Challenge), []byte(want)) != 1:
		return refuse("challenge is not this action's")
	case !slices.Contains(k.Origins, cd.Origin):
		return refuse("origin is not the owner's dashboard")
	}
	ad := a.AuthenticatorData
	if len(ad) < 37 {
		return refuse("authenticator data is short")
	}
	rp := sha256.Sum256([]byte(k.RPID))
	switch {
	case !bytes.Equal(ad[:32], rp[:]):
		return refuse("relying party is not the owner's")
	case ad[32]&flagUserPresent == 0 || ad[32]&flagUserVerified == 0:
		return refuse("user not present and verified")
	}
	cdHash := sha256.Sum256(a.ClientDataJSON)
	signed := append(slices.Clone(ad), cdHash[:]...)
	return verifySignature(k.Keys[i].PublicKey, signed, a.Signature)
}

// verifySignature checks sig over msg with a PKIX public key: ES256,
// Ed25519 or RS256, the algorithms the dashboard registers.
func verifySignature(der, msg, sig []byte) error {
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return refuse("pinned key is unreadable")
	}
	digest := sha256.Sum256(msg)
	ok := false
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(pub, digest[:], sig)
	case ed25519.PublicKey:
		ok = ed25519.Verify(pub, msg, sig)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil
	}
	if !ok {
		return refuse("signature does not verify")
	}
	return nil
}
