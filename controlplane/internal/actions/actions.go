// Package actions is the control plane's side of owner-approved actions:
// paired gateways file the calls their approval rules hold, the owner
// reads each call in full and approves it with a passkey or denies it, and
// the filing gateway reads the decision back.
//
// The control plane is not trusted to release a call. An approval is a
// WebAuthn assertion over approval.Challenge (the action id, the gateway,
// the call's digest, the expiry, the uses and window the owner chose).
// The control plane checks it against the owner's passkeys before it
// records it, and the gateway checks it again against the keys it pinned.
//
// Routes: the gateway's, signed by its identity and admitted only for a
// paired key (POST /v1/gateways/actions, GET /v1/gateways/actions/{id});
// the owner's, behind the owner session (GET /v1/actions,
// GET /v1/actions/{id}, GET /v1/actions/{id}/challenge,
// POST /v1/actions/{id}/approve, POST /v1/actions/{id}/deny).
//
// The owner's passkeys change for paired gateways only by the owner's
// signed approval.KeysUpdate (GET and POST /v1/auth/passkeys/gateways):
// the control plane checks it, keeps the latest, and sends it over each
// gateway's link, which checks it again.
package actions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
)

// Defaults of Config.
const (
	DefaultMaxPending  = 100
	DefaultMaxDocument = 64 << 10
)

// Config bounds what gateways may file. Its zero value is ready.
type Config struct {
	// MaxPending is how many pending requests one owner holds; zero means
	// DefaultMaxPending.
	MaxPending int
	// MaxDocument bounds a request's canonical document in bytes; zero
	// means DefaultMaxDocument.
	MaxDocument int
}

// Signed admits a gateway's signed request; each function has answered
// when it returns false.
type Signed struct {
	Verify      func(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool)
	RecordNonce func(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool
	ReadBody    func(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool
}

// Deps are what the part takes from the control plane; each is required.
type Deps struct {
	DB     *sqldb.DB
	Kit    *web.Kit
	Owner  web.Owner
	Signed Signed
	// Paired finds the gateway a signing key is paired with and its owner.
	Paired func(ctx context.Context, keyNamespace, publicKey string) (gatewayID, namespace string, ok bool, err error)
	// OwnsService reports whether owner owns the service slug.
	OwnsService func(ctx context.Context, owner, slug string) (bool, error)
	// Keys returns the owner's passkeys as gateways pin them.
	Keys func(ctx context.Context, owner string) (*approval.Keys, error)
	// KeysAt returns Keys as registered at or before a time: what a
	// gateway paired then pinned.
	KeysAt func(ctx context.Context, owner string, at time.Time) (*approval.Keys, error)
	// Gateways lists the owner's paired gateways, which a change of the
	// owner's passkeys names.
	Gateways func(ctx context.Context, owner string) ([]PairedGateway, error)
	// Send brings a signed key-set change to a paired gateway (the
	// owner_keys.update RPC) and returns its JSON-RPC response; IsOffline
	// tells Send's error for a gateway that is not connected.
	Send      func(ctx context.Context, owner, gatewayID string, update json.RawMessage) (json.RawMessage, error)
	IsOffline func(error) bool
	// Requested is told of each new request after it committed (the
	// webhook and the dashboard's announcement); nil tells no one.
	Requested func(ctx context.Context, a Action)
}

// PairedGateway is one of the owner's paired gateways.
type PairedGateway struct {
	ID       string
	PairedAt time.Time
}

// Actions serves the action requests. It is safe for concurrent use.
type Actions struct {
	cfg   Config
	deps  Deps
	kit   *web.Kit
	store store
}

// New returns the part.
func New(cfg Config, deps Deps) (*Actions, error) {
	if deps.DB == nil || deps.Kit == nil || deps.Owner == nil || deps.Paired == nil || deps.OwnsService == nil || deps.Keys == nil ||
		deps.KeysAt == nil || deps.Gateways == nil || deps.Send == nil || deps.IsOffline == nil || deps.Signed.Verify == nil || deps.Signed.RecordNonce == nil || deps.Signed.ReadBody == nil {
		return nil, errors.New("actions: Deps.DB, Kit, Owner, Paired, OwnsService, Keys, KeysAt, Gateways, Send, IsOffline and Signed's three functions are required")
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxDocument <= 0 {
		cfg.MaxDocument = DefaultMaxDocument
	}
	return &Actions{cfg: cfg, deps: deps, kit: deps.Kit, store: store{db: deps.DB}}, nil
}

// Routes registers the gateway's and the owner's routes.
func (a *Actions) Routes(m web.Mux) {
	m.Handle("POST /v1/gateways/actions", http.HandlerFunc(a.file))
	m.Handle("GET /v1/gateways/actions/{id}", http.HandlerFunc(a.status))
	m.Handle("GET /v1/actions", a.deps.Owner(a.list))
	m.Handle("GET /v1/actions/{id}", a.deps.Owner(a.get))
	m.Handle("GET /v1/actions/{id}/challenge", a.deps.Owner(a.challenge))
	m.Handle("POST /v1/actions/{id}/approve", a.deps.Owner(a.approve))
	m.Handle("POST /v1/actions/{id}/deny", a.deps.Owner(a.deny))
	m.Handle("GET /v1/auth/passkeys/gateways", a.deps.Owner(a.keysChallenge))
	m.Handle("POST /v1/auth/passkeys/gateways", a.deps.Owner(a.updateKeys))
}

// Pending returns the pending requests of ns, newest first.
func (a *Actions) Pending(ctx context.Context, ns string) ([]Action, error) {
	return a.store.list(ctx, ns, StatusPending, a.kit.Now(), 100)
}

// Get returns the request id of ns.
func (a *Actions) Get(ctx context.Context, ns, id string) (Action, error) {
	return a.store.get(ctx, ns, id, a.kit.Now())
}

// Maintain deletes requests a day past their expiry (or their window).
func (a *Actions) Maintain(ctx context.Context) error {
	return a.store.prune(ctx, a.kit.Now().Add(-24*time.Hour))
}

// DeleteNamespace deletes every request of ns within tx (account deletion).
func (a *Actions) DeleteNamespace(ctx context.Context, tx *sql.Tx, ns string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM actions WHERE namespace = $1`, ns); err != nil {
		return sqldb.Err("delete actions", err)
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM owner_key_updates WHERE namespace = $1`, ns)
	return sqldb.Err("delete owner key updates", err)
}
