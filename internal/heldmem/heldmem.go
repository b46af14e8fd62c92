// Package heldmem counts the bytes of the Go heap held by large,
// pointer-free arrays that live long (the claims snapshots, the nonce
// store's tables), from their allocation until the collector frees them.
// gctune.Tune leaves them out of the collector's headroom: they cost a
// collection almost nothing to keep, so headroom in proportion to them
// would only hold memory.
package heldmem

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Min is the smallest array Hold counts: smaller ones are part of the
// ordinary heap.
const Min = 64 << 10

// Counter counts the arrays of one owner (a claims cache, a nonce store).
// Its owner reports Bytes; nothing counts the process as a whole.
type Counter struct{ n atomic.Int64 }

// Bytes returns the bytes of c's arrays held and not yet freed.
func (c *Counter) Bytes() int64 { return c.n.Load() }

// Hold counts the array of s (its capacity) in c until the
// collector frees it, when it is at least Min bytes. s must hold no
// pointers.
func Hold[T any](c *Counter, s []T) {
	n := int64(cap(s)) * int64(unsafe.Sizeof(*new(T)))
	if n < Min {
		return
	}
	c.n.Add(n)
	runtime.AddCleanup(unsafe.SliceData(s[:1]), func(n int64) {
		c.n.Add(-n)
	}, n)
}
