package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
	// MaxPending bounds the requests and approvals kept in memory; zero
	// means DefaultMaxPending.
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

// Gate lets a matching call through only on an approval of that very
// call. Requests and approvals live in its memory: a restarted gateway,
// or another instance of a fleet, files a new request rather than trust
// one it did not file. It is safe for concurrent use.
type Gate struct {
	cfg    Config
	mu     sync.Mutex
	byCall map[[32]byte]*entry
}

// entry is one filed request and, once verified, its approval.
type entry struct {
	req      Request
	approved bool
	denied   bool
	uses     int
	until    time.Time // usable while now is before it
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
	return &Gate{cfg: cfg, byCall: map[[32]byte]*entry{}}, nil
}

func (g *Gate) now() time.Time {
	if g.cfg.Clock != nil {
		return g.cfg.Clock()
	}
	return time.Now()
}

// bindingOf names a call exactly: agent, subject and document (which holds
// the connection, the target and the arguments).
func bindingOf(c *Call, digest string) [32]byte {
	h := sha256.New()
	for _, f := range []string{c.Namespace, c.PublicKey, c.Subject, digest} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	var b [32]byte
	h.Sum(b[:0])
	return b
}

// Admit returns nil when the call may go through now (and spends one use
// of its approval), a *RequiredError while it waits, a *DeniedError once
// the owner said no, and an error wrapping ErrFile when no request could
// be filed. A malformed call (JSON with a repeated member) is refused.
func (g *Gate) Admit(ctx context.Context, c *Call) error {
	doc, err := c.Document()
	if err != nil {
		return err
	}
	digest := Digest(doc)
	key := bindingOf(c, digest)
	now := g.now()

	g.mu.Lock()
	e := g.byCall[key]
	if e != nil && !now.Before(e.until) {
		delete(g.byCall, key)
		e = nil
	}
	denied := e != nil && e.denied
	if e != nil && e.approved {
		e.uses--
		if e.uses <= 0 {
			delete(g.byCall, key)
		}
		g.mu.Unlock()
		return nil
	}
	g.mu.Unlock()

	if e != nil {
		if denied {
			return &DeniedError{ActionID: e.req.ID}
		}
		return g.poll(ctx, key, e)
	}
	return g.file(ctx, key, c, doc, digest, now)
}

// file files a new request for the call.
func (g *Gate) file(ctx context.Context, key [32]byte, c *Call, doc []byte, digest string, now time.Time) error {
	req := Request{ID: newID(), Gateway: g.cfg.Gateway, Connection: c.Connection, Service: c.Service,
		Namespace: c.Namespace, PublicKey: c.PublicKey, AgentName: c.AgentName, Subject: c.Subject,
		Target: c.Target(), Document: doc, Digest: digest, ExpiresAt: now.Add(g.cfg.TTL).Truncate(time.Second)}
	if err := g.cfg.Desk.File(ctx, req); err != nil {
		return fmt.Errorf("%w: %w", ErrFile, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.byCall) >= g.cfg.MaxPending {
		g.sweep(now)
	}
	if len(g.byCall) >= g.cfg.MaxPending {
		return fmt.Errorf("%w: %d requests already wait", ErrFile, len(g.byCall))
	}
	if prev := g.byCall[key]; prev != nil {
		// A concurrent identical call filed first: keep one request.
		return &RequiredError{ActionID: prev.req.ID, ExpiresAt: prev.req.ExpiresAt}
	}
	g.byCall[key] = &entry{req: req, until: req.ExpiresAt}
	return &RequiredError{ActionID: req.ID, ExpiresAt: req.ExpiresAt}
}

// poll asks the desk about a request this gateway filed and believes an
// approval only once its assertion verifies for this very request.
func (g *Gate) poll(ctx context.Context, key [32]byte, e *entry) error {
	waiting := &RequiredError{ActionID: e.req.ID, ExpiresAt: e.req.ExpiresAt}
	st, err := g.cfg.Desk.Status(ctx, e.req.ID)
	if err != nil {
		g.cfg.Logger.WarnContext(ctx, "action status unavailable", "action_id", e.req.ID, "error", err)
		return waiting
	}
	switch st.State {
	case "denied":
		g.mu.Lock()
		if g.byCall[key] == e {
			e.denied = true
		}
		g.mu.Unlock()
		return &DeniedError{ActionID: e.req.ID}
	case "approved":
	default:
		return waiting
	}
	until, err := g.verify(e.req, st)
	if err != nil {
		g.cfg.Logger.WarnContext(ctx, "action approval refused", "action_id", e.req.ID, "error", err)
		return waiting
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byCall[key] != e || e.approved || e.denied {
		// Another call verified it first; let Admit's accounting decide.
		if g.byCall[key] == e && e.approved && e.uses > 0 {
			e.uses--
			if e.uses <= 0 {
				delete(g.byCall, key)
			}
			return nil
		}
		return waiting
	}
	e.approved, e.uses, e.until = true, st.Uses-1, until
	if e.uses <= 0 {
		delete(g.byCall, key)
	}
	return nil
}

// verify checks an approval against the request as this gateway filed it
// and returns when it stops being usable.
func (g *Gate) verify(req Request, st Status) (time.Time, error) {
	if st.Uses < 1 || st.Uses > MaxUses {
		return time.Time{}, fmt.Errorf("approval: %d uses is out of range", st.Uses)
	}
	until := req.ExpiresAt
	if !st.Until.IsZero() {
		if st.Until.After(req.ExpiresAt.Add(MaxWindow)) {
			return time.Time{}, errors.New("approval: window is longer than allowed")
		}
		if st.Until.After(until) {
			until = st.Until
		}
	}
	if !g.now().Before(until) {
		return time.Time{}, errors.New("approval: expired")
	}
	var keys *Keys
	if g.cfg.Keys != nil {
		keys = g.cfg.Keys()
	}
	challenge := Challenge(Grant{ActionID: req.ID, Gateway: req.Gateway, Digest: req.Digest,
		ExpiresAt: req.ExpiresAt, Uses: st.Uses, Until: st.Until})
	if err := keys.Verify(st.Assertion, challenge); err != nil {
		return time.Time{}, err
	}
	return until, nil
}

// sweep drops expired entries; g.mu is held.
func (g *Gate) sweep(now time.Time) {
	for k, e := range g.byCall {
		if !now.Before(e.until) {
			delete(g.byCall, k)
		}
	}
}

// newID is a random action id: "act_" and 26 base32 characters (128 bits).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "act_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
