// Package gctune holds the garbage collector settings of a process that
// mostly serves a gateway:
//
//   - Percent, the target it runs at;
//   - MemoryHeadroom, the memory a limit should allow beyond the nonce
//     budget;
//   - Tune, which keeps the claims snapshots and nonce tables out of the
//     collector's headroom.
//
// They are process-wide, so a library never sets them. cmd/gateway does,
// and so may a program that embeds a gateway. docs/gateway.md ("Memory")
// tells what a gateway's memory holds.
//
//	debug.SetGCPercent(gctune.Percent)
//	defer gctune.Tune(gctune.Percent, gw.HeldBytes)()
//	debug.SetMemoryLimit(replay.DefaultMaxBytes + gctune.MemoryHeadroom)
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"time"
)

// Percent is the garbage collector target (GOGC) recommended for a
// process that mostly serves a gateway. A gateway's live heap is small, so
// at Go's default of 100 every few megabytes of per-request garbage start a
// collection. At 3,000 requests/s that is several a second. Requests that
// meet one pay for it at p99 (bench/README.md has the figures). At 400
// the heap may grow to five times the live data before a collection: a few
// tens of megabytes for a typical gateway. A memory limit caps it
// (cmd/gateway sets one: GATEWAY_MEMORY_LIMIT_BYTES or GOMEMLIMIT).
// cmd/gateway runs at this target, applied by Tune to the heap other than
// the claims snapshots, unless GOGC is set.
const Percent = 400

// MemoryHeadroom is what cmd/gateway's default memory limit allows beyond
// the nonce store's budget (replay.Config.MaxBytes). It holds the claims
// snapshots: about 94 bytes a claim, and a second set while a changed feed
// is rebuilt. It also holds connections, buffers and the garbage between
// two collections.
const MemoryHeadroom = 256 << 20

// minDynamicHeap is the least heap Tune gives headroom for, so that a
// gateway whose heap is nearly all claims still collects no more often
// than Go's smallest heap (4 MiB) at Percent would.
const minDynamicHeap = 4 << 20

// Tune runs the garbage collector at percent (a GOGC value, normally
// Percent) of the heap other than its large pointer-free tables, instead
// of the whole heap, until stop is called. held reports those tables'
// bytes: a gateway's HeldBytes counts its claims snapshots and nonce
// tables. After every collection it sets GOGC to percent × dynamic / live.
// There live is the heap the collection found live. dynamic is the least
// of the last few collections' live heap less those tables' bytes (see
// dynamicSamples).
//
// GOGC's headroom exists to make collections rare, and a collection's cost
// is the heap it scans. The tables are large (about 94 bytes a claim, 14 a
// nonce) but pointer-free, so they cost a collection almost nothing to
// keep. Headroom in proportion to them would only hold memory. At GOGC 400
// a million claims would let the heap grow by 400 MB between collections.
// With Tune, a gateway collects as often as it would without them, and its
// memory is the tables plus what it would use without them.
//
// A snapshot's building changes the held bytes between collections: its
// arrays grow, and then the old snapshot and the building's scratch, about
// twice the snapshot, become garbage. Tune checks the held bytes every
// heldCheckInterval and tunes again at once when they moved by an eighth.
// When they fell, it first collects and returns the freed memory to the
// system, as the next collection and the scavenger would do later.
//
// cmd/gateway runs it unless GOGC is set; the memory limit still applies.
func Tune(percent int, held func() int64) (stop func()) {
	t := &gcTuner{percent: percent, held: held, done: make(chan struct{})}
	t.start()
	go t.watch(heldCheckInterval)
	return t.stop
}

// heldCheckInterval is how often Tune checks the held bytes.
const heldCheckInterval = 250 * time.Millisecond

type gcTuner struct {
	percent int
	held    func() int64
	onTune  func(gogc int) // for tests; nil otherwise

	done    chan struct{} // closed by stop; nil: no watch
	mu      sync.Mutex
	stopped bool
	tuned   int64 // the held bytes at the last tune
	live    [1]metrics.Sample
	dynamic [dynamicSamples]int64 // the live heap less the held bytes, at the last tunes
	tunes   int
}

// dynamicSamples is how many tunes' figures of the heap other than the
// held bytes tune takes the least of. A collection counts as live what was
// allocated while it ran. Under a high allocation rate on a busy machine,
// that is a good part of that heap in one collection and not in the next.
// The least of a few is the steadier figure. When the heap really grows,
// the figure follows a few collections later.
const dynamicSamples = 4

// gcSentinel is allocated, and dropped, once per collection; its cleanup
// runs after the collection that frees it. It holds a pointer so that it is
// never packed with other small objects, which would delay its cleanup.
type gcSentinel struct{ _ *byte }

func (t *gcTuner) start() {
	t.live[0].Name = "/gc/heap/live:bytes"
	t.tune()
	t.arm()
}

func (t *gcTuner) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(t *gcTuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

// tune sets GOGC for the heap the last collection found live; it reports
// false once stopped.
func (t *gcTuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.live[:])
	live := int64(t.live[0].Value.Uint64())
	t.tuned = t.held()
	t.dynamic[t.tunes%dynamicSamples] = live - t.tuned
	t.tunes++
	dynamic := slices.Min(t.dynamic[:min(t.tunes, dynamicSamples)])
	gogc := gcPercentFor(t.percent, live, live-dynamic)
	debug.SetGCPercent(gogc)
	if t.onTune != nil {
		t.onTune(gogc)
	}
	return true
}

// watch tunes whenever the held bytes moved by an eighth since the last
// tune, checking every interval, until stop.
func (t *gcTuner) watch(interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		was := t.tuned
		t.mu.Unlock()
		now := t.held()
		switch {
		case was-now > max(was, now)/8:
			debug.FreeOSMemory()
			t.tune()
		case now-was > max(was, now)/8:
			t.tune()
		}
	}
}

// stop ends the tuning and puts GOGC back to percent.
func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped && t.done != nil {
		close(t.done)
	}
	t.stopped = true
	debug.SetGCPercent(t.percent)
}

// gcPercentFor returns the GOGC value that gives a heap of live bytes, held
// of them in tables, percent of the rest (at least minDynamicHeap) as
// headroom.
func gcPercentFor(percent int, live, held int64) int {
	dynamic := max(live-held, minDynamicHeap)
	if percent <= 0 || dynamic >= live {
		return percent
	}
	return max(int(int64(percent)*dynamic/live), 1)
}
