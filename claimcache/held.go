package claimcache

import "github.com/idnhq/idn/internal/heldmem"

// HeldBytes returns the bytes of the Go heap that c's claims snapshots
// hold: their tables, pilots and claim ids, those being built, and those
// replaced but not collected yet. Arrays under 64 KiB, of small
// snapshots, are not counted. They are large, pointer-free and
// long-lived, so gctune.Tune leaves them out of the collector's headroom.
func (c *Cache) HeldBytes() int64 { return c.held.Bytes() }

// hold counts the array s in held until the collector frees it.
func hold[T any](held *heldmem.Counter, s []T) { heldmem.Hold(held, s) }

// holdGrown counts s after an append when the append moved it to a new
// array (of capacity other than was).
func holdGrown[T any](held *heldmem.Counter, s []T, was int) {
	if cap(s) != was {
		hold(held, s)
	}
}
