package replay_test

import (
	"context"
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
	s, _ := newStore(b, replay.Config{MaxEntries: 1 << 30})
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

// BenchmarkMemory1M fills a store with 1,000,000 live nonces and reports the
// heap it holds (heap-MB, B/entry).
func BenchmarkMemory1M(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		s, _ := newStore(b, replay.Config{})
		before := heapInUse()
		fill(b, s, n, func(int) time.Time { return t0.Add(benchWindow) })
		after := heapInUse()
		if s.Len() != n {
			b.Fatalf("Len = %d", s.Len())
		}
		b.ReportMetric(float64(after-before)/(1<<20), "heap-MB")
		b.ReportMetric(float64(after-before)/n, "B/entry")
		runtime.KeepAlive(s)
	}
}

// BenchmarkExpiry1M measures the latency of individual checks while a store
// holding 1,000,000 live nonces expires them, in two shapes:
//
//   - steady: 1,000,000 requests at 2,770/s (what keeps ~1,000,000 live),
//     then another 1,000,000 at the same rate while the first ones expire;
//   - burst: 1,000,000 nonces expiring in the same generation, then the clock
//     jumps past their expiry and one sweep drops them all (expire-1M-µs);
//     the store is filled again, the clock jumps again, and 100,000 further
//     checks run, the first check on each shard dropping its generation.
//
// It reports the max, p99 and p99.9 latency of a check (expiry work included,
// since generations are dropped inside checks), how many checks took over
// 1 ms, the duration of one full sweep of all shards (Len), and the longest
// GC stop-the-world pause seen. Wall-clock maxima on a shared machine also
// catch the scheduler preempting the benchmark; the p99.9 shows the store.
func BenchmarkExpiry1M(b *testing.B) {
	const n = 1_000_000
	// Each nonce is held for the window plus up to one generation, so this
	// rate keeps just under n nonces live.
	step := (benchWindow + replay.DefaultGranularity + time.Second) / n
	b.Run("steady", func(b *testing.B) {
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
	})
	b.Run("burst", func(b *testing.B) {
		for b.Loop() {
			s, clk := newStore(b, replay.Config{})
			until := t0.Add(benchWindow)
			fill(b, s, n, func(int) time.Time { return until })
			clk.Advance(benchWindow + replay.DefaultGranularity)
			start := time.Now()
			if live := s.Len(); live != 0 { // drops all 1,000,000 at once
				b.Fatalf("%d nonces live after expiry", live)
			}
			b.ReportMetric(float64(time.Since(start))/1e3, "expire-1M-µs")
			fill(b, s, n, func(int) time.Time { return clk.Now().Add(benchWindow) })
			clk.Advance(benchWindow + replay.DefaultGranularity)
			lat := measure(b, s, n/10, "burst2-", func() time.Time { return clk.Now().Add(benchWindow) })
			report(b, s, lat)
		}
	})
}

func fill(b *testing.B, s *replay.Store, n int, until func(i int) time.Time) {
	ctx := context.Background()
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "nonce-"...), int64(i), 10)
		if err := s.CheckNonce(ctx, "ns-"+strconv.Itoa(i%1000), string(buf), until(i)); err != nil {
			b.Fatalf("fill %d: %v", i, err)
		}
	}
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
	b.ReportMetric(float64(time.Since(start))/1e3, "sweep-µs")
	b.ReportMetric(float64(live), "live")
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
