package main

import (
	"github.com/idnhq/idn/gateway/gctune"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	for _, tt := range []struct {
		gogc       string
		want, runs int // the target reported, and the one in force
	}{
		{"", gctune.Percent, gctune.Percent},
		{"50", 50, 100},  // the runtime applied GOGC at start; tuneGC leaves it
		{"off", -1, 100}, // likewise
	} {
		debug.SetGCPercent(100)
		got := tuneGC(tt.gogc)
		if runs := debug.SetGCPercent(100); got != tt.want || runs != tt.runs {
			t.Errorf("GOGC=%q: tuneGC = %d with %d in force, want %d with %d", tt.gogc, got, runs, tt.want, tt.runs)
		}
	}
}

func TestTuneMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	debug.SetMemoryLimit(1 << 40) // as GOMEMLIMIT=1TiB would have at start
	if got := tuneMemory(300<<20, "1TiB"); got != 1<<40 || debug.SetMemoryLimit(-1) != 1<<40 {
		t.Errorf("with GOMEMLIMIT set: tuneMemory = %d, in force %d; want GOMEMLIMIT's %d", got, debug.SetMemoryLimit(-1), int64(1<<40))
	}
	if got := tuneMemory(300<<20, ""); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("tuneMemory = %d, in force %d; want %d", got, debug.SetMemoryLimit(-1), 300<<20)
	}
}
