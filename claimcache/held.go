package claimcache

import "github.com/idnhq/idn/internal/heldmem"

// held counts the arrays of snapshots and their building.
var held heldmem.Counter

// HeldBytes returns the bytes of the Go heap that the claims snapshots of
// every Cache in the process hold: their tables, pilots and claim ids,
// those being built, and those replaced but not collected yet (arrays under
// 64 KiB, of small snapshots, are not counted). They are large,
// pointer-free and long-lived, so gctune.Tune leaves them out of the
// collector's headroom.
func HeldBytes() int64 { return held.Bytes() }

// hold counts the array s in HeldBytes until the collector frees it.
func hold[T any](s []T) { heldmem.Hold(&held, s) }

// holdGrown counts s after an append when the append moved it to a new
// array (of capacity other than was).
func holdGrown[T any](s []T, was int) {
	if cap(s) != was {
		hold(s)
	}
}
