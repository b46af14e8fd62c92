package credvault

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Store persists a vault's records. Everything it holds is either metadata
// or sealed by the Vault, so a Store never sees a secret in clear. The
// gateway's default is one SQLite file (package sqlitestore); MemoryStore
// keeps them in memory. Another backend needs only these three methods.
type Store interface {
	// Load returns every record as of one consistent point in time.
	Load(ctx context.Context) (*Records, error)
	// Update runs fn on the current records inside one atomic transaction
	// and persists what fn changed; when fn returns an error nothing is
	// written. Concurrent Updates, from this or another process, are
	// serialized.
	Update(ctx context.Context, fn func(*Records) error) error
	// Generation returns a value that changes whenever a transaction,
	// by any process, may have changed the records. The Vault polls it to
	// notice writes made elsewhere; it must be cheap.
	Generation(ctx context.Context) (uint64, error)
}

// Notifier is implemented by a Store that learns of other processes'
// commits as they happen (package pgstore, through LISTEN/NOTIFY). A Vault
// on it reloads at once instead of at its next poll; polling goes on, so a
// notice lost while the store reconnects costs at most one interval.
type Notifier interface {
	// Changes returns a channel that receives a value after records may
	// have changed. Notices coalesce: one value may stand for many
	// commits. It returns the same channel at every call.
	Changes() <-chan struct{}
}

// ErrStoreUnavailable wraps a Store's errors caused by its backend being
// out of reach (a database that does not answer), not by the request. The
// Vault keeps serving its last snapshot; the gateway refuses writes with
// 503 DATABASE_UNAVAILABLE.
var ErrStoreUnavailable = errors.New("credvault: credential store unavailable")

// Records is the whole content of a store.
type Records struct {
	// KeyCheck is a sealed known value that proves which master key the
	// store belongs to; empty until the first Vault opens the store.
	KeyCheck    []byte
	Connections map[string]*ConnectionRecord // by connection id
	Variables   map[string]*VariableRecord   // by variable key
	// Blobs are values a program keeps beside the connections, sealed by
	// the Vault (Vault.PutBlob), by name: a fleet's shared pairing
	// identity. Nil when there are none.
	Blobs map[string][]byte
	// ToolPins holds, by connection id, the approved definitions of an MCP
	// connection's tools: JSON of another package's (package toolpin),
	// which the vault keeps without reading and deletes with the
	// connection. A store must keep it apart from the connection, so that
	// pinning never rewrites the connection's record.
	ToolPins map[string][]byte
}

// ConnectionRecord is a connection and its sealed secrets. The secrets are
// sealed for (connection id, Connection.SecretVersion).
type ConnectionRecord struct {
	Connection    Connection
	SealedSecrets []byte
}

// VariableRecord is a credential variable and its sealed value, sealed for
// (variable key, Variable.Version).
type VariableRecord struct {
	Variable    Variable
	SealedValue []byte
}

// Variable is the metadata of a credential variable; its value is never
// part of it.
type Variable struct {
	Key              string    `json:"key"`
	Version          int64     `json:"version"`
	CreatedBySubject string    `json:"created_by_subject,omitempty"`
	CreatedAt        time.Time `json:"created_at,omitzero"`
	UpdatedAt        time.Time `json:"updated_at,omitzero"`
}

// Clone returns a deep copy of r.
func (r *Records) Clone() *Records {
	n := &Records{
		KeyCheck:    slices.Clone(r.KeyCheck),
		Connections: make(map[string]*ConnectionRecord, len(r.Connections)),
		Variables:   make(map[string]*VariableRecord, len(r.Variables)),
		ToolPins:    make(map[string][]byte, len(r.ToolPins)),
	}
	for id, p := range r.ToolPins {
		n.ToolPins[id] = slices.Clone(p)
	}
	for id, c := range r.Connections {
		n.Connections[id] = &ConnectionRecord{Connection: *c.Connection.Clone(), SealedSecrets: slices.Clone(c.SealedSecrets)}
	}
	for k, v := range r.Variables {
		vv := *v
		vv.SealedValue = slices.Clone(v.SealedValue)
		n.Variables[k] = &vv
	}
	for name, b := range r.Blobs {
		if n.Blobs == nil {
			n.Blobs = make(map[string][]byte, len(r.Blobs))
		}
		n.Blobs[name] = slices.Clone(b)
	}
	return n
}

// MemoryStore is a Store in memory, for a program that loads its
// connections from elsewhere at start and for tests. Its zero value is
// empty and ready to use. Vaults that share one MemoryStore see each
// other's writes, as processes sharing a file do.
type MemoryStore struct {
	mu         sync.Mutex
	records    *Records
	generation uint64
}

var _ Store = (*MemoryStore)(nil)

// Load returns a copy of the records.
func (m *MemoryStore) Load(context.Context) (*Records, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.records == nil {
		return emptyRecords(), nil
	}
	return m.records.Clone(), nil
}

// Update runs fn on a copy of the records and keeps it when fn succeeds.
func (m *MemoryStore) Update(_ context.Context, fn func(*Records) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := emptyRecords()
	if m.records != nil {
		next = m.records.Clone()
	}
	if err := fn(next); err != nil {
		return err
	}
	m.records = next
	m.generation++
	return nil
}

// Generation counts the successful Updates.
func (m *MemoryStore) Generation(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.generation, nil
}

func emptyRecords() *Records {
	return &Records{Connections: map[string]*ConnectionRecord{}, Variables: map[string]*VariableRecord{}, ToolPins: map[string][]byte{}}
}
