package gatewaylink

import (
	"context"
	"crypto/ecdh"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/internal/display"
	"github.com/idnhq/idn/internal/pairwire"
)

// Config configures the link. Its zero value is ready.
type Config struct {
	// RPCTimeout bounds how long an RPC waits for the gateway's answer
	// before 504 GATEWAY_TIMEOUT; zero (or negative) means 30 s.
	RPCTimeout time.Duration
	// Heartbeat is how often a held socket is pinged and its gateway's
	// last_seen refreshed; zero (or negative) means 15 s. A gateway not
	// seen for three heartbeats counts as offline even if an instance died
	// holding it.
	Heartbeat time.Duration
}

// Quotas are how many pairing sessions one namespace may have open
// (neither used, ended nor expired; past it 429 PAIRING_LIMIT_REACHED with
// Retry-After) and how many gateways it may have paired (past it 409
// GATEWAY_LIMIT_REACHED, when a session starts and again when it
// completes). Zero admits none.
type Quotas struct {
	OpenPairings, Gateways int
}

// Signed admits the signed upgrade of a gateway's socket in the two steps
// between which the link reads the caller's standing, so that an upgrade
// by a key neither paired nor naming an open session records nothing.
// Each function has answered the request when it returns false.
type Signed struct {
	// Verify checks the client's rate and the signature, recording no
	// nonce.
	Verify func(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool)
	// RecordNonce records the caller's nonce where every instance sees
	// it, refusing a replay.
	RecordNonce func(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool
}

// Deps are what the link takes from the control plane composing it; each
// is required.
type Deps struct {
	// DB holds the link's tables and carries the relay between instances.
	DB *sqldb.DB
	// Kit answers errors and bodies, and tells the time.
	Kit *web.Kit
	// Owner admits the owner routes.
	Owner web.Owner
	// Signed admits the gateway's upgrade.
	Signed Signed
	// Quotas bound what one namespace pairs.
	Quotas Quotas
}

// Link serves gateway pairing and the gateways' sockets. It is safe for
// concurrent use.
type Link struct {
	cfg    Config
	deps   Deps
	kit    *web.Kit
	store  store
	hub    *hub
	window time.Duration // a gateway seen within it is online
}

// pairTimeout bounds the wait for an unpaired gateway's first message.
const pairTimeout = 10 * time.Second

var websocketStatusUnpaired = websocket.StatusCode(pairwire.CloseUnpaired)

// New returns the link of this control-plane instance: its sockets and its
// relay channel are its own.
func New(cfg Config, deps Deps) (*Link, error) {
	if deps.DB == nil || deps.Kit == nil || deps.Owner == nil || deps.Signed.Verify == nil || deps.Signed.RecordNonce == nil {
		return nil, errors.New("gatewaylink: Deps.DB, Kit, Owner, Signed.Verify and Signed.RecordNonce are required")
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = 30 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	st := store{db: deps.DB}
	return &Link{cfg: cfg, deps: deps, kit: deps.Kit, store: st, hub: newHub(st, deps.Kit.Log, deps.Kit.Now, cfg.RPCTimeout, cfg.Heartbeat),
		window: 3 * cfg.Heartbeat}, nil
}

// Routes registers the owner's routes under /v1/gateways and the gateway's
// WebSocket.
func (l *Link) Routes(m web.Mux) {
	m.Handle("POST /v1/gateways/pairings", l.deps.Owner(l.createPairing))
	m.Handle("GET /v1/gateways", l.deps.Owner(l.listGateways))
	m.Handle("DELETE /v1/gateways/{id}", l.deps.Owner(l.unpairGateway))
	m.Handle("POST /v1/gateways/{id}/rpc", l.deps.Owner(l.gatewayRPC))
	m.Handle("GET "+pairwire.Path, http.HandlerFunc(l.gatewayConnect))
}

// Close closes every gateway socket this instance holds, telling the
// gateways to reconnect (to another instance, or to this one once it is
// back), and returns when every close handshake ended.
// http.Server.Shutdown neither closes nor waits for WebSockets, so
// register it with RegisterOnShutdown.
func (l *Link) Close() {
	l.hub.closeAll(websocket.StatusGoingAway, "control plane shutting down")
}

// Maintain deletes the expired pairing sessions. Call it periodically; it
// is safe to run on several instances at once.
func (l *Link) Maintain(ctx context.Context) error {
	return l.store.deleteExpiredPairings(ctx, l.kit.Now())
}

// DeleteNamespace unpairs every gateway of ns and ends its pairing
// sessions within tx (account deletion). It returns the function that
// closes the unpaired gateways' sockets, wherever they are held, to call
// once tx has committed.
func (l *Link) DeleteNamespace(ctx context.Context, tx *sql.Tx, ns string) (closeSockets func(context.Context), err error) {
	deleted, err := deleteNamespace(ctx, tx, ns)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) {
		for _, g := range deleted {
			l.hub.close(ctx, g, websocketStatusUnpaired, "the account was deleted")
		}
	}, nil
}

// Gateway is a paired gateway as its owner sees it.
type Gateway struct {
	ID, Name, Version string
	// Online: a socket held the gateway within three heartbeats.
	Online bool
	// LastSeen is when a socket last held it, zero when none ever did.
	LastSeen, CreatedAt time.Time
	// HPKEKey is the gateway's X25519 key (base64url, no padding), to
	// which the dashboard seals secrets; Fingerprint is the short form the
	// gateway prints.
	HPKEKey, Fingerprint string
}

func (l *Link) gatewayOf(g gatewayRecord) Gateway {
	raw, _ := base64.RawURLEncoding.DecodeString(g.HPKEPublicKey)
	return Gateway{ID: g.ID, Name: g.Name, Version: g.Version, Online: g.online(l.kit.Now(), l.window),
		LastSeen: g.LastSeen, CreatedAt: g.CreatedAt, HPKEKey: g.HPKEPublicKey, Fingerprint: pairwire.Fingerprint(raw)}
}

// Gateways returns the gateways of ns, oldest first.
func (l *Link) Gateways(ctx context.Context, ns string) ([]Gateway, error) {
	list, err := l.store.listGateways(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := make([]Gateway, len(list))
	for i, g := range list {
		out[i] = l.gatewayOf(g)
	}
	return out, nil
}

// Gateway returns gateway id of ns, or ErrNotFound.
func (l *Link) Gateway(ctx context.Context, ns, id string) (Gateway, error) {
	g, err := l.store.gateway(ctx, ns, id)
	if err != nil {
		return Gateway{}, err
	}
	return l.gatewayOf(g), nil
}

// fail answers err through rules and the kit.
func (l *Link) fail(w http.ResponseWriter, r *http.Request, err error) {
	l.kit.Error(w, r, rules.Answer(err))
}

type pairingResponse struct {
	SessionID string `json:"session_id"`
	PairCode  string `json:"pair_code"`
	ExpiresAt string `json:"expires_at"`
}

func (l *Link) createPairing(w http.ResponseWriter, r *http.Request, ns string) {
	now := l.kit.Now()
	id, code := newID("gps_"), newPairingCode()
	if err := l.store.createPairing(r.Context(), ns, id, pairingCodeHash(id, code), l.deps.Quotas, now); err != nil {
		l.fail(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, pairingResponse{SessionID: id, PairCode: code, ExpiresAt: web.Timestamp(now.Add(PairingTTL))})
}

// gatewayJSON is a gateway as the API shows it.
type gatewayJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	Online      bool   `json:"online"`
	LastSeen    string `json:"last_seen,omitempty"`
	CreatedAt   string `json:"created_at"`
	HPKEKey     string `json:"hpke_public_key"`
	Fingerprint string `json:"hpke_key_fingerprint"`
}

func (l *Link) listGateways(w http.ResponseWriter, r *http.Request, ns string) {
	list, err := l.Gateways(r.Context(), ns)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	out := make([]gatewayJSON, len(list))
	for i, g := range list {
		out[i] = gatewayJSON{ID: g.ID, Name: g.Name, Version: g.Version, Online: g.Online, LastSeen: web.Timestamp(g.LastSeen),
			CreatedAt: web.Timestamp(g.CreatedAt), HPKEKey: g.HPKEKey, Fingerprint: g.Fingerprint}
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"gateways": out})
}

func (l *Link) unpairGateway(w http.ResponseWriter, r *http.Request, ns string) {
	g, err := l.store.deleteGateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		l.fail(w, r, err)
		return
	}
	l.hub.close(r.Context(), g, websocketStatusUnpaired, "unpaired by the owner")
	w.WriteHeader(http.StatusNoContent)
}

// rpcRequest is a JSON-RPC 2.0 request as the owner sends it.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// gatewayRPC relays one JSON-RPC request to a gateway of the owner and
// answers the gateway's JSON-RPC response, with the owner's id.
func (l *Link) gatewayRPC(w http.ResponseWriter, r *http.Request, ns string) {
	// The slot is taken before the body is read, so an owner past the cap
	// costs no body bytes either.
	release, err := l.hub.ownerSlot(ns)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	defer release()
	var req rpcRequest
	if e := l.kit.Decode(w, r, &req); e != nil {
		apierror.Write(w, r, e)
		return
	}
	if req.JSONRPC != "2.0" {
		apierror.Write(w, r, web.Validation(`jsonrpc must be "2.0"`))
		return
	}
	if !validRPCID(req.ID) {
		apierror.Write(w, r, web.Validation("id must be a string or a number"))
		return
	}
	if !slices.Contains(pairwire.Methods, req.Method) {
		apierror.Write(w, r, web.Validation("unknown method; one of: %s", strings.Join(pairwire.Methods, ", ")))
		return
	}
	g, err := l.store.gateway(r.Context(), ns, r.PathValue("id"))
	if err != nil {
		l.fail(w, r, err)
		return
	}
	if !g.online(l.kit.Now(), l.window) {
		l.fail(w, r, errGatewayOffline)
		return
	}
	rid := newID("rpc_")
	ownerID := req.ID
	req.ID, _ = json.Marshal(rid)
	body, err := json.Marshal(req)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), l.cfg.RPCTimeout)
	defer cancel()
	answer, err := l.hub.call(ctx, g, rid, body)
	if err != nil {
		l.fail(w, r, err)
		return
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(answer, &res); err != nil {
		l.fail(w, r, errors.New("gatewaylink: gateway answered malformed JSON"))
		return
	}
	res["id"] = ownerID
	apierror.WriteJSON(w, http.StatusOK, res)
}

func validRPCID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

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
