package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// ErrNotFound is returned by Load when no identity exists for a namespace.
var ErrNotFound = errors.New("identity: no identity for this namespace")

// ErrInvalidRecord is returned for an identity file that cannot be used.
var ErrInvalidRecord = errors.New("identity: invalid identity record")

// maxRecordSize bounds the identity file Load reads.
const maxRecordSize = 1 << 20

// Identity is an agent identity: a namespace, an Ed25519 key pair and a
// self-signed certificate. It is the in-memory form of the version 1
// identity record (docs/profile.md); fields of the record this version does
// not know are kept and written back by Save.
type Identity struct {
	Namespace   string
	PublicKey   ed25519.PublicKey
	Certificate *Certificate
	CreatedAt   time.Time
	UpdatedAt   time.Time

	privateKey ed25519.PrivateKey
	extra      map[string]json.RawMessage
	wire       wireHeaders
}

// wireHeaders are the per-identity header values, computed once.
type wireHeaders struct {
	keyID     string
	publicKey string
	cert      string
}

// New creates an identity with a fresh key and a certificate issued now
// that does not expire.
func New(namespace string) (*Identity, error) { return NewNamed(namespace, "") }

// NewNamed is New with the agent display name name ("" for none; else
// valid under ValidName), carried in the certificate.
func NewNamed(namespace, name string) (*Identity, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("identity: generate key: %w", err)
	}
	return FromKeyNamed(namespace, name, key, time.Now())
}

// FromKey builds an identity for an existing private key, with a
// certificate issued at issuedAt that does not expire.
func FromKey(namespace string, key ed25519.PrivateKey, issuedAt time.Time) (*Identity, error) {
	return FromKeyNamed(namespace, "", key, issuedAt)
}

// FromKeyNamed is FromKey with the agent display name name ("" for none).
func FromKeyNamed(namespace, name string, key ed25519.PrivateKey, issuedAt time.Time) (*Identity, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("identity: private key must be %d bytes", ed25519.PrivateKeySize)
	}
	cert, err := IssueNamedCertificate(namespace, name, key, issuedAt, time.Time{})
	if err != nil {
		return nil, err
	}
	t := issuedAt.UTC().Truncate(time.Second)
	id := &Identity{
		Namespace:   namespace,
		PublicKey:   key.Public().(ed25519.PublicKey),
		Certificate: cert,
		CreatedAt:   t,
		UpdatedAt:   t,
		privateKey:  key,
	}
	return id, id.prepare()
}

// Name returns the agent display name its certificate carries, "" for none.
func (id *Identity) Name() string { return id.Certificate.Name }

// Rename replaces the certificate with one issued at now that carries name
// ("" removes the name), keeping the key, so approvals of the key stand.
// The certificate's expiry is kept. Save writes the change.
func (id *Identity) Rename(name string, now time.Time) error {
	var expires time.Time
	if e := id.Certificate.ExpiresAt; e != nil && *e != "" {
		t, err := time.Parse(time.RFC3339, *e)
		if err != nil {
			return fmt.Errorf("%w: expiresAt is not RFC 3339", ErrInvalidCertificate)
		}
		expires = t
	}
	cert, err := IssueNamedCertificate(id.Namespace, name, id.privateKey, now, expires)
	if err != nil {
		return err
	}
	old := id.Certificate
	id.Certificate = cert
	if err := id.prepare(); err != nil {
		id.Certificate = old
		return err
	}
	id.UpdatedAt = now.UTC().Truncate(time.Second)
	return nil
}

// DID returns the identity's DID, "did:idn:<namespace>".
func (id *Identity) DID() string { return DID(id.Namespace) }

// KeyID returns the identity's key id (the certificate's keyId).
func (id *Identity) KeyID() string { return id.wire.keyID }

// PublicKeyString returns the public key in "ed25519:<base64>" form.
func (id *Identity) PublicKeyString() string { return id.wire.publicKey }

// CertificateHeader returns the idn-agent-cert header value.
func (id *Identity) CertificateHeader() string { return id.wire.cert }

func (id *Identity) prepare() error {
	cert, err := id.Certificate.EncodeHeader()
	if err != nil {
		return err
	}
	id.wire = wireHeaders{keyID: id.Certificate.KeyID, publicKey: FormatPublicKey(id.PublicKey), cert: cert}
	return nil
}

// record is the version 1 identity file, in field order.
type record struct {
	Version     int          `json:"version"`
	Namespace   string       `json:"namespace"`
	DID         string       `json:"did"`
	KeyID       string       `json:"keyId"`
	PublicKey   string       `json:"publicKey"`
	PrivateKey  string       `json:"privateKey"`
	Certificate *Certificate `json:"certificate"`
	CreatedAt   string       `json:"createdAt"`
	UpdatedAt   string       `json:"updatedAt"`
}

var knownFields = map[string]bool{
	"version": true, "namespace": true, "did": true, "keyId": true, "publicKey": true,
	"privateKey": true, "certificate": true, "createdAt": true, "updatedAt": true,
}

// MarshalRecord returns the identity file contents: the version 1 record
// followed by any unknown fields it was loaded with, sorted by name.
func (id *Identity) MarshalRecord() ([]byte, error) {
	rec := record{
		Version:     1,
		Namespace:   id.Namespace,
		DID:         id.DID(),
		KeyID:       id.Certificate.KeyID,
		PublicKey:   FormatPublicKey(id.PublicKey),
		PrivateKey:  base64.StdEncoding.EncodeToString(id.privateKey.Seed()),
		Certificate: id.Certificate,
		CreatedAt:   formatTime(id.CreatedAt),
		UpdatedAt:   formatTime(id.UpdatedAt),
	}
	out, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("identity: encode record: %w", err)
	}
	if len(id.extra) > 0 {
		names := make([]string, 0, len(id.extra))
		for k := range id.extra {
			names = append(names, k)
		}
		sort.Strings(names)
		out = out[:len(out)-1] // drop "}"
		for _, k := range names {
			kj, _ := json.Marshal(k)
			out = append(append(append(append(out, ','), kj...), ':'), id.extra[k]...)
		}
		out = append(out, '}')
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out, "", "  "); err != nil {
		return nil, fmt.Errorf("identity: encode record: %w", err)
	}
	pretty.WriteByte('\n')
	return pretty.Bytes(), nil
}

// ParseRecord decodes an identity file. The private key must match the
// public key, and the certificate must verify and describe the same
// namespace and key.
func ParseRecord(data []byte) (*Identity, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidRecord)
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if rec.Version != 1 {
		return nil, fmt.Errorf("%w: version %d, want 1", ErrInvalidRecord, rec.Version)
	}
	if err := ValidNamespace(rec.Namespace); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	seed, err := base64.StdEncoding.DecodeString(rec.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: privateKey must be base64 of a 32-byte seed", ErrInvalidRecord)
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	if rec.PublicKey != FormatPublicKey(pub) {
		return nil, fmt.Errorf("%w: publicKey does not match privateKey", ErrInvalidRecord)
	}
	if rec.Certificate == nil {
		return nil, fmt.Errorf("%w: no certificate", ErrInvalidRecord)
	}
	certKey, err := rec.Certificate.VerifyProof()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if !certKey.Equal(pub) || rec.Certificate.Namespace != rec.Namespace ||
		rec.DID != DID(rec.Namespace) || rec.KeyID != rec.Certificate.KeyID {
		return nil, fmt.Errorf("%w: certificate does not match the record", ErrInvalidRecord)
	}
	created, err1 := time.Parse(time.RFC3339, rec.CreatedAt)
	updated, err2 := time.Parse(time.RFC3339, rec.UpdatedAt)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: createdAt and updatedAt must be RFC 3339", ErrInvalidRecord)
	}
	id := &Identity{
		Namespace:   rec.Namespace,
		PublicKey:   pub,
		Certificate: rec.Certificate,
		CreatedAt:   created,
		UpdatedAt:   updated,
		privateKey:  key,
	}
	for k, v := range fields {
		if !knownFields[k] {
			if id.extra == nil {
				id.extra = make(map[string]json.RawMessage)
			}
			id.extra[k] = v
		}
	}
	return id, id.prepare()
}

// Path returns the identity file of namespace under home:
// <home>/identities/<namespace>/identity.json.
func Path(home, namespace string) string {
	return filepath.Join(home, "identities", namespace, "identity.json")
}

// Load reads the identity of namespace from home.
func Load(home, namespace string) (*Identity, error) {
	if err := ValidNamespace(namespace); err != nil {
		return nil, err
	}
	f, err := os.Open(Path(home, namespace))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %q in %s", ErrNotFound, namespace, home)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	defer f.Close()
	data, err := readLimited(f, maxRecordSize)
	if err != nil {
		return nil, fmt.Errorf("identity: read %s: %w", f.Name(), err)
	}
	id, err := ParseRecord(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if id.Namespace != namespace {
		return nil, fmt.Errorf("%s: %w: holds namespace %q", f.Name(), ErrInvalidRecord, id.Namespace)
	}
	return id, nil
}

func readLimited(f *os.File, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("file larger than %d bytes", limit)
	}
	return data, nil
}

// Save writes the identity to home atomically (a temporary file renamed
// over the old one), creating folders 0700 and the file 0600.
func (id *Identity) Save(home string) error {
	data, err := id.MarshalRecord()
	if err != nil {
		return err
	}
	path := Path(home, id.Namespace)
	dir := filepath.Dir(path)
	for _, d := range []string{home, filepath.Join(home, "identities"), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("identity: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".identity-*.json")
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("identity: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("identity: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("identity: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// List returns the namespaces with an identity folder under home, sorted.
// A missing home gives an empty list.
func List(home string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(home, "identities"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || ValidNamespace(e.Name()) != nil {
			continue
		}
		if _, err := os.Stat(Path(home, e.Name())); err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
