package gatewaylink

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
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
	// OwnerKeys returns the owner's passkeys as a gateway pins them (the
	// ready message's owner_keys) and the owner's latest signed key-set
	// change (owner_keys_update), nil when none; nil sends neither.
	OwnerKeys func(ctx context.Context, ns string) (keys, update json.RawMessage, err error)
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
	return &Link{cfg: cfg, deps: deps, kit: deps.Kit, store: st, hub: newHub(st, deps.Kit.Log, deps.Kit.Now, cfg.RPCTimeout, cfg.Heartbeat, deps.OwnerKeys),
		window: 3 * cfg.Heartbeat}, nil
}

// Routes registers the owner's routes under /v1/gateways and the gateway's
// WebSocket.
func (l *Link) Routes(m web.Mux) {
	m.Handle("POST /v1/gateways/pairings", l.deps.Owner(l.createPairing))
	m.Handle("GET /v1/gateways", l.deps.Owner(l.listGateways))
	m.Handle("DELETE /v1/gateways/{id}", l.deps.Owner(l.unpairGateway))
	m.Handle("POST /v1/gateways/{id}/rpc", l.deps.Owner(l.gatewayRPC))
	m.Handle("POST /v1/gateways/{id}/connect", l.deps.Owner(l.startConnect))
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

// UnpairNamespace unpairs every gateway of ns and ends its pairing
// sessions within tx (account deletion). It returns the function that
// closes the unpaired gateways' sockets, wherever they are held, to call
// once tx has committed.
func (l *Link) UnpairNamespace(ctx context.Context, tx *sql.Tx, ns string) (closeSockets func(context.Context), err error) {
	deleted, err := unpairNamespace(ctx, tx, ns)
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

// PairedOwner returns the namespace of the owner who paired the gateway
// signing with keyNamespace and publicKey ("ed25519:<base64>"), or "" when
// no gateway is paired with that key. It reads the gateways table on every
// call, so a gateway stands for its owner from the moment it pairs and
// for nobody from the moment it is unpaired, on every instance. The
// control plane hands it to the claims (claims.Gateways), whose feed and
// submissions a paired gateway may use without a service API key.
func (l *Link) PairedOwner(ctx context.Context, keyNamespace, publicKey string) (string, error) {
	_, namespace, _, err := l.PairedKey(ctx, keyNamespace, publicKey)
	return namespace, err
}

// PairedKey finds the gateway a signing key is paired with and its
// owner's namespace; ok is false for a key that is not paired. Other
// parts that admit a gateway's signed request (activity reports) use it.
func (l *Link) PairedKey(ctx context.Context, keyNamespace, publicKey string) (gatewayID, namespace string, ok bool, err error) {
	g, err := l.store.gatewayByKey(ctx, keyNamespace, publicKey)
	if errors.Is(err, errGatewayNotPaired) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	return g.ID, g.Namespace, true, nil
}
