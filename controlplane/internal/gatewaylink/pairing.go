package gatewaylink

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity/display"
	"github.com/idnhq/idn/pairing/pairwire"
)

// Pairing codes: 8 characters of Crockford's base32 (40 bits), valid for
// PairingTTL, single use; MaxPairingFailures wrong codes end the session.
// Five guesses at 2^40 codes leave a guesser no chance, and only the
// owner can start a session.
const (
	PairingTTL         = 10 * time.Minute
	MaxPairingFailures = 5
	crockford          = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

// newPairingCode returns a fresh code.
func newPairingCode() string {
	var b [5]byte
	rand.Read(b[:])
	v := uint64(b[0])<<32 | uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4])
	out := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		out[i] = crockford[v&31]
		v >>= 5
	}
	return string(out)
}

// normalizePairingCode reads a code as people type it: any case, with
// hyphens or spaces, I and L for 1, O for 0. Anything else gives "".
func normalizePairingCode(code string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(code) {
		switch {
		case r == '-' || r == ' ':
			continue
		case r == 'I' || r == 'L':
			r = '1'
		case r == 'O':
			r = '0'
		case !strings.ContainsRune(crockford, r):
			return ""
		}
		b.WriteRune(r)
	}
	if b.Len() != 8 {
		return ""
	}
	return b.String()
}

// pairingCodeHash binds the stored hash to its session, so equal codes of
// two sessions hash differently.
func pairingCodeHash(sessionID, code string) string {
	sum := sha256.Sum256([]byte(sessionID + "\x00" + code))
	return hex.EncodeToString(sum[:])
}

// pairTimeout bounds the wait for an unpaired gateway's first message.
const pairTimeout = 10 * time.Second

// gatewayConnect is the gateway's WebSocket. The upgrade must verify under
// the signing profile, so a replayed upgrade is refused; an unknown key is
// refused unless it names a pairing session to complete. The nonce is
// recorded (in the database) only once the key or the session has passed,
// so a stranger's upgrade writes nothing.
func (l *Link) gatewayConnect(w http.ResponseWriter, r *http.Request) {
	caller, ok := l.deps.Signed.Verify(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	g, err := l.store.gatewayByKey(ctx, caller.Namespace, caller.PublicKey)
	pairing := r.URL.Query().Get(pairwire.PairingQuery)
	switch {
	case errors.Is(err, errGatewayNotPaired) && pairing != "":
		// A socket is opened only for a session that can still complete.
		if err := l.store.pairingOpen(ctx, pairing, l.kit.Now()); err != nil {
			l.fail(w, r, err)
			return
		}
	case err != nil:
		l.fail(w, r, err)
		return
	}
	if !l.deps.Signed.RecordNonce(w, r, caller) {
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{})
	if err != nil {
		return // Accept has answered
	}
	conn.SetReadLimit(pairwire.ReadLimit)
	// The socket outlives nothing but this handler; the request's context
	// ends with it.
	if g.ID == "" {
		if g, err = l.pair(ctx, conn, caller.Namespace, caller.PublicKey, pairing); err != nil {
			return
		}
	}
	l.hub.serve(ctx, conn, g)
}

// pair reads and checks an unpaired gateway's first message. On refusal it
// has told the gateway why and closed the socket.
func (l *Link) pair(ctx context.Context, conn *websocket.Conn, keyNS, pub, session string) (gatewayRecord, error) {
	refuse := func(err error) (gatewayRecord, error) {
		e := answer(err)
		b, _ := json.Marshal(pairwire.Control{Type: pairwire.ControlError, Code: e.Code().String(), Message: e.Message})
		wctx, cancel := context.WithTimeout(ctx, relayWriteTimeout)
		conn.Write(wctx, websocket.MessageText, b)
		cancel()
		conn.Close(pairwire.ClosePairingFailed, e.Code().String())
		return gatewayRecord{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, pairTimeout)
	_, data, err := conn.Read(rctx)
	cancel()
	if err != nil {
		conn.CloseNow()
		return gatewayRecord{}, err
	}
	var p pairwire.Pair
	if err := json.Unmarshal(data, &p); err != nil {
		return refuse(web.Validation("the first message must be the pairing request"))
	}
	if p.SessionID != session {
		return refuse(web.Validation("session_id differs from the pairing the upgrade named"))
	}
	if err := checkPair(p); err != nil {
		return refuse(err)
	}
	g, err := l.store.redeemPairing(ctx, pairingAttempt{SessionID: p.SessionID, Code: p.PairCode, Namespace: p.Namespace,
		KeyNamespace: keyNS, PublicKey: pub, Name: p.Name, Version: p.Version, HPKE: p.HPKEPublicKey}, l.deps.Quotas.Gateways, l.kit.Now())
	if err != nil {
		if answer(err).Code().Status() >= 500 {
			l.kit.Log.ErrorContext(ctx, "gateway pairing failed", "err", err)
		}
		return refuse(err)
	}
	l.kit.Log.InfoContext(ctx, "gateway paired", "gateway", g.ID, "namespace", g.Namespace)
	return g, nil
}

// checkPair validates the descriptive fields of a pairing request.
func checkPair(p pairwire.Pair) error {
	if !printable(p.Name, 100) || strings.TrimSpace(p.Name) == "" {
		return web.Validation("name must be 1 to 100 printable characters")
	}
	if !printable(p.Version, 64) {
		return web.Validation("version must be at most 64 printable characters")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p.HPKEPublicKey, "="))
	if err != nil || len(raw) != 32 {
		return web.Validation("hpke_public_key must be base64url of a raw 32-byte X25519 key")
	}
	if _, err := ecdh.X25519().NewPublicKey(raw); err != nil {
		return web.Validation("hpke_public_key is not an X25519 key")
	}
	return nil
}

func printable(v string, max int) bool {
	return len(v) <= max && display.Check(v) == nil
}
