package claimcache

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// held is the number of bytes HeldBytes reports.
var held atomic.Int64

// HeldBytes returns the bytes of the Go heap that the claims snapshots of
// every Cache in the process hold: their tables, pilots and claim ids,
// those being built, and those replaced but not collected yet. They are
// large, pointer-free and long-lived, so a garbage collector's headroom in
// proportion to them only costs memory (gateway.TuneGC leaves them out of
// it).
func HeldBytes() int64 { return held.Load() }

// holdMin is the smallest array hold counts: a small snapshot's arrays are
// part of the ordinary heap.
const holdMin = 64 << 10

// hold counts the array s (its capacity) in HeldBytes until the collector
// frees it.
func hold[T any](s []T) {
	n := int64(cap(s)) * int64(unsafe.Sizeof(*new(T)))
	if n < holdMin {
		return
	}
	held.Add(n)
	runtime.AddCleanup(unsafe.SliceData(s[:1]), func(n int64) { held.Add(-n) }, n)
}

// holdGrown counts s after an append when the append moved it to a new
// array (of capacity other than was).
func holdGrown[T any](s []T, was int) {
	if cap(s) != was {
		hold(s)
	}
}
