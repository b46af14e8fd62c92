package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/replay"
)

// TestDamagedHorizonRefusesAllThatMayPredateTheStart: with no snapshot and
// a horizon file that cannot be read, the gateway cannot know what the
// previous process accepted, so it refuses every signature that could
// have been accepted before it started (created up to now + skew), and
// takes those after.
func TestDamagedHorizonRefusesAllThatMayPredateTheStart(t *testing.T) {
	const maxAge, skew = 300 * time.Second, 30 * time.Second
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, content := range []string{"", "idn-replay-horizon-v1 \n", "idn-replay-horizon-v1 17673\x00\n", "garbage"} {
		t.Run(fmt.Sprintf("%q", content), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, NonceHorizonFile), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			store, _ := replay.New(replay.Config{Clock: clock})
			g, err := openNonces(dir, store, clock, maxAge, skew, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer g.close()
			ctx := context.Background()
			if err := g.CheckNonce(ctx, "alice", "signed-now", now.Add(maxAge)); !errors.Is(err, httpsig.ErrReplayDetected) {
				t.Fatalf("a signature that may predate the start: %v", err)
			}
			if err := g.CheckNonce(ctx, "alice", "ahead-by-the-skew", now.Add(skew+maxAge)); !errors.Is(err, httpsig.ErrReplayDetected) {
				t.Fatalf("a signature created now + skew: %v", err)
			}
			if err := g.CheckNonce(ctx, "alice", "after", now.Add(skew+maxAge+time.Second)); err != nil {
				t.Fatalf("a signature created after now + skew: %v", err)
			}
			h, _, err := readHorizon(filepath.Join(dir, NonceHorizonFile))
			if err != nil || h < ceilUnix(now.Add(skew+maxAge+time.Second)) {
				t.Fatalf("horizon rewritten as %d, %v; it must cover what was accepted", h, err)
			}
		})
	}
}

// FuzzParseHorizon: no input panics, and what parses is the one way of
// writing its time.
func FuzzParseHorizon(f *testing.F) {
	f.Add([]byte("idn-replay-horizon-v1 1767323045\n"))
	f.Add([]byte("idn-replay-horizon-v1 -1\n"))
	f.Add([]byte("idn-replay-horizon-v1 +1767323045\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHorizon(b)
		if err != nil {
			return
		}
		if again := fmt.Sprintf("%s%d\n", horizonMagic, h); again != string(b) {
			t.Fatalf("%q parsed as %d, written %q", b, h, again)
		}
	})
}

// TestCrashRefusesAllTheDeadProcessAccepted: whatever a gateway accepted,
// from many clients at once whose clocks run up to the skew ahead, the
// next process refuses after a crash (no snapshot), though its own
// store is empty; and it takes a signature made after the horizon.
func TestCrashRefusesAllTheDeadProcessAccepted(t *testing.T) {
	const maxAge, skew = 300 * time.Second, 30 * time.Second
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	open := func() *nonceGuard {
		store, _ := replay.New(replay.Config{Clock: clock})
		g, err := openNonces(dir, store, clock, maxAge, skew, logger)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	dead := open()
	ctx, stop := context.WithCancel(context.Background())
	var refresher sync.WaitGroup
	refresher.Go(func() { dead.run(ctx) })
	const clients, each = 8, 200
	accepted := make([][]time.Time, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for i := range each {
				now.Add(int64(time.Millisecond) * int64(rng.IntN(3))) // the clock moves on
				created := clock().Add(time.Duration(rng.Int64N(int64(skew)))).Truncate(time.Second)
				until := created.Add(maxAge)
				if err := dead.CheckNonce(context.Background(), "alice", fmt.Sprintf("c%d-%d", c, i), until); err != nil {
					t.Errorf("client %d, request %d: %v", c, i, err)
					return
				}
				accepted[c] = append(accepted[c], until)
			}
		})
	}
	wg.Wait()
	stop()
	refresher.Wait()
	dead.unlock() // the process dies: the kernel drops its lock; no snapshot

	now.Add(int64(time.Second))
	next := open()
	defer next.close()
	latest := time.Time{}
	for c := range clients {
		for i, until := range accepted[c] {
			if err := next.CheckNonce(context.Background(), "alice", fmt.Sprintf("c%d-%d", c, i), until); !errors.Is(err, httpsig.ErrReplayDetected) {
				t.Fatalf("client %d, request %d accepted before the crash: %v after it", c, i, err)
			}
			if until.After(latest) {
				latest = until
			}
		}
	}
	after := time.Unix(dead.horizon.Load()+1, 0)
	if after.Sub(latest) > nonceLease+time.Second {
		t.Errorf("the horizon ran %s past the latest accepted signature; the lease is %s", after.Sub(latest), nonceLease)
	}
	if err := next.CheckNonce(context.Background(), "alice", "after-the-horizon", after); err != nil {
		t.Fatalf("a signature past the horizon: %v", err)
	}
}

// BenchmarkCheckNonce measures one check of a fresh nonce from two
// goroutines per core, by the bare store and through the gateway's
// guard (its horizon compare and atomic load), as replay's
// BenchmarkCheckNonce does.
func BenchmarkCheckNonce(b *testing.B) {
	const maxAge = 300 * time.Second
	for _, guarded := range []bool{false, true} {
		name := map[bool]string{false: "store", true: "guarded"}[guarded]
		b.Run(name, func(b *testing.B) {
			store, _ := replay.New(replay.Config{MaxBytes: 1 << 30})
			var checker httpsig.NonceChecker = store
			if guarded {
				g, err := openNonces(b.TempDir(), store, nil, maxAge, 30*time.Second, slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				defer g.close()
				checker = g
			}
			until := time.Now().Truncate(time.Second).Add(maxAge) // a signature created now
			ctx := context.Background()
			b.SetParallelism(2)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 0, 32)
				prefix := strconv.FormatInt(time.Now().UnixNano(), 36)
				for i := 0; pb.Next(); i++ {
					buf = strconv.AppendInt(append(buf[:0], prefix...), int64(i), 36)
					if err := checker.CheckNonce(ctx, "bench-namespace", string(buf), until); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
