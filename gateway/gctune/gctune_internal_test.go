package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tt := range []struct {
		live, held int64
		want       int
	}{
		{0, 0, 400},                           // before the first collection
		{10 * mib, 0, 400},                    // no snapshots: GOGC as set
		{114 * mib, 106 * mib, 28},            // a million claims: headroom 4 × 8 MiB, not 4 × 114
		{110 * mib, 120 * mib, 400 * 4 / 110}, // more held than live (a snapshot freed, not yet counted off): the least headroom
		{2 * mib, 1 * mib, 400},               // a heap under the least one Go keeps
	} {
		if got := gcPercentFor(400, tt.live, tt.held); got != tt.want {
			t.Errorf("gcPercentFor(400, %d MiB, %d MiB) = %d, want %d", tt.live/mib, tt.held/mib, got, tt.want)
		}
	}
	if got := gcPercentFor(-1, 100*mib, 90*mib); got != -1 {
		t.Errorf("collection off: %d, want -1", got)
	}
}

// After a collection that finds most of the heap held by snapshots, the
// tuner lowers GOGC so that the headroom is in proportion to the rest; once
// stopped, it puts GOGC back.
func TestTuneLeavesSnapshotsOutOfHeadroom(t *testing.T) {
	before := debug.SetGCPercent(Percent)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	snapshot := make([]byte, 256<<20) // what a snapshot of 2.5 million claims holds
	tunes := make(chan int, 100)
	tn := &gcTuner{percent: Percent, held: func() int64 { return int64(len(snapshot)) }, onTune: func(gogc int) {
		select {
		case tunes <- gogc:
		default:
		}
	}}
	tn.start()
	deadline := time.After(10 * time.Second)
	for low := false; !low; {
		runtime.GC()
		select {
		case gogc := <-tunes:
			low = gogc < Percent/4
		case <-deadline:
			t.Fatal("GOGC not lowered after collections that found the snapshot live")
		}
	}
	runtime.KeepAlive(snapshot)
	tn.stop()
	if got := debug.SetGCPercent(Percent); got != Percent {
		t.Errorf("GOGC after stop = %d, want %d", got, Percent)
	}
}
