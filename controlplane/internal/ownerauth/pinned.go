package ownerauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"math/big"
	"time"

	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/idnhq/idn/approval"
)

// PinnedKeys returns the passkeys of the account owning ns as a gateway
// pins them (package approval): PKIX public keys with the relying-party
// ID and the dashboard origins. A key of an algorithm the gateway does not
// verify is left out.
func (a *Accounts) PinnedKeys(ctx context.Context, ns string) (*approval.Keys, error) {
	return a.PinnedKeysAt(ctx, ns, time.Time{})
}

// PinnedKeysAt is PinnedKeys of the passkeys registered at or before at
// (all when at is zero): what a gateway paired then pinned, less those
// removed since.
func (a *Accounts) PinnedKeysAt(ctx context.Context, ns string, at time.Time) (*approval.Keys, error) {
	keys, err := a.store.passkeys(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := &approval.Keys{Namespace: ns, RPID: a.cfg.RPID, Origins: a.cfg.Origins, Keys: []approval.Key{}}
	for _, k := range keys {
		if !at.IsZero() && k.CreatedAt.After(at) {
			continue
		}
		der, err := pkix(k.Credential.PublicKey)
		if err != nil {
			continue
		}
		out.Keys = append(out.Keys, approval.Key{CredentialID: k.Credential.ID, PublicKey: der})
	}
	return out, nil
}

// pkix converts a COSE public key (ES256, EdDSA or RS256) to PKIX DER.
func pkix(cose []byte) ([]byte, error) {
	parsed, err := webauthncose.ParsePublicKey(cose)
	if err != nil {
		return nil, err
	}
	var pub any
	switch k := parsed.(type) {
	case webauthncose.EC2PublicKeyData:
		if webauthncose.COSEAlgorithmIdentifier(k.Algorithm) != webauthncose.AlgES256 {
			return nil, errors.New("ownerauth: only P-256 EC2 keys are pinned")
		}
		if len(k.XCoord) != 32 || len(k.YCoord) != 32 {
			return nil, errors.New("ownerauth: P-256 coordinates are not 32 bytes")
		}
		ec, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, k.XCoord...), k.YCoord...))
		if err != nil {
			return nil, err
		}
		pub = ec
	case webauthncose.OKPPublicKeyData:
		if len(k.XCoord) != ed25519.PublicKeySize {
			return nil, errors.New("ownerauth: OKP key is not Ed25519")
		}
		pub = ed25519.PublicKey(k.XCoord)
	case webauthncose.RSAPublicKeyData:
		e, err := webauthncose.ParseRSAPublicKeyDataExponent(&k)
		if err != nil {
			return nil, err
		}
		pub = &rsa.PublicKey{N: new(big.Int).SetBytes(k.Modulus), E: e}
	default:
		return nil, errors.New("ownerauth: unsupported key type")
	}
	return x509.MarshalPKIXPublicKey(pub)
}
