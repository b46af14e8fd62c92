package heldmem

import (
	"runtime"
	"testing"
)

// Hold counts an array of at least Min bytes, in its counter until
// the collector frees it, and leaves smaller ones out.
func TestHoldCountsUntilFreed(t *testing.T) {
	var c Counter
	Hold(&c, make([]byte, Min-1))
	if c.Bytes() != 0 {
		t.Fatalf("an array under Min counted: %d", c.Bytes())
	}
	big := make([]uint64, 0, 1<<20)
	Hold(&c, big)
	if c.Bytes() != 8<<20 {
		t.Fatalf("counter %d; want %d", c.Bytes(), 8<<20)
	}
	runtime.KeepAlive(big)
	for range 100 { // the cleanup runs after the collection that frees the array
		if c.Bytes() == 0 {
			return
		}
		runtime.GC()
		runtime.Gosched()
	}
	t.Fatalf("counter still %d after the array was freed", c.Bytes())
}
