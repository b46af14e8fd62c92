package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// KeysUpdate is the owner's change of their passkey set after pairing:
// the whole new set, the gateways it is meant for, an expiry, and a
// WebAuthn assertion over KeysChallenge by a passkey the gateway already
// pinned. The control plane relays it but cannot make one.
type KeysUpdate struct {
	Keys      Keys       `json:"keys"`
	Gateways  []string   `json:"gateways"`
	ExpiresAt time.Time  `json:"expires_at"`
	Assertion *Assertion `json:"assertion"`
}

// ErrKeysUpdate is the sentinel of a refused key-set update; the wrapped
// message says which check failed.
var ErrKeysUpdate = errors.New("approval: owner key-set update refused")

func refuseUpdate(why string) error { return fmt.Errorf("%w: %s", ErrKeysUpdate, why) }

// keysLabel separates a key-set change from action approvals and
// sign-ins made with the same passkey.
const keysLabel = "idn-owner-keys-v1"

// KeysDigest is the SHA-256, in lower-case hex, of k's canonical JSON.
func KeysDigest(k *Keys) string {
	b, err := marshal(k)
	if err != nil {
		panic(err) // Keys holds only strings, byte slices and an integer
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// KeysChallenge is the WebAuthn challenge of a key-set update: the
// SHA-256 of the label, the new set's digest, its version, the gateways
// and the expiry, NUL-separated (no field holds a NUL).
func KeysChallenge(u *KeysUpdate) []byte {
	h := sha256.New()
	fields := []string{keysLabel, KeysDigest(&u.Keys), strconv.FormatInt(u.Keys.Version, 10),
		strconv.FormatInt(u.ExpiresAt.Unix(), 10), strconv.Itoa(len(u.Gateways))}
	for _, f := range append(fields, u.Gateways...) {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// Apply checks u against the pinned keys k for the gateway gatewayID and
// returns the set to pin in their place. The update must name this
// gateway, be unexpired, carry a higher version (an old update cannot
// be replayed), keep the namespace, relying party and origins, keep at
// least one key, and be signed by a passkey of k.
func (k *Keys) Apply(u *KeysUpdate, gatewayID string, now time.Time) (*Keys, error) {
	switch {
	case k == nil:
		return nil, refuseUpdate("no pinned keys")
	case u == nil:
		return nil, refuseUpdate("no update")
	case !slices.Contains(u.Gateways, gatewayID):
		return nil, refuseUpdate("update is not for this gateway")
	case !now.Before(u.ExpiresAt):
		return nil, refuseUpdate("update expired")
	case u.Keys.Version <= k.Version:
		return nil, refuseUpdate("update is not newer than the pinned keys")
	case u.Keys.Namespace != k.Namespace:
		return nil, refuseUpdate("update is for another owner")
	case u.Keys.RPID != k.RPID || !slices.Equal(u.Keys.Origins, k.Origins):
		return nil, refuseUpdate("update changes the relying party or origins")
	case len(u.Keys.Keys) == 0:
		return nil, refuseUpdate("update leaves no key")
	}
	if err := k.Verify(u.Assertion, KeysChallenge(u)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeysUpdate, err)
	}
	next := u.Keys
	return &next, nil
}
