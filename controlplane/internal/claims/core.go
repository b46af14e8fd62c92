// Package claims is the heart of the control plane: namespaces, services
// and their API keys, the claim lifecycle (submit, approve, reject,
// revoke, expire), the approved-claims feed gateways sync from, and DID
// resolution.
//
// Core serves the routes: the signed ones (GET /v1/namespaces/{ns},
// POST /v1/claims, GET /v1/verify, the feed GET /v1/namespaces/claims,
// GET /.well-known/did/{did}), admitted by a signed.Gate; the owner's
// (services, keys, claim moves and listings, the API form of the DID
// document), behind the owner middleware; and public DID resolution. It
// also offers what the rest of the control plane calls: Provision (a
// namespace with a service and its key, without HTTP), Retire (every
// claim and service of a namespace, for account deletion) and Maintain.
// Each committed claim change is handed to Hooks.Changed and wakes the
// feed requests waiting for the service's changes (internal/wake): in
// process, and on PostgreSQL on every instance, by the NOTIFY the change
// log's trigger sends. Call EndWaits at shutdown.
//
// Claim states move pending → approved → revoked, pending → rejected and
// pending → expired. Revoked and rejected are final: a submission of the
// tuple files nothing and answers that claim, and only the owner's
// approval of it files a new, approved claim of the tuple. Every move is one conditional UPDATE (… WHERE status
// = <from>), so concurrent moves of one claim serialise on the row and the
// loser gets 409 CLAIM_STATE_CONFLICT.
package claims

import (
	"context"
	"github.com/idnhq/idn/controlplane/internal/wake"
	"net/http"
	"time"

	"github.com/idnhq/idn/controlplane/internal/registrywriter"
	"github.com/idnhq/idn/controlplane/internal/signed"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
)

// DefaultMaxServices is the zero Config's cap on the services of one
// namespace.
const DefaultMaxServices = 25

// Config bounds what one namespace may hold and names who else may stand
// for its services; a zero field has its documented default.
type Config struct {
	// MaxPendingClaims is the pending claims allowed per namespace and
	// service; zero means 20.
	MaxPendingClaims int
	// MaxPendingPerAgent is how many of those one agent network (an IPv4
	// address, or an IPv6 /64) may hold; zero means 5.
	MaxPendingPerAgent int
	// MaxAPIKeys is the active keys allowed per service; zero means 5.
	MaxAPIKeys int
	// MaxServices is the services one namespace may own; zero means
	// DefaultMaxServices.
	MaxServices int
	// PendingExpiry is how long a claim may stay pending; zero means 24
	// hours.
	PendingExpiry time.Duration
	// Gateways, when set, lets a request without a service API key stand
	// on its signature alone when a gateway paired by an owner signed it:
	// it may then read the feed of, file claims for and verify claims of
	// that owner's services, and no other's. Nil means a service API key
	// is always required.
	Gateways Gateways
}

// Gateways tells whose paired gateway signs a request. The control plane's
// gateway link implements it; each call reads the pairing as it is, so a
// gateway unpaired a moment ago stands for nobody.
type Gateways interface {
	// PairedOwner returns the namespace of the owner who paired the
	// gateway whose signing identity is keyNamespace and publicKey
	// ("ed25519:<base64>"), or "" when no gateway is paired with it.
	PairedOwner(ctx context.Context, keyNamespace, publicKey string) (string, error)
}

// Hooks are what a claim change reaches outside this package.
type Hooks struct {
	// Changed is called after a claim change has committed, with the
	// event type (webhooks.EventApproved, …) and the claim as committed;
	// nil drops the changes.
	Changed func(ctx context.Context, event string, c Claim)
}

// Core serves the claims routes and offers the claims API.
type Core struct {
	cfg      Config
	store    *Store
	kit      *web.Kit
	gate     *signed.Gate
	owner    web.Owner
	registry *registrywriter.Writer // nil: no registry writes
	hooks    Hooks
	cursors  *cursorCache
	admit    *serviceAdmission // the service routes' standing
	waits    *wake.Waits
}

// New returns the Core of cfg over store. Signed routes are admitted by
// gate, owner routes by owner; registry, when not nil, writes approvals
// and revocations (in sync mode before the claim moves).
func New(cfg Config, store *Store, kit *web.Kit, gate *signed.Gate, owner web.Owner, registry *registrywriter.Writer, hooks Hooks) *Core {
	setDefault(&cfg.MaxPendingClaims, 20)
	setDefault(&cfg.MaxPendingPerAgent, 5)
	setDefault(&cfg.MaxAPIKeys, 5)
	setDefault(&cfg.MaxServices, DefaultMaxServices)
	setDefault(&cfg.PendingExpiry, 24*time.Hour)
	return &Core{cfg: cfg, store: store, kit: kit, gate: gate, owner: owner, registry: registry, hooks: hooks,
		cursors: newCursorCache(4096), waits: wake.New(store.db, sqldb.FeedChannel, MaxFeedWaitsPerService, MaxFeedWaits, kit.Log),
		admit: &serviceAdmission{gate: gate, store: store, kit: kit, gateways: cfg.Gateways}}
}

// EndWaits answers every feed request waiting for changes at once, and
// every later one without waiting, and closes the LISTEN connection of the
// waits; call it when the server shuts down, since the waits would hold
// up http.Server.Shutdown for up to MaxFeedWait.
func (s *Core) EndWaits() { s.waits.End() }

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Routes registers the claims routes on m.
func (s *Core) Routes(m web.Mux) {
	// Signed-header routes: an agent or a service proves who it is on
	// every request.
	m.Handle("GET /v1/namespaces/{namespace}", s.gate.Public(s.getNamespace))
	m.Handle("GET /v1/namespaces/claims", s.admit.wrap(s.claimsFeed))
	m.Handle("POST /v1/claims", s.admit.wrap(s.submitClaim))
	m.Handle("GET /v1/verify", s.admit.wrap(s.verifyClaim))
	m.Handle("GET /.well-known/did/{did}", s.gate.Public(s.wellKnownDID))

	// Public DID resolution (outside the protected prefixes).
	m.Handle("GET /1.0/identifiers/{did}", http.HandlerFunc(s.resolveDID))

	// Owner session routes.
	m.Handle("GET /v1/namespaces/{namespace}/claims", s.owner(s.ownerClaims))
	m.Handle("GET /v1/namespaces/{namespace}/did", s.owner(s.ownerDID))
	m.Handle("POST /v1/namespaces/{namespace}/claims/reject-pending", s.owner(s.rejectPending))
	m.Handle("POST /v1/claims/{id}/{action}", s.owner(s.moveClaim))
	m.Handle("POST /v1/services", s.owner(s.createService))
	m.Handle("GET /v1/services", s.owner(s.listServices))
	m.Handle("GET /v1/services/{id}", s.owner(s.getService))
	m.Handle("PATCH /v1/services/{id}", s.owner(s.updateService))
	m.Handle("DELETE /v1/services/{id}", s.owner(s.deleteService))
	m.Handle("GET /v1/services/{id}/keys", s.owner(s.listKeys))
	m.Handle("POST /v1/services/{id}/keys", s.owner(s.createKey))
	m.Handle("DELETE /v1/services/{id}/keys/{keyID}", s.owner(s.revokeKey))
}

// Maintain expires the pending claims older than PendingExpiry and prunes
// the feed's change log; it returns how many claims expired.
func (s *Core) Maintain(ctx context.Context) (int64, error) {
	now := s.kit.Now()
	n, err := s.store.expirePending(ctx, now.Add(-s.cfg.PendingExpiry), now)
	if err != nil {
		return 0, err
	}
	_, err = s.store.pruneFeedChanges(ctx, now.Add(-feedChangesMaxAge), feedChangesKeep)
	return n, err
}

// publish queues a committed change's registry write (memory and queue
// modes; a sync-mode write happened before the change), wakes the feed
// requests of this instance waiting for the service's changes, hands the
// change to Hooks.Changed and returns c.
func (s *Core) publish(ctx context.Context, event string, c Claim) Claim {
	if s.registry != nil {
		s.registry.ClaimChanged(c.registryView())
	}
	s.waits.Wake(c.Service)
	if s.hooks.Changed != nil {
		s.hooks.Changed(ctx, event, c)
	}
	return c
}

// fail answers err through errorRules and the kit.
func (s *Core) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.kit.Error(w, r, ErrorRules.Answer(err))
}

// Store is the claims' view of the database: namespaces, services, API
// keys, claims and the feed's change log.
type Store struct {
	db     *sqldb.DB
	submit submitStatements
}

// NewStore prepares the claims statements over db.
func NewStore(ctx context.Context, db *sqldb.DB) (*Store, error) {
	s := &Store{db: db}
	if err := s.prepareSubmit(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
