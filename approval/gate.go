package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idnhq/idn/errcode"
)

// Defaults of Config.
const (
	DefaultTTL        = 10 * time.Minute
	DefaultMaxPending = 10_000
	// MaxWindow bounds how long an approval stays usable past its
	// request's expiry ("for M minutes").
	MaxWindow = 24 * time.Hour
	// MaxUses bounds "allow N times".
	MaxUses = 1000
)

// Request is what the gateway files with the control plane: the action
// and its canonical document, never a credential.
type Request struct {
	ID         string
	Gateway    string
	Connection string
	Service    string
	Namespace  string
	PublicKey  string
	AgentName  string
	Subject    string
	Target     string
	Document   []byte
	Digest     string
	ExpiresAt  time.Time
}

// Status is the control plane's word on an action request.
type Status struct {
	// State is "pending", "approved", "denied" or "expired".
	State string
	// Uses, Until and Assertion are the owner's approval (State
	// "approved"); the gateway believes none of them unless the assertion
	// verifies against its pinned keys.
	Uses      int
	Until     time.Time
	Assertion *Assertion
}

// Desk is where action requests are filed and read back: the control
// plane (package approval's HTTP client, or a program's own).
type Desk interface {
	File(ctx context.Context, r Request) error
	Status(ctx context.Context, id string) (Status, error)
}

// Config configures a Gate.
type Config struct {
	// Gateway is this gateway's name in the challenge, as the control
	// plane knows it: its signing key ("ed25519:<base64>"). Required.
	Gateway string
	// Desk files requests and reads decisions. Required.
	Desk Desk
	// Keys returns the owner's pinned passkeys, or nil when none are
	// pinned; nil Keys (or a nil result) refuses every approval.
	Keys func() *Keys
	// TTL is how long a request waits for the owner; zero means
	// DefaultTTL.
	TTL time.Duration
	// Store keeps the holds: filed requests and their verified approvals.
	// Nil means a MemoryStore of MaxPending holds, which a restart
	// forgets and no other gateway sees: a retry there files anew.
	Store Store
	// MaxPending bounds the holds of the default MemoryStore; zero means
	// DefaultMaxPending.
	MaxPending int
	// Logger receives refused approvals (never arguments). Nil discards.
	Logger *slog.Logger
	// Clock is the time source of expiries. Nil means time.Now.
	Clock func() time.Time
}

// RequiredError answers a call that waits for the owner: 403
// AUTH_ACTION_APPROVAL_REQUIRED with the request's id and expiry.
type RequiredError struct {
	ActionID  string
	ExpiresAt time.Time
}

func (e *RequiredError) Error() string {
	return "approval: action " + e.ActionID + " awaits the owner's approval"
}

// Code is AUTH_ACTION_APPROVAL_REQUIRED.
func (e *RequiredError) Code() errcode.Code { return errcode.AuthActionApprovalRequired }

// EnvelopeFields are the answer's action_id and expires_at.
func (e *RequiredError) EnvelopeFields() map[string]any {
	return map[string]any{"action_id": e.ActionID, "expires_at": e.ExpiresAt.UTC().Format(time.RFC3339)}
}

// DeniedError answers a call the owner denied: 403 AUTH_ACTION_DENIED.
type DeniedError struct{ ActionID string }

func (e *DeniedError) Error() string { return "approval: action " + e.ActionID + " was denied" }

// Code is AUTH_ACTION_DENIED.
func (e *DeniedError) Code() errcode.Code { return errcode.AuthActionDenied }

// EnvelopeFields are the answer's action_id.
func (e *DeniedError) EnvelopeFields() map[string]any { return map[string]any{"action_id": e.ActionID} }

// ErrFile wraps a failure to file a request: 502 AUTH_ACTION_SUBMIT_FAILED.
var ErrFile = errors.New("approval: cannot file the action request")

// ErrStore wraps a failure of the hold Store: the call is refused (503
// DATABASE_UNAVAILABLE), neither let through nor filed again.
var ErrStore = errors.New("approval: hold store unavailable")

// StoreError is a failure of the hold Store, answered 503
// DATABASE_UNAVAILABLE. It wraps ErrStore and the Store's error.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return ErrStore.Error() + ": " + e.Err.Error() }

// Unwrap returns ErrStore and the Store's error.
func (e *StoreError) Unwrap() []error { return []error{ErrStore, e.Err} }

// Code is DATABASE_UNAVAILABLE.
func (e *StoreError) Code() errcode.Code { return errcode.DatabaseUnavailable }

// Gate lets a matching call through only on an approval of that very
// call. Its holds live in Config.Store: with a shared one, an approval
// counts on every replica of a fleet and across restarts. It is safe for
// concurrent use.
type Gate struct {
	cfg   Config
	store Store
}

// New returns a Gate.
func New(cfg Config) (*Gate, error) {
	if cfg.Gateway == "" || cfg.Desk == nil {
		return nil, errors.New("approval: Config needs Gateway and Desk")
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st := cfg.Store
	if st == nil {
		st = &MemoryStore{Max: cfg.MaxPending}
	}
	return &Gate{cfg: cfg, store: st}, nil
}

func (g *Gate) now() time.Time {
	if g.cfg.Clock != nil {
		return g.cfg.Clock()
	}
	return time.Now()
}

// bindingOf names a call exactly: agent, subject and document (which holds
// the connection, the target and the arguments).
func bindingOf(c *Call, digest string) string {
	h := sha256.New()
	for _, f := range []string{c.Namespace, c.PublicKey, c.Subject, digest} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Admit returns nil when the call may go through now, and spends one use
// of its approval. It returns a *RequiredError while the call waits and a
// *DeniedError once the owner said no. An error wrapping ErrFile means no
// request could be filed; a *StoreError, that the Store failed. A
// malformed call (JSON with a repeated member) is refused.
func (g *Gate) Admit(ctx context.Context, c *Call) error {
	doc, err := c.Document()
	if err != nil {
		return err
	}
	digest := Digest(doc)
	binding := bindingOf(c, digest)
	now := g.now()
	h, err := g.store.Hold(ctx, binding)
	if err != nil {
		return &StoreError{err}
	}
	if h == nil || !h.Live(now) {
		return g.file(ctx, binding, c, doc, digest, now)
	}
	if h.ID != ActionID(h.Salt, binding) || h.Digest != digest {
		// Only a writer of the Store moves a hold to another call.
		g.cfg.Logger.WarnContext(ctx, "held action does not belong to its call: refused", "action_id", h.ID)
		return &RequiredError{ActionID: h.ID, ExpiresAt: h.ExpiresAt}
	}
	a, err := g.approval(ctx, h)
	if err != nil {
		return err
	}
	ok, err := g.store.Spend(ctx, binding, h.ID, a)
	if err != nil {
		return &StoreError{err}
	}
	if !ok { // another call took the last use
		return g.file(ctx, binding, c, doc, digest, now)
	}
	return nil
}

// file files a new request for the call and keeps its hold. Calls filed
// at once for one call keep one hold; the others' requests stay pending
// at the control plane until they expire.
func (g *Gate) file(ctx context.Context, binding string, c *Call, doc []byte, digest string, now time.Time) error {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	req := Request{ID: ActionID(salt, binding), Gateway: g.cfg.Gateway, Connection: c.Connection, Service: c.Service,
		Namespace: c.Namespace, PublicKey: c.PublicKey, AgentName: c.AgentName, Subject: c.Subject,
		Target: c.Target(), Document: doc, Digest: digest, ExpiresAt: now.Add(g.cfg.TTL).Truncate(time.Second)}
	if err := g.cfg.Desk.File(ctx, req); err != nil {
		return fmt.Errorf("%w: %w", ErrFile, err)
	}
	kept, err := g.store.Add(ctx, &Hold{Binding: binding, ID: req.ID, Salt: salt, Digest: digest, ExpiresAt: req.ExpiresAt}, now)
	switch {
	case errors.Is(err, ErrFile):
		return err
	case err != nil:
		return &StoreError{err}
	}
	return &RequiredError{ActionID: kept.ID, ExpiresAt: kept.ExpiresAt}
}

// approval returns the hold's approval once it verifies for this very
// request: the one kept with the hold, or else the control plane's.
func (g *Gate) approval(ctx context.Context, h *Hold) (*Approval, error) {
	if h.Approval != nil {
		err := g.verify(h, h.Approval)
		if err == nil {
			return h.Approval, nil
		}
		// A Store holds only approvals a Gate verified: ask the desk again.
		g.cfg.Logger.WarnContext(ctx, "kept approval refused", "action_id", h.ID, "error", err)
	}
	waiting := &RequiredError{ActionID: h.ID, ExpiresAt: h.ExpiresAt}
	st, err := g.cfg.Desk.Status(ctx, h.ID)
	if err != nil {
		g.cfg.Logger.WarnContext(ctx, "action status unavailable", "action_id", h.ID, "error", err)
		return nil, waiting
	}
	switch st.State {
	case "denied":
		return nil, &DeniedError{ActionID: h.ID}
	case "approved":
	default:
		return nil, waiting
	}
	a := &Approval{Uses: st.Uses, Until: st.Until, Assertion: st.Assertion}
	if err := g.verify(h, a); err != nil {
		g.cfg.Logger.WarnContext(ctx, "action approval refused", "action_id", h.ID, "error", err)
		return nil, waiting
	}
	return a, nil
}

// verify checks an approval against the hold as this gateway filed it,
// at the Gate's current time.
func (g *Gate) verify(h *Hold, a *Approval) error {
	if a.Uses < 1 || a.Uses > MaxUses {
		return fmt.Errorf("approval: %d uses is out of range", a.Uses)
	}
	if !a.Until.IsZero() && a.Until.After(h.ExpiresAt.Add(MaxWindow)) {
		return errors.New("approval: window is longer than allowed")
	}
	if !g.now().Before((&Hold{ExpiresAt: h.ExpiresAt, Approval: a}).End()) {
		return errors.New("approval: expired")
	}
	var keys *Keys
	if g.cfg.Keys != nil {
		keys = g.cfg.Keys()
	}
	challenge := Challenge(Grant{ActionID: h.ID, Gateway: g.cfg.Gateway, Digest: h.Digest,
		ExpiresAt: h.ExpiresAt, Uses: a.Uses, Until: a.Until})
	return keys.Verify(a.Assertion, challenge)
}
