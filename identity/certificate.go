package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/idnhq/idn/identity/display"
)

// ErrInvalidCertificate is returned for a certificate that cannot be
// decoded or whose proof does not verify.
var ErrInvalidCertificate = errors.New("identity: invalid certificate")

// certificateHeaderLine starts the canonical text a certificate proof signs.
const certificateHeaderLine = "idn-certificate-v1"

// maxCertificateHeader bounds the idn-agent-cert header a verifier decodes.
const maxCertificateHeader = 4096

// ErrInvalidName is returned for an agent display name outside the rule of
// ValidName.
var ErrInvalidName = errors.New("identity: invalid agent name")

// maxNameRunes bounds an agent display name.
const maxNameRunes = 64

// Certificate is a self-signed agent certificate (docs/profile.md). Its proof
// is an Ed25519 signature by PublicKey over CanonicalText.
type Certificate struct {
	Version   int     `json:"version"`
	Namespace string  `json:"namespace"`
	DID       string  `json:"did"`
	KeyID     string  `json:"keyId"`
	PublicKey string  `json:"publicKey"`
	IssuedAt  string  `json:"issuedAt"`
	ExpiresAt *string `json:"expiresAt"`
	// Name is the agent's display name, empty for none. The proof covers
	// it, and so does every request signature (through idn-agent-cert):
	// the gateway files it with the claims it submits, so an owner sees
	// which agent asks.
	Name  string    `json:"name,omitempty"`
	Proof CertProof `json:"proof"`
}

// ValidName reports whether name can be an agent's display name: 1 to 64
// characters of valid UTF-8, each printable (letters, marks, numbers,
// punctuation, symbols, and the ASCII space: no control, format or
// invisible characters, no other spaces), and no space at either end.
func ValidName(name string) error {
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxNameRunes {
		return fmt.Errorf("%w: must be 1 to %d characters of UTF-8", ErrInvalidName, maxNameRunes)
	}
	for _, r := range name {
		// IsPrint alone lets through characters that render as nothing
		// (U+3164, U+115F), which the servers refuse in any display string.
		if !unicode.IsPrint(r) || display.Hidden(r) {
			return fmt.Errorf("%w: contains the invisible or control character %U", ErrInvalidName, r)
		}
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' {
		return fmt.Errorf("%w: starts or ends with a space", ErrInvalidName)
	}
	return nil
}

// CertProof is the signature part of a Certificate.
type CertProof struct {
	Alg string `json:"alg"` // "ed25519"
	Sig string `json:"sig"` // base64url, no padding
}

// IssueCertificate creates a certificate for key in namespace, issued at
// issuedAt (truncated to seconds) and, when expiresAt is non-zero, expiring
// then. It has no display name; see IssueNamedCertificate.
func IssueCertificate(namespace string, key ed25519.PrivateKey, issuedAt, expiresAt time.Time) (*Certificate, error) {
	return IssueNamedCertificate(namespace, "", key, issuedAt, expiresAt)
}

// IssueNamedCertificate is IssueCertificate with the agent display name
// name ("" for none, else valid under ValidName).
func IssueNamedCertificate(namespace, name string, key ed25519.PrivateKey, issuedAt, expiresAt time.Time) (*Certificate, error) {
	if err := ValidNamespace(namespace); err != nil {
		return nil, err
	}
	if name != "" {
		if err := ValidName(name); err != nil {
			return nil, err
		}
	}
	pub := key.Public().(ed25519.PublicKey)
	c := &Certificate{
		Version:   1,
		Namespace: namespace,
		DID:       DID(namespace),
		KeyID:     KeyID(namespace, pub),
		PublicKey: FormatPublicKey(pub),
		IssuedAt:  formatTime(issuedAt),
		Name:      name,
	}
	if !expiresAt.IsZero() {
		s := formatTime(expiresAt)
		c.ExpiresAt = &s
	}
	sig := ed25519.Sign(key, []byte(c.CanonicalText()))
	c.Proof = CertProof{Alg: "ed25519", Sig: base64.RawURLEncoding.EncodeToString(sig)}
	return c, nil
}

// CanonicalText returns the UTF-8 lines the proof signs, joined by "\n"
// with no trailing newline. A certificate with a name has one more line,
// "name:<name>", after expires-at; one without has none, so unnamed
// certificates sign the same text as before names existed.
func (c *Certificate) CanonicalText() string {
	expires := ""
	if c.ExpiresAt != nil {
		expires = *c.ExpiresAt
	}
	lines := []string{
		certificateHeaderLine,
		"namespace:" + c.Namespace,
		"did:" + c.DID,
		"key-id:" + c.KeyID,
		"public-key:" + c.PublicKey,
		"issued-at:" + c.IssuedAt,
		"expires-at:" + expires,
	}
	if c.Name != "" {
		lines = append(lines, "name:"+c.Name)
	}
	return strings.Join(lines, "\n")
}

// VerifyProof checks the certificate's own consistency: version 1, a valid
// namespace with its DID, a key id under that DID, and an Ed25519 proof
// that verifies under the certificate's public key. It returns that key.
// It does not check times or compare against a request; see Verifier.
func (c *Certificate) VerifyProof() (ed25519.PublicKey, error) {
	if c.Version != 1 {
		return nil, fmt.Errorf("%w: version %d, want 1", ErrInvalidCertificate, c.Version)
	}
	if err := ValidNamespace(c.Namespace); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCertificate, err)
	}
	if c.DID != DID(c.Namespace) {
		return nil, fmt.Errorf("%w: did %q does not match namespace %q", ErrInvalidCertificate, c.DID, c.Namespace)
	}
	if !strings.HasPrefix(c.KeyID, c.DID+"#") || len(c.KeyID) == len(c.DID)+1 {
		return nil, fmt.Errorf("%w: keyId must start with %q", ErrInvalidCertificate, c.DID+"#")
	}
	pub, err := ParsePublicKey(c.PublicKey)
	if err != nil || !strings.HasPrefix(c.PublicKey, keyPrefix) {
		return nil, fmt.Errorf("%w: publicKey must be %q form", ErrInvalidCertificate, keyPrefix+"<base64>")
	}
	if c.Name != "" {
		if err := ValidName(c.Name); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCertificate, err)
		}
	}
	if c.Proof.Alg != "ed25519" {
		return nil, fmt.Errorf("%w: proof alg %q, want ed25519", ErrInvalidCertificate, c.Proof.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(c.Proof.Sig, "="))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: proof signature is not 64 bytes of base64url", ErrInvalidCertificate)
	}
	if !ed25519.Verify(pub, []byte(c.CanonicalText()), sig) {
		return nil, fmt.Errorf("%w: proof does not verify", ErrInvalidCertificate)
	}
	return pub, nil
}

// CheckTimes checks that the certificate is not expired at now and was not
// issued later than now+skew.
func (c *Certificate) CheckTimes(now time.Time, skew time.Duration) error {
	issued, err := time.Parse(time.RFC3339, c.IssuedAt)
	if err != nil {
		return fmt.Errorf("%w: issuedAt is not RFC 3339", ErrInvalidCertificate)
	}
	if issued.After(now.Add(skew)) {
		return fmt.Errorf("%w: issued in the future", ErrInvalidCertificate)
	}
	if c.ExpiresAt != nil && *c.ExpiresAt != "" {
		exp, err := time.Parse(time.RFC3339, *c.ExpiresAt)
		if err != nil {
			return fmt.Errorf("%w: expiresAt is not RFC 3339", ErrInvalidCertificate)
		}
		if !now.Before(exp) {
			return fmt.Errorf("%w: expired at %s", ErrInvalidCertificate, *c.ExpiresAt)
		}
	}
	return nil
}

// EncodeHeader returns the idn-agent-cert header value: base64url without
// padding of the certificate JSON.
// The JSON is compact, in the field order of Certificate, with no HTML
// escaping (a name's "&" stays "&"), so other implementations produce
// the same bytes with their plain JSON encoders.
func (c *Certificate) EncodeHeader() (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return "", fmt.Errorf("identity: encode certificate: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// DecodeCertificateHeader decodes an idn-agent-cert header value (base64url,
// padded or not). It checks structure only; call VerifyProof to check the
// proof.
func DecodeCertificateHeader(h string) (*Certificate, error) {
	if len(h) == 0 || len(h) > maxCertificateHeader {
		return nil, fmt.Errorf("%w: header must be 1 to %d characters", ErrInvalidCertificate, maxCertificateHeader)
	}
	js, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(h, "="))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrInvalidCertificate)
	}
	return decodeCertificateJSON(js)
}

func decodeCertificateJSON(js []byte) (*Certificate, error) {
	var c Certificate
	if err := json.Unmarshal(js, &c); err != nil {
		return nil, fmt.Errorf("%w: not a certificate object", ErrInvalidCertificate)
	}
	if c.Namespace == "" || c.PublicKey == "" || c.KeyID == "" || c.IssuedAt == "" || c.Proof.Sig == "" {
		return nil, fmt.Errorf("%w: missing fields", ErrInvalidCertificate)
	}
	return &c, nil
}

func formatTime(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }
