package approval

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Hold is a filed action request as the Gate keeps it: the call it names
// (Binding) and the request's id, digest and expiry. Once the owner
// approved, it also keeps the approval and how many calls it let through.
// It holds no argument and no credential.
type Hold struct {
	// Binding names the held call: the hex SHA-256 of the agent's
	// namespace and key, the subject and the call's Digest.
	Binding string
	// ID is the action id filed with the control plane. It commits to
	// Binding through Salt (ActionID), so a hold moved to another call
	// is refused.
	ID        string
	Salt      []byte
	Digest    string
	ExpiresAt time.Time
	// Approval is the owner's approval, nil while none was verified.
	Approval *Approval
	// Spent counts the calls the approval let through.
	Spent int
}

// Approval is what the owner granted: how many calls, until when, and
// the passkey assertion that says so. A Gate verifies the assertion
// whenever it reads an approval from a Store.
type Approval struct {
	Uses int
	// Until, when not zero, keeps the approval usable past the request's
	// expiry; zero means ExpiresAt.
	Until     time.Time
	Assertion *Assertion
}

// End is when the hold stops counting: the approval's Until when later
// than the request's expiry, else the expiry. A Store may forget a hold
// from then on.
func (h *Hold) End() time.Time {
	if h.Approval != nil && h.Approval.Until.After(h.ExpiresAt) {
		return h.Approval.Until
	}
	return h.ExpiresAt
}

// Live reports whether the hold still counts at now: not ended, and not
// an approval whose uses are all spent. A Store's Add replaces a hold
// that is not live.
func (h *Hold) Live(now time.Time) bool {
	return now.Before(h.End()) && (h.Approval == nil || h.Spent < h.Approval.Uses)
}

// Clone returns a deep copy of h.
func (h *Hold) Clone() *Hold {
	n := *h
	n.Salt = slices.Clone(h.Salt)
	if h.Approval != nil {
		a := *h.Approval
		if a.Assertion != nil {
			as := Assertion{CredentialID: slices.Clone(a.Assertion.CredentialID), AuthenticatorData: slices.Clone(a.Assertion.AuthenticatorData),
				ClientDataJSON: slices.Clone(a.Assertion.ClientDataJSON), Signature: slices.Clone(a.Assertion.Signature)}
			a.Assertion = &as
		}
		n.Approval = &a
	}
	return &n
}

// Store keeps a Gate's holds. The Gate trusts it to count: what a Store
// says was spent, and no more, is spent. It trusts nothing else a Store
// returns without checking it (an approval's assertion, the id's
// commitment to its call). The default is a MemoryStore; replicas of a
// fleet share one in PostgreSQL (package pgstore), and a single gateway
// keeps one in its SQLite file (package sqlitestore).
type Store interface {
	// Hold returns binding's hold, or nil when there is none.
	Hold(ctx context.Context, binding string) (*Hold, error)
	// Add keeps h unless h.Binding has a hold that is Live at now, and
	// returns the hold h.Binding has then: h, or the live one.
	Add(ctx context.Context, h *Hold, now time.Time) (*Hold, error)
	// Spend records a as the approval of binding's hold id and takes one
	// of its uses, atomically across every Gate sharing the Store. It
	// reports false, changing nothing, when that hold is gone or a.Uses
	// calls were already let through.
	Spend(ctx context.Context, binding, id string, a *Approval) (bool, error)
}

// actionIDLabel separates the commitment of an action id from other
// hashes of a call.
const actionIDLabel = "idn-action-id-v1"

// ActionID is the action id of a hold: "act_" and 26 base32 characters,
// the first 128 bits of SHA-256(label ‖ salt ‖ binding). A random salt
// keeps it unguessable. The owner's assertion covers the id, so it binds
// the approval to this agent, subject and digest even through a Store
// that another program could write.
func ActionID(salt []byte, binding string) string {
	h := sha256.New()
	h.Write([]byte(actionIDLabel))
	h.Write([]byte{0})
	h.Write(salt)
	h.Write([]byte{0})
	h.Write([]byte(binding))
	sum := h.Sum(nil)
	return "act_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// MemoryStore is a Store in one process's memory: the Gate's default. A
// restart forgets its holds, and other processes do not see them, so a
// call retried there is filed again. Its zero value is ready.
type MemoryStore struct {
	// Max bounds the holds kept; zero means DefaultMaxPending. Past it,
	// ended holds are dropped, and Add fails with ErrFile if none is.
	Max int

	mu    sync.Mutex
	holds map[string]*Hold
}

var _ Store = (*MemoryStore)(nil)

// Hold returns a copy of binding's hold.
func (m *MemoryStore) Hold(_ context.Context, binding string) (*Hold, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.holds[binding]; h != nil {
		return h.Clone(), nil
	}
	return nil, nil
}

// Add keeps a copy of h unless a live hold is there.
func (m *MemoryStore) Add(_ context.Context, h *Hold, now time.Time) (*Hold, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev := m.holds[h.Binding]; prev != nil && prev.Live(now) {
		return prev.Clone(), nil
	}
	if m.holds == nil {
		m.holds = map[string]*Hold{}
	}
	limit := m.Max
	if limit <= 0 {
		limit = DefaultMaxPending
	}
	if len(m.holds) >= limit {
		for k, e := range m.holds {
			if !e.Live(now) {
				delete(m.holds, k)
			}
		}
	}
	if len(m.holds) >= limit {
		return nil, fmt.Errorf("%w: %d requests already wait", ErrFile, len(m.holds))
	}
	m.holds[h.Binding] = h.Clone()
	return h.Clone(), nil
}

// Spend takes one use of binding's hold id under the store's lock.
func (m *MemoryStore) Spend(_ context.Context, binding, id string, a *Approval) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.holds[binding]
	if h == nil || h.ID != id || h.Spent >= a.Uses {
		return false, nil
	}
	h.Approval = (&Hold{Approval: a}).Clone().Approval
	h.Spent++
	return true, nil
}
