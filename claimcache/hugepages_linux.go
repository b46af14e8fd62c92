package claimcache

import (
	"syscall"
	"unsafe"
)

// adviseHugePages asks Linux to back a large table with transparent huge
// pages (where the system's THP mode is "madvise"), so a random lookup costs
// a cache miss instead of a cache and a TLB miss. Failure is harmless.
func adviseHugePages[T any](table []T) {
	const huge = 2 << 20
	n := uintptr(len(table)) * unsafe.Sizeof(*new(T))
	if n < 2*huge {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(table))
	start := uintptr(base)
	first := (start + huge - 1) &^ (huge - 1)
	last := (start + n) &^ (huge - 1)
	if last <= first {
		return
	}
	region := unsafe.Slice((*byte)(unsafe.Add(base, first-start)), last-first)
	_ = syscall.Madvise(region, syscall.MADV_HUGEPAGE)
}
