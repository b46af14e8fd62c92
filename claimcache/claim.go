package claimcache

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// Claim is one record of the control plane's approved-claims feed
// (GET /v1/namespaces/claims). A snapshot leaves out, as malformed, a
// record with an empty ID or one over 255 bytes, an empty Namespace or one
// over 64 characters (the longest valid namespace), or a PublicKey
// ParsePublicKey refuses.
type Claim struct {
	ID         string    `json:"claim_id"`
	Namespace  string    `json:"namespace"`
	PublicKey  string    `json:"public_key"` // "ed25519:<standard base64>"
	Service    string    `json:"service"`
	ApprovedAt time.Time `json:"approved_at"`
	Subject    string    `json:"subject,omitempty"`
	AgentID    string    `json:"agent_id,omitempty"`
	AgentName  string    `json:"agent_name,omitempty"`
}

// Source delivers the approved claims of one service. It is implemented by
// HTTPSource for the control plane's feed, and by anything else a library
// user keeps claims in.
type Source interface {
	// ApprovedClaims calls add once for every approved claim of service and
	// returns the version of the set it delivered ("" when the source has no
	// versions). When version is not empty and the set still has that
	// version, it may return ErrNotModified without calling add. It returns
	// the error of add, wrapped, as soon as add fails. A delivery that ends
	// in an error is discarded by the caller.
	ApprovedClaims(ctx context.Context, service, version string, add func(Claim) error) (string, error)
}

// ParsePublicKey decodes the feed's "ed25519:<base64>" form of a key. Padded
// and unpadded standard base64 are accepted.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(s, "ed25519:")
	if !ok {
		return nil, fmt.Errorf("claimcache: public key lacks the ed25519: prefix")
	}
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(b64, "="))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("claimcache: public key is not %d bytes of base64", ed25519.PublicKeySize)
	}
	return raw, nil
}

// parseKeyInto decodes s as ParsePublicKey does, into key, without
// allocating. It reports whether ParsePublicKey would accept s; when it
// would not, key is left in any state.
func parseKeyInto(key *[ed25519.PublicKeySize]byte, s string) bool {
	b64, ok := strings.CutPrefix(s, "ed25519:")
	b64 = strings.TrimRight(b64, "=")
	var src [43]byte // 32 bytes are 43 characters of unpadded base64
	if !ok || len(b64) != len(src) {
		return false
	}
	copy(src[:], b64)
	n, err := base64.RawStdEncoding.Decode(key[:], src[:])
	return err == nil && n == ed25519.PublicKeySize
}
