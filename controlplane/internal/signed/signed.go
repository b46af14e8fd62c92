// Package signed admits the control plane's signed requests (the
// idn-rfc9421-v1 profile) in an order that makes a caller who proves
// nothing, which any self-made key can be, cost the control plane no
// write:
//
//  1. the client network (an IPv4 address, or an IPv6 /64) spends a token
//     of its bucket (SignedRatePerMinute), in memory: past it 429
//     RATE_LIMITED with Retry-After. Anyone can make a valid signature
//     with a key of their own, so verifying one first would protect
//     nothing and cost a flood's every request two Ed25519 verifications;
//  2. the signature and the agent certificate are verified, in memory;
//  3. the caller's standing is read where the route needs one (a service
//     API key, a paired gateway key or an open pairing session);
//  4. the nonce is recorded: in the database for callers with standing, so
//     instances sharing it refuse each other's replays; in a bounded memory
//     (MaxLookupNonces) for the public lookups, which write nothing and
//     need no standing;
//  5. the body is read and checked against the signed content-digest.
//
// A Gate does steps 1, 2, 4 and 5; the route does step 3 between Verify
// and RecordNonce. Public does all of them for routes that need no
// standing.
package signed

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/idnhq/idn/kit/keyrate"
	"io"
	"net/http"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/replay"
)

// Defaults of the signed routes' admission limits (Config).
const (
	// DefaultSignedRatePerMinute is CONTROLPLANE_SIGNED_RATE_LIMIT_PER_MINUTE's
	// default: requests to the signed routes per client network per minute.
	DefaultSignedRatePerMinute = 600
	// DefaultMaxLookupNonces is CONTROLPLANE_LOOKUP_NONCE_MAX_ENTRIES's
	// default: nonces of public lookups remembered in memory.
	DefaultMaxLookupNonces = 100_000
)

// maxLimitedAddresses bounds the client networks whose signed-request
// buckets are remembered.
const maxLimitedAddresses = 65_536

// Config configures a Gate; a zero field has its documented default.
type Config struct {
	// MaxAge and FutureSkew bound the signature's created parameter; zero
	// means identity.DefaultMaxAge and identity.DefaultFutureSkew.
	MaxAge, FutureSkew time.Duration
	// RatePerMinute is the signed requests one client network may make per
	// minute, with an equal burst; zero means DefaultSignedRatePerMinute.
	RatePerMinute int
	// MaxLookupNonces bounds the public lookups' nonces kept in memory;
	// zero means DefaultMaxLookupNonces.
	MaxLookupNonces int
}

// Gate admits signed requests.
type Gate struct {
	kit      *web.Kit
	verifier *identity.Verifier
	limits   *keyrate.Buckets
	durable  nonceChecker
	lookups  *replay.Store
}

// New returns the Gate of cfg, recording the nonces of callers with
// standing in db.
func New(cfg Config, db *sqldb.DB, kit *web.Kit) (*Gate, error) {
	if cfg.RatePerMinute < 0 || cfg.MaxLookupNonces < 0 {
		return nil, errors.New("controlplane: Config's rate limits and quotas must not be negative")
	}
	rate := cmp.Or(cfg.RatePerMinute, DefaultSignedRatePerMinute)
	lookups, err := replay.New(replay.Config{MaxBytes: replay.MemoryFor(cmp.Or(cfg.MaxLookupNonces, DefaultMaxLookupNonces)), Clock: kit.Clock})
	if err != nil {
		return nil, fmt.Errorf("controlplane: lookup nonces: %w", err)
	}
	return &Gate{
		kit: kit,
		verifier: &identity.Verifier{
			Clock:      kit.Clock,
			MaxAge:     cmp.Or(cfg.MaxAge, identity.DefaultMaxAge),
			FutureSkew: cmp.Or(cfg.FutureSkew, identity.DefaultFutureSkew),
			Origin:     kit.Proxy.Origin,
			// The nonce is recorded by RecordNonce once the rate limit
			// and the caller's standing have passed, in the database or
			// in memory as the route needs.
			InsecureSkipNonceCheck: true,
			// The body is read by ReadBody once the signature, nonce and
			// standing have passed, so no unverified request is buffered.
			InsecureSkipBodyCheck: true,
		},
		limits:  keyrate.New(rate, maxLimitedAddresses),
		durable: nonceChecker{db: db, now: kit.Clock},
		lookups: lookups,
	}, nil
}

// errNonceStoreFull refuses a lookup while the memory of its nonces is full.
var errNonceStoreFull = apierror.Coded(errcode.NonceStoreFull, "")

// Public admits the public lookups: any verified signer, its nonce kept in
// memory. The signature covers content-digest, so it is checked before any
// body byte is read; the body is then read and checked against that digest
// before next runs.
func (g *Gate) Public(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := g.Verify(w, r)
		if ok && g.recordNonce(w, r, caller, g.lookups) && g.ReadBody(w, r, caller) {
			next(w, r)
		}
	})
}

// Verify checks the client's rate and the signature, touching
// neither the body nor the database and recording no nonce; on failure it
// has answered.
func (g *Gate) Verify(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) {
	if wait := g.limits.Take(g.kit.ClientKey(r), g.kit.Now()); wait > 0 {
		apierror.Write(w, r, web.RateLimited(wait))
		return nil, false
	}
	caller, err := g.verifier.Verify(r)
	if err != nil {
		g.Failed(w, r, err)
		return nil, false
	}
	return caller, true
}

// RecordNonce records the caller's nonce in the database, so instances
// sharing it refuse each other's replays; on failure it has answered.
func (g *Gate) RecordNonce(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool {
	return g.recordNonce(w, r, caller, g.durable)
}

// recordNonce records the caller's nonce, scoped by its namespace, in
// nonces; on failure (a replay, a full memory, the database failing) it has
// answered.
func (g *Gate) recordNonce(w http.ResponseWriter, r *http.Request, caller *identity.Caller, nonces httpsig.NonceChecker) bool {
	err := nonces.CheckNonce(r.Context(), caller.Namespace, caller.Nonce, caller.NonceUntil)
	switch {
	case err == nil:
		return true
	case errors.Is(err, replay.ErrFull):
		// A slot frees the second its nonce expires; come back shortly.
		apierror.Write(w, r, errNonceStoreFull.WithRetryAfter(5*time.Second))
	default:
		g.Failed(w, r, err)
	}
	return false
}

// Failed answers a failed signature check, replay or nonce record.
func (g *Gate) Failed(w http.ResponseWriter, r *http.Request, err error) {
	if code, ok := identity.AuthCode(err); ok {
		apierror.Write(w, r, apierror.Coded(code, ""))
		return
	}
	g.kit.Error(w, r, err)
}

// ReadBody reads the body of a verified caller (up to MaxBodyBytes,
// into a buffer that grows as bytes arrive), checks it against the signed
// content-digest and leaves r.Body readable from the start; on failure it
// has answered.
func (g *Gate) ReadBody(w http.ResponseWriter, r *http.Request, caller *identity.Caller) bool {
	body, ae := g.kit.ReadBody(r)
	if ae != nil {
		apierror.Write(w, r, ae)
		return false
	}
	if err := caller.CheckBody(body); err != nil {
		g.Failed(w, r, err)
		return false
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return true
}

// nonceChecker is the database-backed httpsig.NonceChecker: a nonce is a
// row keyed by (scope, nonce) that lives until the signature carrying it
// can no longer be accepted. Every instance sharing the database sees it.
type nonceChecker struct {
	db  *sqldb.DB
	now func() time.Time
}

var _ httpsig.NonceChecker = nonceChecker{}

// CheckNonce records nonce in scope until the given time. A nonce already
// recorded and not yet expired is a replay: the error wraps
// httpsig.ErrReplayDetected. The insert is atomic (ON CONFLICT DO NOTHING on
// the primary key), so two instances racing on one nonce admit exactly one.
func (c nonceChecker) CheckNonce(ctx context.Context, scope, nonce string, until time.Time) error {
	res, err := c.db.Exec(ctx, `INSERT INTO nonces (scope, nonce, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (scope, nonce) DO NOTHING`, scope, nonce, sqldb.Micros(until))
	if err != nil {
		return sqldb.Err("insert nonce", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	// A leftover row whose window has closed (cleanup not yet run) may be
	// taken over; the conditional UPDATE keeps that atomic too.
	res, err = c.db.Exec(ctx, `UPDATE nonces SET expires_at = $3 WHERE scope = $1 AND nonce = $2 AND expires_at <= $4`,
		scope, nonce, sqldb.Micros(until), sqldb.Micros(c.now()))
	if err != nil {
		return sqldb.Err("refresh nonce", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	return fmt.Errorf("controlplane: nonce %q already used: %w", nonce, httpsig.ErrReplayDetected)
}
