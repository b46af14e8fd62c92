// Package ownerauth is how namespace owners sign in to the control plane.
// It holds:
//
//   - passkey accounts: WebAuthn sign-up, login, more passkeys,
//     verification;
//   - owner sessions: an HS256 JWT in the idn_session cookie, whose session
//     id must be live in the database;
//   - step-up for credential changes;
//   - rate limits keyed on the client address;
//   - the owner's sessions and settings;
//   - the alerts a credential change sends.
//
// Sessions issues and checks sessions and provides the owner middleware
// every other part mounts its owner routes behind (Sessions.Owner).
// Accounts serves /v1/auth; what an account touches outside this package
// (a new namespace's registry write, deleting everything an account owns,
// alert mail) it reaches through Hooks, which the control plane composes.
package ownerauth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
)

// Config configures passkey accounts (WebAuthn).
type Config struct {
	// Origins are the origins (scheme://host[:port]) where the dashboard
	// runs passkey ceremonies (WEBAUTHN_ALLOWED_ORIGINS): a credential whose
	// client data names another origin is refused. Empty disables the
	// ceremony routes (signup, login, adding a passkey, verification),
	// which then answer 404; the other /v1/auth routes still work for
	// sessions issued otherwise (Sessions.Issue).
	Origins []string
	// RPID is the WebAuthn relying-party ID (WEBAUTHN_RP_ID): every origin's
	// host must equal it or be a subdomain of it. Empty means the host of
	// Origins[0].
	RPID string
	// RPName is the relying-party name that authenticators show; empty
	// means "idn".
	RPName string
	// ChallengeExpiry is how long a ceremony's challenge stays usable
	// (CHALLENGE_EXPIRY_HOURS); zero means 1 hour. Maintain deletes expired
	// ones.
	ChallengeExpiry time.Duration
}

// Hooks are what an account reaches outside this package. A nil hook does
// nothing.
type Hooks struct {
	// NamespaceCreated is called after sign-up created namespace ns.
	NamespaceCreated func(ctx context.Context, ns string)
	// DeleteAccount deletes everything namespace ns owns and leaves its
	// tombstone (DELETE /v1/auth/account, after step-up).
	DeleteAccount func(ctx context.Context, ns string) (Deletion, error)
	// Mail sends an alert to the address to, and with copies also to the
	// operator's copies; nil sends no alerts.
	Mail func(ctx context.Context, to string, copies bool, subject, body string, logAttrs ...any)
}

// Deletion is what deleting an account did.
type Deletion struct {
	At                time.Time
	Revoked, Rejected int
}

// Accounts serves the passkey accounts of /v1/auth.
type Accounts struct {
	cfg      Config
	rp       *webauthn.WebAuthn // nil: no ceremony routes
	store    store
	kit      *web.Kit
	sessions *Sessions
	limits   *limiter
	hooks    Hooks
}

// New checks cfg and returns the accounts served over db, with sessions
// issued and checked by sessions.
func New(cfg Config, db *sqldb.DB, kit *web.Kit, sessions *Sessions, hooks Hooks) (*Accounts, error) {
	if cfg.ChallengeExpiry <= 0 {
		cfg.ChallengeExpiry = time.Hour
	}
	if cfg.RPName == "" {
		cfg.RPName = "idn"
	}
	rp, err := relyingParty(&cfg)
	if err != nil {
		return nil, err
	}
	return &Accounts{cfg: cfg, rp: rp, store: store{db}, kit: kit, sessions: sessions,
		limits: &limiter{store: store{db}, kit: kit}, hooks: hooks}, nil
}

// Maintain deletes expired challenges and stale rate-limit rows.
func (a *Accounts) Maintain(ctx context.Context) error {
	return a.store.cleanupAuth(ctx, a.kit.Now())
}

// Settings returns the notification settings of the account owning ns.
func (a *Accounts) Settings(ctx context.Context, ns string) (Settings, error) {
	_, _, set, err := a.store.account(ctx, ns)
	return set, err
}

// Ceremonies reports whether passkey ceremonies are served (Config.Origins
// is set).
func (a *Accounts) Ceremonies() bool { return a.rp != nil }

// HasPasskey reports whether the account owning ns has a passkey to log
// in with; one signed in by a one-time link may have none.
func (a *Accounts) HasPasskey(ctx context.Context, ns string) (bool, error) {
	keys, err := a.store.passkeys(ctx, ns)
	return len(keys) > 0, err
}

// Account is an account as its owner's dashboard shows it.
type Account struct {
	Created  time.Time
	Settings Settings
	Passkeys []Passkey
}

// Passkey is a registered passkey as its owner sees it.
type Passkey struct {
	ID, Name              string
	Algorithm             string // "ES256" or "EdDSA"
	CreatedAt, LastUsedAt time.Time
}

// Account returns the account owning ns with its passkeys.
func (a *Accounts) Account(ctx context.Context, ns string) (Account, error) {
	_, created, set, err := a.store.account(ctx, ns)
	if err != nil {
		return Account{}, err
	}
	keys, err := a.store.passkeys(ctx, ns)
	if err != nil {
		return Account{}, err
	}
	acct := Account{Created: created, Settings: set, Passkeys: make([]Passkey, len(keys))}
	for i, k := range keys {
		acct.Passkeys[i] = Passkey{ID: k.ID, Name: k.Name, Algorithm: webauthncose.COSEAlgorithmIdentifier(k.Algorithm).String(),
			CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt}
	}
	return acct, nil
}

// limiter applies the rate limits of the ceremonies.
type limiter struct {
	store store
	kit   *web.Kit
}

// relyingParty checks c and builds its WebAuthn relying party; nil when
// c has no origins.
func relyingParty(c *Config) (*webauthn.WebAuthn, error) {

	if len(c.Origins) == 0 {
		return nil, nil
	}
	for _, o := range c.Origins {
		if !web.ValidOrigin(o) {
			return nil, fmt.Errorf("controlplane: WebAuthn origin %q is not scheme://host[:port]", o)
		}
	}
	if c.RPID == "" {
		u, _ := url.Parse(c.Origins[0])
		c.RPID = strings.ToLower(u.Hostname())
	}
	for _, o := range c.Origins {
		u, _ := url.Parse(o)
		if h := strings.ToLower(u.Hostname()); h != c.RPID && !strings.HasSuffix(h, "."+c.RPID) {
			return nil, fmt.Errorf("controlplane: WebAuthn origin %q is outside the relying-party ID %q", o, c.RPID)
		}
	}
	rp, err := webauthn.New(&webauthn.Config{
		RPID:                  c.RPID,
		RPDisplayName:         c.RPName,
		RPOrigins:             c.Origins,
		AttestationPreference: protocol.PreferNoAttestation,
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:      protocol.ResidentKeyRequirementPreferred,
			UserVerification: protocol.VerificationPreferred,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("controlplane: WebAuthn configuration: %w", err)
	}
	return rp, nil
}

// Routes registers the /v1/auth routes on m; the ceremony routes only when
// Config.Origins is set.
func (a *Accounts) Routes(m web.Mux) {
	m.Handle("GET /v1/auth/me", a.sessions.Owner(a.me))
	m.Handle("POST /v1/auth/logout", http.HandlerFunc(a.logout))
	m.Handle("GET /v1/auth/passkeys", a.sessions.Owner(a.listPasskeys))
	m.Handle("PATCH /v1/auth/passkeys/{id}", a.sessions.Owner(a.renamePasskey))
	m.Handle("DELETE /v1/auth/passkeys/{id}", a.sessions.withOwnerSession(a.deletePasskey))
	m.Handle("PATCH /v1/auth/settings", a.sessions.Owner(a.updateSettings))
	m.Handle("GET /v1/auth/sessions", a.sessions.withOwnerSession(a.listSessions))
	m.Handle("DELETE /v1/auth/sessions/{id}", a.sessions.withOwnerSession(a.endSessionRoute))
	m.Handle("DELETE /v1/auth/account", a.sessions.withOwnerSession(a.deleteAccount))
	if a.rp == nil {
		return
	}
	m.Handle("GET /v1/auth/signup/options", http.HandlerFunc(a.signupOptions))
	m.Handle("POST /v1/auth/signup", http.HandlerFunc(a.signup))
	m.Handle("GET /v1/auth/login/options", http.HandlerFunc(a.loginOptions))
	m.Handle("POST /v1/auth/login", http.HandlerFunc(a.login))
	m.Handle("GET /v1/auth/passkeys/options", a.sessions.withOwnerSession(a.passkeyOptions))
	m.Handle("POST /v1/auth/passkeys", a.sessions.withOwnerSession(a.addPasskey))
	m.Handle("GET /v1/auth/verify/options", a.sessions.withOwnerSession(a.verifyOptions))
	m.Handle("POST /v1/auth/verify", a.sessions.withOwnerSession(a.verify))
}
