package rounds

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// A server of the stateless revision keeps a call's state in the
// requestState it hands out, so the relay holds nothing: it passes the
// state to the agent sealed to the call's owner, and opens it when the
// agent retries. Another caller, another tool or an altered state does
// not open, so a caller cannot answer a call it did not start.

// sealedPrefix starts a sealed state; a state of Table never does.
const sealedPrefix = "idn1."

// Sealer seals server states with a key. Gateways that share the key
// open each other's states, so an agent's retry may reach any of them.
type Sealer struct{ key []byte }

// NewSealer returns a Sealer with key, or with a fresh random key (good
// in this process only) when key is empty.
func NewSealer(key []byte) *Sealer {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	return &Sealer{key: key}
}

// Seal binds the server's state to owner.
func (s *Sealer) Seal(owner, state string) string {
	return sealedPrefix + s.mac(owner, state) + "." + state
}

// Open returns the server's state sealed for owner; false when sealed is
// not a sealed state, or not one sealed with this key for owner.
func (s *Sealer) Open(owner, sealed string) (string, bool) {
	rest, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", false
	}
	mac, state, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(s.mac(owner, state))) {
		return "", false
	}
	return state, true
}

// IsSealed reports whether state is a sealed one (whoever sealed it).
func IsSealed(state string) bool { return strings.HasPrefix(state, sealedPrefix) }

func (s *Sealer) mac(owner, state string) string {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(owner))
	h.Write([]byte{0})
	h.Write([]byte(state))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}
