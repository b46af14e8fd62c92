package pairing

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/pairing/pairwire"
)

// Files in the data directory.
const (
	keyFile   = "pairing-key"
	stateFile = "pairing.json"
)

// keyPurpose binds the sealed private key to its use.
const keyPurpose = "pairing-hpke-x25519"

// State is what a completed pairing leaves in the data directory.
type State struct {
	GatewayID       string    `json:"gateway_id"`
	Namespace       string    `json:"namespace"`
	ControlPlaneURL string    `json:"registry_url"` // the file's name for it predates the Go name
	PairedAt        time.Time `json:"paired_at"`
}

// keyRecord is the key file: the public key in clear, the private key
// sealed.
type keyRecord struct {
	Version    int    `json:"version"`
	PublicKey  []byte `json:"public_key"`
	PrivateKey []byte `json:"private_key_sealed"`
}

// loadOrCreateKey reads the HPKE key pair of dir, creating it on first use.
func loadOrCreateKey(dir string, mk credvault.MasterKey) (*ecdh.PrivateKey, error) {
	path := filepath.Join(dir, keyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("pairing: generate HPKE key: %w", err)
		}
		sealed, err := mk.Seal(keyPurpose, k.Bytes())
		if err != nil {
			return nil, err
		}
		out, _ := json.Marshal(keyRecord{Version: 1, PublicKey: k.PublicKey().Bytes(), PrivateKey: sealed})
		if err := writeFile(dir, keyFile, out); err != nil {
			return nil, err
		}
		return k, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pairing: read HPKE key: %w", err)
	}
	rec, err := parseKeyRecord(path, b)
	if err != nil {
		return nil, err
	}
	raw, err := mk.Open(keyPurpose, rec.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("pairing: the HPKE key in %s does not open with this master key", path)
	}
	k, err := ecdh.X25519().NewPrivateKey(raw)
	if err != nil || !bytes.Equal(k.PublicKey().Bytes(), rec.PublicKey) {
		return nil, fmt.Errorf("pairing: %s holds an inconsistent key pair", path)
	}
	return k, nil
}

// readKeyRecord reads the key file of dir.
func readKeyRecord(dir string) (keyRecord, error) {
	path := filepath.Join(dir, keyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return keyRecord{}, fmt.Errorf("pairing: read HPKE key: %w", err)
	}
	return parseKeyRecord(path, b)
}

func parseKeyRecord(path string, b []byte) (keyRecord, error) {
	var rec keyRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version != 1 || len(rec.PublicKey) != 32 {
		return keyRecord{}, fmt.Errorf("pairing: %s is not a pairing key file", path)
	}
	return rec, nil
}

// loadState reads the pairing state of dir; ok is false before pairing.
func loadState(dir string) (State, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("pairing: read state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil || s.GatewayID == "" {
		return State{}, false, fmt.Errorf("pairing: %s is not a pairing state file", filepath.Join(dir, stateFile))
	}
	return s, true, nil
}

func saveState(dir string, s State) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	return writeFile(dir, stateFile, append(b, '\n'))
}

// removeState deletes the pairing state of dir; none is no error.
func removeState(dir string) error {
	if err := os.Remove(filepath.Join(dir, stateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pairing: %w", err)
	}
	return nil
}

// writeFile writes dir/name (0600) atomically.
func writeFile(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("pairing: write %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pairing: write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("pairing: write %s: %w", name, err)
	}
	return nil
}

// opener opens secrets sealed to the gateway.
type opener struct {
	key hpke.PrivateKey
}

func newOpener(k *ecdh.PrivateKey) (*opener, error) {
	pk, err := hpke.NewDHKEMPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pairing: %w", err)
	}
	return &opener{key: pk}, nil
}

// open opens a sealed secrets object (enc || ciphertext) for gatewayID.
func (o *opener) open(gatewayID string, sealed []byte) ([]byte, error) {
	return hpke.Open(o.key, hpke.HKDFSHA256(), hpke.AES256GCM(), pairwire.Info(gatewayID), sealed)
}
