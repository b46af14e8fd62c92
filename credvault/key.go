package credvault

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// MasterKeySize is the length of a master key in bytes (AES-256).
const MasterKeySize = 32

// MasterKey is the key every secret in a store is sealed under. Its String
// method never reveals it.
type MasterKey struct {
	b [MasterKeySize]byte
	// set distinguishes a parsed or generated key from the zero value, which
	// New refuses.
	set bool
}

// ErrInvalidMasterKey is returned by ParseMasterKey for input that is not the
// standard base64 encoding of exactly 32 bytes.
var ErrInvalidMasterKey = errors.New("credvault: master key must be the standard base64 encoding of exactly 32 random bytes")

// ParseMasterKey decodes a master key given as the standard base64 (padded)
// encoding of exactly 32 bytes, as GATEWAY_MASTER_KEY is. Surrounding white
// space is ignored. The error never contains the input.
func ParseMasterKey(s string) (MasterKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return MasterKey{}, fmt.Errorf("%w: the key is empty", ErrInvalidMasterKey)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return MasterKey{}, fmt.Errorf("%w: the key is not valid base64", ErrInvalidMasterKey)
	}
	if len(raw) != MasterKeySize {
		return MasterKey{}, fmt.Errorf("%w: the key decodes to %d bytes", ErrInvalidMasterKey, len(raw))
	}
	var k MasterKey
	copy(k.b[:], raw)
	k.set = true
	return k, nil
}

// GenerateMasterKey returns a fresh random master key.
func GenerateMasterKey() (MasterKey, error) {
	var k MasterKey
	if _, err := rand.Read(k.b[:]); err != nil {
		return MasterKey{}, fmt.Errorf("credvault: generating master key: %w", err)
	}
	k.set = true
	return k, nil
}

// Encode returns the key in the form ParseMasterKey accepts. It is the only
// way to see the key's bytes; use it to print a freshly generated key.
func (k MasterKey) Encode() string { return base64.StdEncoding.EncodeToString(k.b[:]) }

// String returns a fixed placeholder so a key that reaches a log or an error
// message by accident reveals nothing.
func (k MasterKey) String() string { return "credvault.MasterKey([redacted])" }

// GoString is String, so %#v is safe too.
func (k MasterKey) GoString() string { return k.String() }

// Derive returns a 32-byte key for purpose, derived from k with HKDF
// (SHA-256). Processes holding one master key derive one key for each
// purpose, and a derived key reveals nothing of k.
func (k MasterKey) Derive(purpose string) []byte {
	key, err := hkdf.Key(sha256.New, k.b[:], nil, "idn credvault "+purpose, MasterKeySize)
	if err != nil { // only for a length HKDF cannot give
		panic(err)
	}
	return key
}
