package replay_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/idnhq/idn/replay"
)

const benchWindow = 330 * time.Second // max age 300 s + skew 30 s

// BenchmarkCheckNonce measures one check-and-record of a fresh nonce, from
// two goroutines per core.
func BenchmarkCheckNonce(b *testing.B) {
	s, _ := newStore(b, replay.Config{MaxBytes: 1 << 30})
	until := t0.Add(benchWindow)
	ctx := context.Background()
	b.SetParallelism(2)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 32)
		prefix := strconv.FormatInt(time.Now().UnixNano(), 36)
		for i := 0; pb.Next(); i++ {
			buf = strconv.AppendInt(append(buf[:0], prefix...), int64(i), 36)
			if err := s.CheckNonce(ctx, "bench-namespace", string(buf), until); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemory reports what a nonce costs (B/nonce, heap bytes held
// over nonces held):
//
//   - full: a store of 64 MiB filled until it refuses, the figure behind
//     replay.Bytes and the sustained rates in docs/gateway.md (fill is the
//     share of slots in use);
//   - 1M: a default store holding 1,000,000 nonces, whose tables grow by
//     by half, so the figure lies between the full one and 1.5 times it.
func BenchmarkMemory(b *testing.B) {
	b.Run("full", func(b *testing.B) {
		const maxBytes = 64 << 20
		for b.Loop() {
			before := heapInUse()
			s, _ := newStore(b, replay.Config{MaxBytes: maxBytes})
			n := fill(b, s, maxBytes/64*5, func(int) time.Time { return t0.Add(benchWindow) })
			after := heapInUse()
			if n == maxBytes/64*5 {
				b.Fatal("the store never refused")
			}
			b.ReportMetric(float64(after-before)/float64(n), "B/nonce")
			b.ReportMetric(float64(n)/(maxBytes/64*5), "fill")
			b.ReportMetric(float64(n), "nonces")
			runtime.KeepAlive(s)
		}
	})
	b.Run("1M", func(b *testing.B) {
		const n = 1_000_000
		for b.Loop() {
			before := heapInUse()
			s, _ := newStore(b, replay.Config{})
			if got := fill(b, s, n, func(int) time.Time { return t0.Add(benchWindow) }); got != n {
				b.Fatalf("%d nonces held", got)
			}
			after := heapInUse()
			b.ReportMetric(float64(after-before)/(1<<20), "heap-MB")
			b.ReportMetric(float64(after-before)/n, "B/nonce")
			runtime.KeepAlive(s)
		}
	})
}

// BenchmarkSteady measures the latency of individual checks in a store
// that holds 1,000,000 live nonces while as many expire: 1,000,000 requests
// at 3,000/s (each kept 330 s), then another 1,000,000 at the same rate.
// It reports the max, p99 and p99.9 latency of a check (table growth
// included), how many took over 1 ms, the duration of Len (a scan of the
// whole table) and the longest GC stop-the-world pause seen. Wall-clock
// maxima on a shared machine also catch the scheduler preempting the
// benchmark; the p99.9 shows the store.
func BenchmarkSteady(b *testing.B) {
	const n = 1_000_000
	step := time.Second / 3000
	for b.Loop() {
		s, clk := newStore(b, replay.Config{})
		fill(b, s, n, func(i int) time.Time {
			clk.Advance(step)
			return clk.Now().Add(benchWindow)
		})
		lat := measure(b, s, n, "steady2-", func() time.Time {
			clk.Advance(step)
			return clk.Now().Add(benchWindow)
		})
		report(b, s, lat)
	}
}

// fill checks up to n fresh nonces and returns how many were recorded
// before the first ErrFull.
func fill(b *testing.B, s *replay.Store, n int, until func(i int) time.Time) int {
	ctx := context.Background()
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "nonce-"...), int64(i), 10)
		err := s.CheckNonce(ctx, "ns-"+strconv.Itoa(i%1000), string(buf), until(i))
		if errors.Is(err, replay.ErrFull) {
			return i
		}
		if err != nil {
			b.Fatalf("fill %d: %v", i, err)
		}
	}
	return n
}

// measure runs n checks and returns their individual latencies. Nonces and
// namespaces are prepared first so that the measured loop itself allocates
// nothing and only the store's work (and the runtime's) is timed.
func measure(b *testing.B, s *replay.Store, n int, prefix string, until func() time.Time) []time.Duration {
	ctx := context.Background()
	lat := make([]time.Duration, n)
	namespaces := make([]string, 1000)
	for i := range namespaces {
		namespaces[i] = "ns-" + strconv.Itoa(i)
	}
	var arena []byte
	ends := make([]int, n)
	for i := range n {
		arena = strconv.AppendInt(append(arena, prefix...), int64(i), 10)
		ends[i] = len(arena)
	}
	nonces := string(arena)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gcBefore := ms.NumGC
	begin := 0
	for i := range n {
		nonce, u := nonces[begin:ends[i]], until()
		begin = ends[i]
		start := time.Now()
		err := s.CheckNonce(ctx, namespaces[i%len(namespaces)], nonce, u)
		lat[i] = time.Since(start)
		if err != nil {
			b.Fatalf("check %d: %v", i, err)
		}
	}
	runtime.ReadMemStats(&ms)
	var maxPause uint64
	for gc := gcBefore; gc < ms.NumGC && ms.NumGC-gc <= 256; gc++ {
		maxPause = max(maxPause, ms.PauseNs[(gc+255)%256])
	}
	b.ReportMetric(float64(maxPause)/1e3, "gc-pause-max-µs")
	b.ReportMetric(float64(ms.NumGC-gcBefore), "gcs")
	return lat
}

func report(b *testing.B, s *replay.Store, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)-1])/1e3, "check-max-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "check-p99-µs")
	b.ReportMetric(float64(lat[len(lat)*999/1000])/1e3, "check-p99.9-µs")
	over, _ := slices.BinarySearch(lat, time.Millisecond+1)
	b.ReportMetric(float64(len(lat)-over), "checks>1ms")
	start := time.Now()
	live := s.Len()
	b.ReportMetric(float64(time.Since(start))/1e3, "len-µs")
	b.ReportMetric(float64(live), "live")
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkCheckNonceFull measures a check refused by a full store (64
// MiB), which searches the table for room before it gives up: what each
// request of a flood costs once the store is full. The store is first
// filled until 1,000 checks in a row are refused (fill is the share of
// slots then in use); the first refusal comes earlier, at about 97%.
func BenchmarkCheckNonceFull(b *testing.B) {
	const maxBytes = 64 << 20
	s, _ := newStore(b, replay.Config{MaxBytes: maxBytes})
	until := t0.Add(benchWindow)
	ctx := context.Background()
	buf := make([]byte, 0, 32)
	held := 0
	for i, refused := 0, 0; refused < 1000; i++ {
		buf = strconv.AppendInt(append(buf[:0], "fill-"...), int64(i), 10)
		if errors.Is(s.CheckNonce(ctx, "fill", string(buf), until), replay.ErrFull) {
			refused++
		} else {
			held, refused = held+1, 0
		}
	}
	full := 0
	for i := 0; b.Loop(); i++ {
		buf = strconv.AppendInt(append(buf[:0], "flood-"...), int64(i), 10)
		if errors.Is(s.CheckNonce(ctx, "flood", string(buf), until), replay.ErrFull) {
			full++
		}
	}
	b.ReportMetric(float64(full)/float64(b.N), "refused")
	b.ReportMetric(float64(held)/(maxBytes/64*5), "fill")
}
