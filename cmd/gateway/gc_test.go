package main

import (
	"runtime/debug"
	"testing"

	"github.com/idnhq/idn/gateway"
)

func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	for _, tt := range []struct {
		gogc       string
		want, runs int // the target reported, and the one in force
	}{
		{"", gateway.GCPercent, gateway.GCPercent},
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
