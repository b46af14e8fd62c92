package toolpin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Definition is what a tool's pin covers: everything its server tells
// an agent about the tool that could steer the agent or widen the call.
// An empty member is the same as an absent one.
type Definition struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema and OutputSchema are JSON Schemas as the server wrote
	// them; Annotations its hints, as a JSON object.
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Hash returns "sha256:" and the hex SHA-256 of d's canonical JSON.
// A definition whose JSON has no single canonical form (see Canonical)
// has no hash: it cannot be pinned.
func Hash(d Definition) (string, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("toolpin: tool %q: %w", d.Name, err)
	}
	if h, ok := hashes.Load(string(raw)); ok {
		return h.(string), nil
	}
	c, err := Canonical(raw)
	if err != nil {
		return "", fmt.Errorf("toolpin: tool %q: %w", d.Name, err)
	}
	sum := sha256.Sum256(c)
	h := "sha256:" + hex.EncodeToString(sum[:])
	if hashed.Add(1) > maxHashed {
		// Forgetting them all is the cheapest bound; the next listings
		// hash their tools again.
		hashes.Clear()
		hashed.Store(0)
	}
	hashes.Store(string(raw), h)
	return h, nil
}

// hashes keeps the hash of each definition hashed lately, by its JSON as
// Hash encodes it: a server lists the same tools to every session, and
// canonicalizing them again each time would cost each listing about a
// hundred times more.
var (
	hashes sync.Map
	hashed atomic.Int64
)

// maxHashed bounds hashes: past it, they are forgotten.
const maxHashed = 4096

// Who pinned a tool: PinnedBy of a pin the first listing made. A pin
// accepted later names who accepted it (Accept's by).
const FirstDiscovery = "first_discovery"

// Pin is one approved definition.
type Pin struct {
	SHA256     string     `json:"sha256"`
	Definition Definition `json:"definition"`
	PinnedAt   time.Time  `json:"pinned_at"`
	PinnedBy   string     `json:"pinned_by"`
}

// Pending is a definition seen since the pins were made, waiting for
// review: a changed definition of a pinned tool, or a new tool.
type Pending struct {
	SHA256     string     `json:"sha256"`
	Definition Definition `json:"definition"`
	SeenAt     time.Time  `json:"seen_at"`
}

// Rejection is a definition the reviewer refused: while the server lists
// that very definition, its tool stays hidden and is not offered again.
type Rejection struct {
	SHA256     string     `json:"sha256"`
	Definition Definition `json:"definition"`
	RejectedAt time.Time  `json:"rejected_at"`
	RejectedBy string     `json:"rejected_by"`
}

// Record is the pins of one connection, as a store keeps them. A nil
// *Record is a connection no complete listing was seen of: it allows no
// tool.
type Record struct {
	Tools    map[string]Pin       `json:"tools"`
	Pending  map[string]Pending   `json:"pending,omitempty"`
	Rejected map[string]Rejection `json:"rejected,omitempty"`
}

// Listed is one tool of a listing with its hash.
type Listed struct {
	Definition Definition
	SHA256     string
}

// Event kinds Observe and Accept report.
const (
	EventPinned   = "pinned"   // pinned by the first complete listing
	EventChanged  = "changed"  // a pinned tool listed with another definition
	EventNew      = "new"      // a tool listed that has no pin
	EventAccepted = "accepted" // a pending definition accepted
	EventRejected = "rejected" // a pending definition rejected
)

// Event is one change of a Record, for metrics, logs and the activity
// trail. By is who accepted or rejected; empty for the others.
type Event struct {
	Kind string
	Tool string
	By   string
}

// MaxPending bounds the definitions waiting for review: past it, a new
// one is not kept (its tool stays hidden all the same). It bounds the
// rejections too: past it, the oldest is forgotten, and offered again if
// the server still lists it.
const MaxPending = 1000

// Allows reports whether the tool name, listed with hash sha256, is
// pinned with that very hash.
func (r *Record) Allows(name, sha256 string) bool {
	if r == nil || sha256 == "" {
		return false
	}
	p, ok := r.Tools[name]
	return ok && p.SHA256 == sha256
}

// Clone returns a deep enough copy of r to change its maps.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	return &Record{Tools: maps.Clone(r.Tools), Pending: maps.Clone(r.Pending), Rejected: maps.Clone(r.Rejected)}
}

// Observe returns the record after a listing of the connection's tools
// (complete: every page), and what changed; next is r itself when
// nothing did. The first complete listing pins every tool in it. Later,
// a tool listed as pinned drops any pending definition of its name; one
// listed otherwise becomes its name's pending definition, unless it
// already is or was rejected with that very hash. Tools not listed keep
// their pins: a server may list different tools to different sessions.
func (r *Record) Observe(listed []Listed, complete bool, now time.Time) (next *Record, events []Event) {
	if r == nil {
		if !complete {
			return nil, nil
		}
		next = &Record{Tools: make(map[string]Pin, len(listed))}
		for _, t := range listed {
			if t.SHA256 == "" {
				continue // never pinned; it stays hidden
			}
			next.Tools[t.Definition.Name] = Pin{SHA256: t.SHA256, Definition: t.Definition, PinnedAt: now, PinnedBy: FirstDiscovery}
			events = append(events, Event{Kind: EventPinned, Tool: t.Definition.Name})
		}
		return next, events
	}
	next = r
	for _, t := range listed {
		name := t.Definition.Name
		pin, pinned := r.Tools[name]
		pending, waiting := next.Pending[name]
		switch {
		case t.SHA256 == "":
		case pinned && pin.SHA256 == t.SHA256:
			if waiting {
				next = cloneOnce(r, next)
				delete(next.Pending, name)
			}
		case waiting && pending.SHA256 == t.SHA256:
		case next.Rejected[name].SHA256 == t.SHA256:
		case !waiting && len(next.Pending) >= MaxPending:
		default:
			next = cloneOnce(r, next)
			if next.Pending == nil {
				next.Pending = map[string]Pending{}
			}
			next.Pending[name] = Pending{SHA256: t.SHA256, Definition: t.Definition, SeenAt: now}
			kind := EventNew
			if pinned {
				kind = EventChanged
			}
			events = append(events, Event{Kind: kind, Tool: name})
		}
	}
	return next, events
}

func cloneOnce(r, next *Record) *Record {
	if next == r {
		return r.Clone()
	}
	return next
}

// ErrStale is Accept's error when the definition waiting for review is
// not the one the reviewer saw (or none waits): review it again.
var ErrStale = errors.New("toolpin: no definition with this hash waits for review")

// Accept pins the pending definition of tool whose hash is sha256, as
// accepted by by at now, and returns the new record; r is not changed.
// Naming the hash keeps a server that changes the tool again during the
// review from having its newer definition accepted unseen. A definition
// rejected earlier may be accepted the same way: the reviewer changed
// their mind.
func (r *Record) Accept(tool, sha256, by string, now time.Time) (*Record, error) {
	if r == nil {
		return nil, ErrStale
	}
	def, ok := r.Pending[tool].Definition, r.Pending[tool].SHA256 == sha256
	if rej := r.Rejected[tool]; !ok && rej.SHA256 == sha256 {
		def, ok = rej.Definition, true
	}
	if !ok || sha256 == "" {
		return nil, ErrStale
	}
	next := r.Clone()
	if next.Tools == nil {
		next.Tools = map[string]Pin{}
	}
	next.Tools[tool] = Pin{SHA256: sha256, Definition: def, PinnedAt: now, PinnedBy: by}
	if next.Pending[tool].SHA256 == sha256 {
		delete(next.Pending, tool)
	}
	if next.Rejected[tool].SHA256 == sha256 {
		delete(next.Rejected, tool)
	}
	return next, nil
}

// Reject refuses the pending definition of tool whose hash is sha256, as
// rejected by by at now, and returns the new record; r is not changed.
// The tool keeps its pin, if any, so it stays hidden while the server
// lists the rejected definition, which is not offered again: only a
// definition with another hash is.
func (r *Record) Reject(tool, sha256, by string, now time.Time) (*Record, error) {
	if r == nil {
		return nil, ErrStale
	}
	p, ok := r.Pending[tool]
	if !ok || p.SHA256 != sha256 {
		return nil, ErrStale
	}
	next := r.Clone()
	delete(next.Pending, tool)
	if next.Rejected == nil {
		next.Rejected = map[string]Rejection{}
	}
	if _, again := next.Rejected[tool]; !again && len(next.Rejected) >= MaxPending {
		oldest := ""
		for name, rej := range next.Rejected {
			if oldest == "" || rej.RejectedAt.Before(next.Rejected[oldest].RejectedAt) {
				oldest = name
			}
		}
		delete(next.Rejected, oldest)
	}
	next.Rejected[tool] = Rejection{SHA256: p.SHA256, Definition: p.Definition, RejectedAt: now, RejectedBy: by}
	return next, nil
}

// Names returns the names of m, sorted.
func Names[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
