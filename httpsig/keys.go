package httpsig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"math/big"
)

// Algorithm names from the RFC 9421 §6.2 "HTTP Signature Algorithms" registry.
const (
	AlgEd25519         = "ed25519"
	AlgECDSAP256SHA256 = "ecdsa-p256-sha256"
	AlgECDSAP384SHA384 = "ecdsa-p384-sha384"
	AlgHMACSHA256      = "hmac-sha256"
	AlgRSAPSSSHA512    = "rsa-pss-sha512"
	AlgRSAV15SHA256    = "rsa-v1_5-sha256"
)

// SigningKey produces signatures over a signature base (RFC 9421 §3.1).
// Sign must not retain base after it returns: the buffer is reused.
type SigningKey interface {
	// Algorithm returns the registry name of the algorithm, e.g. AlgEd25519.
	Algorithm() string
	// Sign returns the raw signature bytes over base.
	Sign(base []byte) ([]byte, error)
}

// VerifyingKey checks signatures over a signature base (RFC 9421 §3.2).
// Verify must not retain base or sig after it returns.
type VerifyingKey interface {
	// Algorithm returns the registry name of the algorithm, e.g. AlgEd25519.
	Algorithm() string
	// Verify returns nil only if sig is a valid signature of base.
	Verify(base, sig []byte) error
}

var errBadSignature = errors.New("httpsig: signature does not verify")

// minRSABits is the smallest RSA modulus accepted for signing or verifying.
const minRSABits = 2048

// minHMACKeyBytes is the smallest HMAC secret accepted (the hash output size).
const minHMACKeyBytes = 32

var (
	_ SigningKey   = (*ed25519SigningKey)(nil)
	_ VerifyingKey = (*ed25519VerifyingKey)(nil)
	_ SigningKey   = (*ecdsaSigningKey)(nil)
	_ VerifyingKey = (*ecdsaVerifyingKey)(nil)
	_ SigningKey   = (*rsaSigningKey)(nil)
	_ VerifyingKey = (*rsaVerifyingKey)(nil)
	_ SigningKey   = (*HMACKey)(nil)
	_ VerifyingKey = (*HMACKey)(nil)
)

// Ed25519 (RFC 9421 §3.3.6): the signature is exactly ed25519.Sign(key, base).

// The Ed25519 keys are pointers so that keys compare with ==.
type ed25519SigningKey struct{ key ed25519.PrivateKey }

// NewEd25519SigningKey returns a SigningKey for "ed25519". A key of the wrong
// length makes Sign fail.
func NewEd25519SigningKey(priv ed25519.PrivateKey) SigningKey { return &ed25519SigningKey{priv} }

func (*ed25519SigningKey) Algorithm() string { return AlgEd25519 }

func (k *ed25519SigningKey) Sign(base []byte) ([]byte, error) {
	if len(k.key) != ed25519.PrivateKeySize {
		return nil, errors.New("httpsig: invalid ed25519 private key length")
	}
	return ed25519.Sign(k.key, base), nil
}

type ed25519VerifyingKey struct{ key ed25519.PublicKey }

// NewEd25519VerifyingKey returns a VerifyingKey for "ed25519". A key of the
// wrong length verifies nothing.
func NewEd25519VerifyingKey(pub ed25519.PublicKey) VerifyingKey { return &ed25519VerifyingKey{pub} }

func (*ed25519VerifyingKey) Algorithm() string { return AlgEd25519 }

func (k *ed25519VerifyingKey) Verify(base, sig []byte) error {
	if len(k.key) != ed25519.PublicKeySize || !ed25519.Verify(k.key, base, sig) {
		return errBadSignature
	}
	return nil
}

// ECDSA (RFC 9421 §3.3.4, §3.3.5): the signature is r||s, each left-padded
// to the curve size, not ASN.1 DER.

type ecdsaSigningKey struct {
	key  *ecdsa.PrivateKey
	alg  string
	size int
	hash crypto.Hash
}

// NewECDSASigningKey returns a SigningKey for "ecdsa-p256-sha256" (P-256
// keys) or "ecdsa-p384-sha384" (P-384 keys). Other curves are rejected.
func NewECDSASigningKey(priv *ecdsa.PrivateKey) (SigningKey, error) {
	if priv == nil {
		return nil, errors.New("httpsig: nil ECDSA private key")
	}
	alg, size, h, err := ecdsaParams(priv.Curve)
	if err != nil {
		return nil, err
	}
	return &ecdsaSigningKey{key: priv, alg: alg, size: size, hash: h}, nil
}

func ecdsaParams(c elliptic.Curve) (string, int, crypto.Hash, error) {
	switch c {
	case elliptic.P256():
		return AlgECDSAP256SHA256, 32, crypto.SHA256, nil
	case elliptic.P384():
		return AlgECDSAP384SHA384, 48, crypto.SHA384, nil
	}
	return "", 0, 0, errors.New("httpsig: unsupported ECDSA curve (want P-256 or P-384)")
}

func (k *ecdsaSigningKey) Algorithm() string { return k.alg }

func (k *ecdsaSigningKey) Sign(base []byte) ([]byte, error) {
	h := k.hash.New()
	h.Write(base)
	r, s, err := ecdsa.Sign(rand.Reader, k.key, h.Sum(nil))
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 2*k.size)
	r.FillBytes(sig[:k.size])
	s.FillBytes(sig[k.size:])
	return sig, nil
}

type ecdsaVerifyingKey struct {
	key  *ecdsa.PublicKey
	alg  string
	size int
	hash crypto.Hash
}

// NewECDSAVerifyingKey returns a VerifyingKey for "ecdsa-p256-sha256" (P-256
// keys) or "ecdsa-p384-sha384" (P-384 keys). Other curves are rejected.
func NewECDSAVerifyingKey(pub *ecdsa.PublicKey) (VerifyingKey, error) {
	if pub == nil {
		return nil, errors.New("httpsig: nil ECDSA public key")
	}
	alg, size, h, err := ecdsaParams(pub.Curve)
	if err != nil {
		return nil, err
	}
	return &ecdsaVerifyingKey{key: pub, alg: alg, size: size, hash: h}, nil
}

func (k *ecdsaVerifyingKey) Algorithm() string { return k.alg }

func (k *ecdsaVerifyingKey) Verify(base, sig []byte) error {
	if len(sig) != 2*k.size {
		return errBadSignature
	}
	h := k.hash.New()
	h.Write(base)
	r := new(big.Int).SetBytes(sig[:k.size])
	s := new(big.Int).SetBytes(sig[k.size:])
	if !ecdsa.Verify(k.key, h.Sum(nil), r, s) {
		return errBadSignature
	}
	return nil
}

// RSA (RFC 9421 §3.3.1, §3.3.2): RSASSA-PSS with SHA-512, MGF1(SHA-512) and a
// 64-byte salt, or RSASSA-PKCS1-v1_5 with SHA-256.

type rsaSigningKey struct {
	key *rsa.PrivateKey
	pss bool
}

type rsaVerifyingKey struct {
	key *rsa.PublicKey
	pss bool
}

var pssOptions = &rsa.PSSOptions{SaltLength: 64, Hash: crypto.SHA512}

// NewRSAPSSSigningKey returns a SigningKey for "rsa-pss-sha512". Keys under
// 2048 bits are rejected.
func NewRSAPSSSigningKey(priv *rsa.PrivateKey) (SigningKey, error) {
	return newRSASigningKey(priv, true)
}

// NewRSAV15SigningKey returns a SigningKey for "rsa-v1_5-sha256". Keys under
// 2048 bits are rejected.
func NewRSAV15SigningKey(priv *rsa.PrivateKey) (SigningKey, error) {
	return newRSASigningKey(priv, false)
}

// NewRSAPSSVerifyingKey returns a VerifyingKey for "rsa-pss-sha512". Keys
// under 2048 bits are rejected.
func NewRSAPSSVerifyingKey(pub *rsa.PublicKey) (VerifyingKey, error) {
	return newRSAVerifyingKey(pub, true)
}

// NewRSAV15VerifyingKey returns a VerifyingKey for "rsa-v1_5-sha256". Keys
// under 2048 bits are rejected.
func NewRSAV15VerifyingKey(pub *rsa.PublicKey) (VerifyingKey, error) {
	return newRSAVerifyingKey(pub, false)
}

func newRSASigningKey(priv *rsa.PrivateKey, pss bool) (SigningKey, error) {
	if priv == nil {
		return nil, errors.New("httpsig: nil RSA private key")
	}
	if priv.N.BitLen() < minRSABits {
		return nil, errors.New("httpsig: RSA key shorter than 2048 bits")
	}
	return &rsaSigningKey{key: priv, pss: pss}, nil
}

func newRSAVerifyingKey(pub *rsa.PublicKey, pss bool) (VerifyingKey, error) {
	if pub == nil || pub.N == nil {
		return nil, errors.New("httpsig: nil RSA public key")
	}
	if pub.N.BitLen() < minRSABits {
		return nil, errors.New("httpsig: RSA key shorter than 2048 bits")
	}
	return &rsaVerifyingKey{key: pub, pss: pss}, nil
}

func rsaAlg(pss bool) string {
	if pss {
		return AlgRSAPSSSHA512
	}
	return AlgRSAV15SHA256
}

func (k *rsaSigningKey) Algorithm() string { return rsaAlg(k.pss) }

func (k *rsaSigningKey) Sign(base []byte) ([]byte, error) {
	if k.pss {
		d := sha512.Sum512(base)
		return rsa.SignPSS(rand.Reader, k.key, crypto.SHA512, d[:], pssOptions)
	}
	d := sha256.Sum256(base)
	return rsa.SignPKCS1v15(nil, k.key, crypto.SHA256, d[:])
}

func (k *rsaVerifyingKey) Algorithm() string { return rsaAlg(k.pss) }

func (k *rsaVerifyingKey) Verify(base, sig []byte) error {
	var err error
	if k.pss {
		d := sha512.Sum512(base)
		err = rsa.VerifyPSS(k.key, crypto.SHA512, d[:], sig, pssOptions)
	} else {
		d := sha256.Sum256(base)
		err = rsa.VerifyPKCS1v15(k.key, crypto.SHA256, d[:], sig)
	}
	if err != nil {
		return errBadSignature
	}
	return nil
}

// HMACKey is a shared secret for "hmac-sha256" (RFC 9421 §3.3.3). It both
// signs and verifies; verification compares in constant time.
type HMACKey struct {
	secret []byte
}

// NewHMACKey returns an HMAC-SHA256 key. The secret is copied; secrets
// shorter than 32 bytes are rejected.
func NewHMACKey(secret []byte) (*HMACKey, error) {
	if len(secret) < minHMACKeyBytes {
		return nil, errors.New("httpsig: HMAC secret shorter than 32 bytes")
	}
	return &HMACKey{secret: append([]byte(nil), secret...)}, nil
}

// Algorithm returns AlgHMACSHA256.
func (*HMACKey) Algorithm() string { return AlgHMACSHA256 }

// Sign returns HMAC-SHA256(secret, base).
func (k *HMACKey) Sign(base []byte) ([]byte, error) {
	m := hmac.New(sha256.New, k.secret)
	m.Write(base)
	return m.Sum(nil), nil
}

// Verify recomputes the MAC and compares it with sig in constant time.
func (k *HMACKey) Verify(base, sig []byte) error {
	m := hmac.New(sha256.New, k.secret)
	m.Write(base)
	if !hmac.Equal(m.Sum(nil), sig) {
		return errBadSignature
	}
	return nil
}
