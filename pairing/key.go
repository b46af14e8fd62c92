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

// Files keeps a gateway's HPKE key and pairing state, by name. DirFiles
// keeps them in a data directory; a fleet keeps them in its shared
// credential store, so that its replicas pair once and share the pairing.
type Files interface {
	// ReadFile returns the content of name, or an error matching
	// fs.ErrNotExist.
	ReadFile(name string) ([]byte, error)
	// WriteFile replaces the content of name atomically; nil b deletes
	// name (one that does not exist is no error).
	WriteFile(name string, b []byte) error
	// CreateFile writes b to name unless name exists: of several
	// processes creating it at once, one wins, and all read its content.
	CreateFile(name string, b []byte) error
}

// DirFiles are the files of a directory, created 0700, written 0600 and
// atomically.
type DirFiles string

var _ Files = DirFiles("")

// ReadFile reads dir/name.
func (d DirFiles) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), name))
}

// WriteFile writes dir/name (0600) through a temporary file renamed over
// it, or removes it when b is nil.
func (d DirFiles) WriteFile(name string, b []byte) error {
	if b == nil {
		if err := os.Remove(filepath.Join(string(d), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pairing: %w", err)
		}
		return nil
	}
	return d.put(name, b, os.Rename)
}

// CreateFile writes dir/name (0600) through a temporary file linked to
// it, which fails, and leaves it as it is, when it exists.
func (d DirFiles) CreateFile(name string, b []byte) error {
	err := d.put(name, b, os.Link)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// put writes b to a temporary file of dir and moves it to name with
// place (os.Rename or os.Link).
func (d DirFiles) put(name string, b []byte, place func(from, to string) error) error {
	dir := string(d)
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
	if err := place(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("pairing: write %s: %w", name, err)
	}
	return nil
}

// keyRecord is the key file: the public key in clear, the private key
// sealed.
type keyRecord struct {
	Version    int    `json:"version"`
	PublicKey  []byte `json:"public_key"`
	PrivateKey []byte `json:"private_key_sealed"`
}

// loadOrCreateKey reads the HPKE key pair of f, creating it on first use.
// A key it creates is read back: when processes sharing f create one at
// once, they all use the one that won.
func loadOrCreateKey(f Files, mk credvault.MasterKey) (*ecdh.PrivateKey, error) {
	b, err := f.ReadFile(keyFile)
	if errors.Is(err, os.ErrNotExist) {
		if err := createKey(f, mk); err != nil {
			return nil, err
		}
		b, err = f.ReadFile(keyFile)
	}
	if err != nil {
		return nil, fmt.Errorf("pairing: read HPKE key: %w", err)
	}
	rec, err := parseKeyRecord(b)
	if err != nil {
		return nil, err
	}
	raw, err := mk.Open(keyPurpose, rec.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("pairing: the HPKE key %s does not open with this master key", keyFile)
	}
	k, err := ecdh.X25519().NewPrivateKey(raw)
	if err != nil || !bytes.Equal(k.PublicKey().Bytes(), rec.PublicKey) {
		return nil, fmt.Errorf("pairing: %s holds an inconsistent key pair", keyFile)
	}
	return k, nil
}

// createKey writes a fresh HPKE key pair to f.
func createKey(f Files, mk credvault.MasterKey) error {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("pairing: generate HPKE key: %w", err)
	}
	sealed, err := mk.Seal(keyPurpose, k.Bytes())
	if err != nil {
		return err
	}
	out, _ := json.Marshal(keyRecord{Version: 1, PublicKey: k.PublicKey().Bytes(), PrivateKey: sealed})
	return f.CreateFile(keyFile, out)
}

// readKeyRecord reads the key file of f.
func readKeyRecord(f Files) (keyRecord, error) {
	b, err := f.ReadFile(keyFile)
	if err != nil {
		return keyRecord{}, fmt.Errorf("pairing: read HPKE key: %w", err)
	}
	return parseKeyRecord(b)
}

func parseKeyRecord(b []byte) (keyRecord, error) {
	var rec keyRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version != 1 || len(rec.PublicKey) != 32 {
		return keyRecord{}, fmt.Errorf("pairing: %s is not a pairing key file", keyFile)
	}
	return rec, nil
}

// loadState reads the pairing state of f; ok is false before pairing.
func loadState(f Files) (State, bool, error) {
	b, err := f.ReadFile(stateFile)
	if errors.Is(err, os.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("pairing: read state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil || s.GatewayID == "" {
		return State{}, false, fmt.Errorf("pairing: %s is not a pairing state file", stateFile)
	}
	return s, true, nil
}

func saveState(f Files, s State) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	return f.WriteFile(stateFile, append(b, '\n'))
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
