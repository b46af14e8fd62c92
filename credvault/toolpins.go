package credvault

import (
	"bytes"
	"context"
	"errors"
	"slices"
)

// errUnchanged rolls back an update that would write nothing.
var errUnchanged = errors.New("credvault: unchanged")

// ToolPins returns the stored tool pins of connection id (Records.ToolPins)
// from the current snapshot; nil when it has none. Do not modify it.
func (v *Vault) ToolPins(id string) []byte { return v.snap.Load().toolPins[id] }

// UpdateToolPins runs fn on the stored tool pins of connection id (nil when
// none) inside one store transaction and stores what fn returns; nothing is
// written when fn fails or returns the pins unchanged. It returns
// ErrNotFound when the connection does not exist.
func (v *Vault) UpdateToolPins(ctx context.Context, id string, fn func(pins []byte) ([]byte, error)) error {
	err := v.store.Update(ctx, func(r *Records) error {
		if err := v.verifyKeyCheck(r.KeyCheck); err != nil {
			return err
		}
		if _, ok := r.Connections[id]; !ok {
			return ErrNotFound
		}
		before := r.ToolPins[id]
		after, err := fn(slices.Clone(before))
		if err != nil {
			return err
		}
		if bytes.Equal(before, after) {
			return errUnchanged
		}
		if r.ToolPins == nil {
			r.ToolPins = map[string][]byte{}
		}
		r.ToolPins[id] = after
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	return v.reload(ctx)
}
