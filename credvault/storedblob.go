package credvault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// maxBlobName bounds a blob's name, kept in a store's text column.
const maxBlobName = 128

// ErrBlobNotFound is returned by Blob for a name the store does not hold.
var ErrBlobNotFound = errors.New("credvault: no stored blob of that name")

// Blob returns a copy of the value stored under name, opened, from the
// current snapshot: a write by another process shows once the Vault has
// reloaded. A value that does not open fails, never yields garbage.
func (v *Vault) Blob(name string) ([]byte, error) {
	sealed, ok := v.snap.Load().blobs[name]
	if !ok {
		return nil, ErrBlobNotFound
	}
	b, err := v.sealer.open(kindStoredBlob, name, 0, sealed)
	if err != nil {
		return nil, fmt.Errorf("credvault: stored blob %q does not open: %w", name, err)
	}
	return b, nil
}

// PutBlob seals value under name in the store; nil deletes it. With
// ifAbsent, a value already stored is kept: the first of several
// processes writing at once wins, and all read its value back.
func (v *Vault) PutBlob(ctx context.Context, name string, value []byte, ifAbsent bool) error {
	if name == "" || len(name) > maxBlobName || hasControl(name) {
		return invalid("name", "must be 1-%d bytes without control characters", maxBlobName)
	}
	return v.write(ctx, func(r *Records) error {
		if _, ok := r.Blobs[name]; ok && ifAbsent {
			return nil
		}
		if value == nil {
			delete(r.Blobs, name)
			return nil
		}
		sealed, err := v.sealer.seal(kindStoredBlob, name, 0, slices.Clone(value))
		if err != nil {
			return err
		}
		if r.Blobs == nil {
			r.Blobs = map[string][]byte{}
		}
		r.Blobs[name] = sealed
		return nil
	})
}

// A SQL store keeps the key check and the blobs as rows of one name-value
// table: "key_check", and "blob:" followed by each blob's name.
const (
	metaKeyCheck   = "key_check"
	metaBlobPrefix = "blob:"
)

// SetMeta puts one row of a store's name-value table into r. A row of a
// name this version does not know is ignored, so that an older gateway
// reads a store a newer one wrote.
func SetMeta(r *Records, name string, value []byte) {
	switch {
	case name == metaKeyCheck:
		r.KeyCheck = value
	case strings.HasPrefix(name, metaBlobPrefix):
		if r.Blobs == nil {
			r.Blobs = map[string][]byte{}
		}
		r.Blobs[strings.TrimPrefix(name, metaBlobPrefix)] = value
	}
}

// MetaChanges yields the rows of a store's name-value table that differ
// between before and after: the new value, or nil for a row to delete.
func MetaChanges(before, after *Records) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		if !bytes.Equal(before.KeyCheck, after.KeyCheck) && !yield(metaKeyCheck, after.KeyCheck) {
			return
		}
		for name := range before.Blobs {
			if _, ok := after.Blobs[name]; !ok && !yield(metaBlobPrefix+name, nil) {
				return
			}
		}
		for name, value := range after.Blobs {
			if old, ok := before.Blobs[name]; (!ok || !bytes.Equal(old, value)) && !yield(metaBlobPrefix+name, value) {
				return
			}
		}
	}
}
