// Package pool is the table of the MCP endpoint's sessions: one pool shared
// by every caller, in which each caller gets a share. A key (namespace and
// key) may hold at most Limits.PerKey sessions and a namespace
// Limits.PerNamespace, both below Limits.Total. A caller opening a session
// past its own share evicts its own least recently used session instead of
// being refused, and a full pool does the same to the caller's namespace;
// only a caller whose namespace holds no session at all is refused. A
// caller flooding the endpoint with sessions therefore churns through its
// own share and never takes one from anyone else.
package pool

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the limits.
const (
	defaultTotal        = 1000
	defaultPerKey       = 32
	defaultPerNamespace = 128
)

// Limits are the session limits in force: 1 <= PerKey <= PerNamespace <=
// Total.
type Limits struct{ Total, PerKey, PerNamespace int }

// NewLimits applies the defaults to the configured limits (zero or
// negative: the default: 1000 in all, 32 per key, 128 per namespace) and
// caps each share by the one above it.
func NewLimits(total, perKey, perNamespace int) Limits {
	l := Limits{Total: total, PerKey: perKey, PerNamespace: perNamespace}
	if l.Total <= 0 {
		l.Total = defaultTotal
	}
	if l.PerNamespace <= 0 {
		l.PerNamespace = defaultPerNamespace
	}
	if l.PerKey <= 0 {
		l.PerKey = defaultPerKey
	}
	l.PerNamespace = min(l.PerNamespace, l.Total)
	l.PerKey = min(l.PerKey, l.PerNamespace)
	return l
}

// Owner is the caller a per-key share belongs to.
type Owner struct{ Namespace, Key string }

// Slot is what a Table keeps in each of its members.
type Slot struct {
	ID    string // set before Add and never changed
	Owner Owner  // set before Add and never changed
	// lastUse orders the sessions of a caller for eviction (the table's
	// use counter at the session's latest request).
	lastUse atomic.Uint64
}

// Member is a session a Table holds.
type Member interface {
	comparable
	Slot() *Slot
}

// Table holds sessions, indexed by id, key and namespace. Its lock is never
// held while taking another.
type Table[M Member] struct {
	limits    Limits
	size      prometheus.Gauge   // the sessions held
	evictions prometheus.Counter // the sessions evicted to make room
	uses      atomic.Uint64      // orders the sessions' latest requests

	mu          sync.Mutex
	byID        map[string]M
	byKey       map[Owner]map[M]struct{}
	byNamespace map[string]map[M]struct{}
}

// NewTable returns an empty Table of limits that keeps size and
// evictions.
func NewTable[M Member](limits Limits, size prometheus.Gauge, evictions prometheus.Counter) *Table[M] {
	return &Table[M]{
		limits:      limits,
		size:        size,
		evictions:   evictions,
		byID:        make(map[string]M),
		byKey:       make(map[Owner]map[M]struct{}),
		byNamespace: make(map[string]map[M]struct{}),
	}
}

// Lookup returns the session of id; the zero M when there is none.
func (t *Table[M]) Lookup(id string) M {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// Touch marks m as used now.
func (t *Table[M]) Touch(m M) { m.Slot().lastUse.Store(t.uses.Add(1)) }

// Add enters m, first removing the least recently used sessions of its
// owner that its shares have no room for; it returns them, to be closed.
// It fails (ok false) only when the pool is full and the owner's namespace
// holds none of it.
func (t *Table[M]) Add(m M) (evicted []M, ok bool) {
	t.Touch(m)
	owner := m.Slot().Owner
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.byKey[owner]) >= t.limits.PerKey {
		evicted = append(evicted, t.removeLRU(t.byKey[owner]))
	}
	for len(t.byNamespace[owner.Namespace]) >= t.limits.PerNamespace {
		evicted = append(evicted, t.removeLRU(t.byNamespace[owner.Namespace]))
	}
	if len(t.byID) >= t.limits.Total {
		if len(t.byNamespace[owner.Namespace]) == 0 {
			return evicted, false
		}
		evicted = append(evicted, t.removeLRU(t.byNamespace[owner.Namespace]))
	}
	t.byID[m.Slot().ID] = m
	index(t.byKey, owner, m)
	index(t.byNamespace, owner.Namespace, m)
	t.size.Inc()
	t.evictions.Add(float64(len(evicted)))
	return evicted, true
}

// Remove takes m out of the table; false if it was not in it.
func (t *Table[M]) Remove(m M) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removeLocked(m)
}

func (t *Table[M]) removeLocked(m M) bool {
	slot := m.Slot()
	if t.byID[slot.ID] != m {
		return false
	}
	delete(t.byID, slot.ID)
	unindex(t.byKey, slot.Owner, m)
	unindex(t.byNamespace, slot.Owner.Namespace, m)
	t.size.Dec()
	return true
}

// removeLRU removes and returns the least recently used session of set,
// which is not empty. Callers hold t.mu.
func (t *Table[M]) removeLRU(set map[M]struct{}) M {
	var lru M
	found := false
	for m := range set {
		if !found || m.Slot().lastUse.Load() < lru.Slot().lastUse.Load() {
			lru, found = m, true
		}
	}
	t.removeLocked(lru)
	return lru
}

// All returns every session in the table.
func (t *Table[M]) All() []M {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]M, 0, len(t.byID))
	for _, m := range t.byID {
		out = append(out, m)
	}
	return out
}

func index[K, M comparable](idx map[K]map[M]struct{}, k K, m M) {
	set := idx[k]
	if set == nil {
		set = make(map[M]struct{})
		idx[k] = set
	}
	set[m] = struct{}{}
}

func unindex[K, M comparable](idx map[K]map[M]struct{}, k K, m M) {
	delete(idx[k], m)
	if len(idx[k]) == 0 {
		delete(idx, k)
	}
}
