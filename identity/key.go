package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/multiformats/go-multibase"
)

// ErrInvalidKey is returned for a public key that cannot be decoded.
var ErrInvalidKey = errors.New("identity: invalid public key")

const keyPrefix = "ed25519:"

// ed25519Multicodec is the multicodec prefix of an Ed25519 public key.
var ed25519Multicodec = []byte{0xed, 0x01}

// FormatPublicKey returns the wire form of an Ed25519 public key,
// "ed25519:<standard padded base64 of the 32 raw bytes>".
func FormatPublicKey(pub ed25519.PublicKey) string {
	return keyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey parses the "ed25519:<base64>" form and also accepts a
// multibase "z…" Ed25519 key (with the 0xed01 multicodec prefix).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	if rest, ok := strings.CutPrefix(s, keyPrefix); ok {
		if len(rest) != base64.StdEncoding.EncodedLen(ed25519.PublicKeySize) {
			return nil, fmt.Errorf("%w: want 44 base64 characters after %q", ErrInvalidKey, keyPrefix)
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
		}
		if len(raw) != ed25519.PublicKeySize { // 44 characters without padding hold 33 bytes
			return nil, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidKey, len(raw), ed25519.PublicKeySize)
		}
		return ed25519.PublicKey(raw), nil
	}
	if strings.HasPrefix(s, "z") {
		return ParseMultibase(s)
	}
	return nil, fmt.Errorf("%w: want %q prefix or a multibase key", ErrInvalidKey, keyPrefix)
}

// Multibase returns the key as a W3C publicKeyMultibase value: "z" +
// base58btc of the multicodec prefix 0xed 0x01 and the raw key ("z6Mk…").
func Multibase(pub ed25519.PublicKey) string {
	buf := make([]byte, 0, len(ed25519Multicodec)+len(pub))
	buf = append(append(buf, ed25519Multicodec...), pub...)
	s, err := multibase.Encode(multibase.Base58BTC, buf)
	if err != nil { // only for an unknown encoding, which Base58BTC is not
		panic("identity: multibase: " + err.Error())
	}
	return s
}

// ParseMultibase decodes a publicKeyMultibase value made by Multibase.
func ParseMultibase(s string) (ed25519.PublicKey, error) {
	enc, raw, err := multibase.Decode(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	if enc != multibase.Base58BTC {
		return nil, fmt.Errorf("%w: multibase key is not base58btc", ErrInvalidKey)
	}
	if len(raw) != len(ed25519Multicodec)+ed25519.PublicKeySize ||
		raw[0] != ed25519Multicodec[0] || raw[1] != ed25519Multicodec[1] {
		return nil, fmt.Errorf("%w: multibase key is not an Ed25519 key", ErrInvalidKey)
	}
	return ed25519.PublicKey(raw[len(ed25519Multicodec):]), nil
}

// KeyID returns the key id of an agent key in a namespace:
// "<did>#ed25519-<first 8 bytes of SHA-256(raw key), lower hex>".
func KeyID(namespace string, pub ed25519.PublicKey) string {
	return DID(namespace) + "#" + KeyFragment(pub)
}

// KeyFragment returns the fragment part of KeyID, "ed25519-<16 hex>".
func KeyFragment(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519-" + hex.EncodeToString(sum[:8])
}
