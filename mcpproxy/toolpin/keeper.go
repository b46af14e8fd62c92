package toolpin

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Backend stores each connection's Record as JSON. *credvault.Vault is
// one (its tool pins, beside each connection); Memory is another.
type Backend interface {
	// ToolPins returns connectionID's stored record; nil when none.
	ToolPins(connectionID string) []byte
	// UpdateToolPins replaces connectionID's record by what fn returns,
	// in one transaction with fn's reading it; unchanged means no write.
	UpdateToolPins(ctx context.Context, connectionID string, fn func([]byte) ([]byte, error)) error
}

// MaxRecordBytes bounds one connection's stored record. A change past it
// is not kept: a changed tool then stays hidden, unreviewable until the
// server lists fewer changes.
const MaxRecordBytes = 4 << 20

// Keeper keeps the Records of a Backend: it decodes each once per
// change, and writes only when a listing or an acceptance changes one.
// It is what mcpproxy.Config.Pins takes. The zero value is not usable:
// set Backend.
type Keeper struct {
	// Backend stores the records. Required.
	Backend Backend
	// OnEvent, when set, is told of every change a listing or an
	// acceptance made, after it was stored (for metrics and logs). It
	// must not block.
	OnEvent func(connectionID string, e Event)
	// Clock stamps pins and pending definitions. Nil means time.Now.
	Clock func() time.Time

	decoded sync.Map // connection id → *decoded
}

type decoded struct {
	raw []byte
	rec *Record
}

// Pins returns connectionID's record; nil when it has none or it cannot
// be read (then no tool passes).
func (k *Keeper) Pins(connectionID string) *Record {
	raw := k.Backend.ToolPins(connectionID)
	if raw == nil {
		return nil
	}
	// A backend hands out the same bytes until they change: comparing
	// where they lie costs nothing on a call's path.
	if d, ok := k.decoded.Load(connectionID); ok && len(d.(*decoded).raw) == len(raw) && (len(raw) == 0 || &d.(*decoded).raw[0] == &raw[0]) {
		return d.(*decoded).rec
	}
	rec, err := decode(raw)
	if err != nil {
		return nil
	}
	k.decoded.Store(connectionID, &decoded{raw: raw, rec: rec})
	return rec
}

// Observe keeps what a listing of connectionID's tools changes in its
// record (Record.Observe). A listing that changes nothing writes nothing.
func (k *Keeper) Observe(ctx context.Context, connectionID string, listed []Listed, complete bool) error {
	if rec := k.Pins(connectionID); rec != nil || !complete {
		if next, _ := rec.Observe(listed, complete, k.now()); next == rec {
			return nil
		}
	}
	var events []Event
	err := k.update(ctx, connectionID, func(rec *Record) (*Record, error) {
		next, ev := rec.Observe(listed, complete, k.now())
		events = ev
		return next, nil
	})
	k.tell(connectionID, events, err)
	return err
}

// Accept pins, in one write, the pending definition of each tool named in
// tools (tool name → the hash the reviewer saw), as accepted by by
// (Record.Accept), and returns the record stored. When one of them no
// longer waits with that hash, none is accepted: ErrStale.
func (k *Keeper) Accept(ctx context.Context, connectionID string, tools map[string]string, by string) (*Record, error) {
	return k.decide(ctx, connectionID, tools, Event{Kind: EventAccepted, By: by}, func(rec *Record, tool, sha256 string) (*Record, error) {
		return rec.Accept(tool, sha256, by, k.now())
	})
}

// Reject refuses, in one write, the pending definition of each tool named
// in tools (tool name → the hash the reviewer saw), as rejected by by
// (Record.Reject), and returns the record stored. When one of them no
// longer waits with that hash, none is rejected: ErrStale.
func (k *Keeper) Reject(ctx context.Context, connectionID string, tools map[string]string, by string) (*Record, error) {
	return k.decide(ctx, connectionID, tools, Event{Kind: EventRejected, By: by}, func(rec *Record, tool, sha256 string) (*Record, error) {
		return rec.Reject(tool, sha256, by, k.now())
	})
}

// decide applies one reviewer's decision to each tool named, all or none,
// and tells of each as told, with its tool.
func (k *Keeper) decide(ctx context.Context, id string, tools map[string]string, told Event, fn func(rec *Record, tool, sha256 string) (*Record, error)) (*Record, error) {
	var out *Record
	err := k.update(ctx, id, func(rec *Record) (*Record, error) {
		for _, tool := range Names(tools) {
			next, err := fn(rec, tool, tools[tool])
			if err != nil {
				return nil, fmt.Errorf("%w: %s", err, tool)
			}
			rec = next
		}
		out = rec
		return rec, nil
	})
	if err != nil {
		return nil, err
	}
	events := make([]Event, 0, len(tools))
	for _, tool := range Names(tools) {
		told.Tool = tool
		events = append(events, told)
	}
	k.tell(id, events, nil)
	return out, nil
}

func (k *Keeper) update(ctx context.Context, id string, fn func(*Record) (*Record, error)) error {
	return k.Backend.UpdateToolPins(ctx, id, func(raw []byte) ([]byte, error) {
		var rec *Record
		if raw != nil {
			var err error
			if rec, err = decode(raw); err != nil {
				return nil, err
			}
		}
		next, err := fn(rec)
		if err != nil || next == rec {
			return raw, err
		}
		out, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("toolpin: encoding the pins: %w", err)
		}
		if len(out) > MaxRecordBytes {
			return nil, fmt.Errorf("toolpin: the pins of connection %q would exceed %d bytes", id, MaxRecordBytes)
		}
		return out, nil
	})
}

func (k *Keeper) tell(id string, events []Event, err error) {
	if err != nil || k.OnEvent == nil {
		return
	}
	for _, e := range events {
		k.OnEvent(id, e)
	}
}

func (k *Keeper) now() time.Time {
	if k.Clock != nil {
		return k.Clock().UTC()
	}
	return time.Now().UTC()
}

func decode(raw []byte) (*Record, error) {
	var rec Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("toolpin: the stored pins cannot be read: %w", err)
	}
	if rec.Tools == nil {
		rec.Tools = map[string]Pin{}
	}
	return &rec, nil
}

// Memory is a Backend in memory, for a program that keeps its
// connections in memory and for tests. Its zero value is empty and ready.
type Memory struct {
	mu      sync.Mutex
	records map[string][]byte
}

var _ Backend = (*Memory)(nil)

// ToolPins returns connectionID's record.
func (m *Memory) ToolPins(connectionID string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.records[connectionID]
}

// UpdateToolPins replaces connectionID's record by what fn returns.
func (m *Memory) UpdateToolPins(_ context.Context, connectionID string, fn func([]byte) ([]byte, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, err := fn(m.records[connectionID])
	if err != nil {
		return err
	}
	if m.records == nil {
		m.records = map[string][]byte{}
	}
	m.records[connectionID] = next
	return nil
}
