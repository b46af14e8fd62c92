package activity

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
)

// Defaults of Config.
const (
	DefaultRetention               = 30 * 24 * time.Hour
	DefaultMaxPerNamespace         = 1_000_000
	DefaultUnsignedRetention       = 7 * 24 * time.Hour
	DefaultMaxUnsignedPerNamespace = 100_000
)

// Config bounds what is kept. Its zero value is ready.
type Config struct {
	// Retention is how long a record of a verified agent is kept; zero
	// (or negative) means DefaultRetention.
	Retention time.Duration
	// MaxPerNamespace is the most records of verified agents one
	// namespace holds, the oldest deleted first; zero (or negative) means
	// DefaultMaxPerNamespace.
	MaxPerNamespace int64
	// UnsignedRetention is how long a record with no verified agent (the
	// unsigned development bypass) and a count of refusals before a
	// signature verified are kept; zero (or negative) means
	// DefaultUnsignedRetention.
	UnsignedRetention time.Duration
	// MaxUnsignedPerNamespace is the most records with no verified agent
	// one namespace holds, apart from MaxPerNamespace: evicting them never
	// touches a signed record. Zero (or negative) means
	// DefaultMaxUnsignedPerNamespace.
	MaxUnsignedPerNamespace int64
}

// Signed admits a gateway's signed report in the steps between which the
// part reads whether its key is paired. Each function has answered the
// request when it returns false.
type Signed struct {
	Verify      func(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool)
	RecordNonce func(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool
	ReadBody    func(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool
}

// Paired finds the gateway a signing key is paired with and the owner's
// namespace it reports into; ok is false for a key that is not paired.
type Paired func(ctx context.Context, keyNamespace, publicKey string) (gatewayID, namespace string, ok bool, err error)

// ReconnectRequired tells owner ns that an OAuth account a gateway
// reported refused needs reconnecting (webhook event, alert e-mail).
type ReconnectRequired func(ctx context.Context, ns, service, gatewayID, connection, subject string, at time.Time) error

// Deps are what the part takes from the control plane; each is required
// but ReconnectRequired, nil telling no one.
type Deps struct {
	DB                *sqldb.DB
	Kit               *web.Kit
	Owner             web.Owner
	Signed            Signed
	Paired            Paired
	ReconnectRequired ReconnectRequired
}

// Activity stores and serves the gateways' decisions. It is safe for
// concurrent use.
type Activity struct {
	cfg   Config
	deps  Deps
	kit   *web.Kit
	store store
}

// New returns the part.
func New(cfg Config, deps Deps) (*Activity, error) {
	if deps.DB == nil || deps.Kit == nil || deps.Owner == nil || deps.Paired == nil ||
		deps.Signed.Verify == nil || deps.Signed.RecordNonce == nil || deps.Signed.ReadBody == nil {
		return nil, errors.New("activity: Deps.DB, Kit, Owner, Paired and Signed's three functions are required")
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxPerNamespace <= 0 {
		cfg.MaxPerNamespace = DefaultMaxPerNamespace
	}
	if cfg.UnsignedRetention <= 0 {
		cfg.UnsignedRetention = DefaultUnsignedRetention
	}
	if cfg.MaxUnsignedPerNamespace <= 0 {
		cfg.MaxUnsignedPerNamespace = DefaultMaxUnsignedPerNamespace
	}
	return &Activity{cfg: cfg, deps: deps, kit: deps.Kit, store: store{db: deps.DB}}, nil
}

// Routes registers the gateway's report route and the owner's routes.
func (a *Activity) Routes(m web.Mux) {
	m.Handle("POST "+pairwire.ActivityPath, http.HandlerFunc(a.report))
	m.Handle("GET /v1/activity", a.deps.Owner(a.listJSON))
	m.Handle("GET /v1/activity/export", a.deps.Owner(a.export))
	m.Handle("GET /v1/activity/unverified", a.deps.Owner(a.listUnverified))
}

// Maintain deletes the records past Retention, and those with no
// verified agent and the unverified counts past UnsignedRetention. Call
// it periodically; it is safe to run on several instances at once.
func (a *Activity) Maintain(ctx context.Context) error {
	now := a.kit.Now()
	_, err := a.store.prune(ctx, now.Add(-a.cfg.Retention), now.Add(-a.cfg.UnsignedRetention))
	return err
}

// List returns up to limit records of ns matching f, newest first, and
// the cursor of the next page (zero when there is none).
func (a *Activity) List(ctx context.Context, ns string, f Filter, limit int) ([]Record, Cursor, error) {
	recs, err := a.store.list(ctx, ns, f, limit+1)
	if err != nil || len(recs) <= limit {
		return recs, Cursor{}, err
	}
	last := recs[limit-1]
	return recs[:limit], Cursor{At: sqldb.Micros(last.At), ID: last.ID}, nil
}

// DeleteNamespace deletes every record of ns within tx (account deletion).
func (a *Activity) DeleteNamespace(ctx context.Context, tx *sql.Tx, ns string) error {
	return deleteNamespace(ctx, tx, ns)
}
