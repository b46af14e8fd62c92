package credvault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Sealed value format, version 1:
//
//	0x01 || nonce (12 bytes) || AES-256-GCM ciphertext and tag
//
// The additional data is "idn-credvault-v1" 0x00 kind 0x00 id 0x00 version
// (decimal), so a ciphertext only opens for the record and version it was
// sealed for.
const (
	sealFormatV1 = 0x01
	nonceSize    = 12
	aadLabel     = "idn-credvault-v1"
)

// Record kinds named in the additional data.
const (
	kindConnectionSecrets = "connection-secrets"
	kindVariable          = "credential-variable"
	kindKeyCheck          = "key-check"
	kindStoredBlob        = "stored-blob"
)

// errOpen is the single failure of open: wrong key, tampered bytes and a
// ciphertext moved to another record look the same on purpose.
var errOpen = errors.New("credvault: sealed value does not open under this key for this record")

type sealer struct{ aead cipher.AEAD }

func newSealer(k MasterKey) (*sealer, error) {
	block, err := aes.NewCipher(k.b[:])
	if err != nil {
		return nil, fmt.Errorf("credvault: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("credvault: %w", err)
	}
	return &sealer{aead: aead}, nil
}

func additionalData(kind, id string, version int64) []byte {
	b := make([]byte, 0, len(aadLabel)+len(kind)+len(id)+24)
	b = append(b, aadLabel...)
	b = append(b, 0)
	b = append(b, kind...)
	b = append(b, 0)
	b = append(b, id...)
	b = append(b, 0)
	return strconv.AppendInt(b, version, 10)
}

// seal encrypts plaintext for (kind, id, version) with a fresh random nonce.
func (s *sealer) seal(kind, id string, version int64, plaintext []byte) ([]byte, error) {
	return s.sealWithNonce(rand.Reader, kind, id, version, plaintext)
}

// sealWithNonce reads the nonce from r; tests pass a fixed reader to check
// the format against known answers.
func (s *sealer) sealWithNonce(r io.Reader, kind, id string, version int64, plaintext []byte) ([]byte, error) {
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plaintext)+s.aead.Overhead())
	out[0] = sealFormatV1
	if _, err := io.ReadFull(r, out[1:]); err != nil {
		return nil, fmt.Errorf("credvault: reading nonce: %w", err)
	}
	return s.aead.Seal(out, out[1:], plaintext, additionalData(kind, id, version)), nil
}

func (s *sealer) open(kind, id string, version int64, sealed []byte) ([]byte, error) {
	if len(sealed) < 1+nonceSize+s.aead.Overhead() || sealed[0] != sealFormatV1 {
		return nil, errOpen
	}
	pt, err := s.aead.Open(nil, sealed[1:1+nonceSize], sealed[1+nonceSize:], additionalData(kind, id, version))
	if err != nil {
		return nil, errOpen
	}
	return pt, nil
}
