package replay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/replay"
)

type fakeClock struct{ now atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.now.Store(t.UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.now.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.now.Add(int64(d)) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newStore(t testing.TB, cfg replay.Config) (*replay.Store, *fakeClock) {
	t.Helper()
	clk := newFakeClock(t0)
	cfg.Clock = clk.Now
	s, err := replay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func TestCheckNonce(t *testing.T) {
	ctx := context.Background()
	const window = 5 * time.Minute
	// at is when the check happens and until when its signature stops being
	// acceptable, both relative to t0.
	type step struct {
		at, until    time.Duration
		scope, nonce string
		want         error
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first use is accepted", []step{{0, window, "alice", "nonce-0001", nil}}},
		{"replay of the same request is refused", []step{
			{0, window, "alice", "nonce-0001", nil},
			{time.Second, window, "alice", "nonce-0001", replay.ErrReplay},
		}},
		{"replay just before expiry is refused", []step{
			{0, window, "alice", "nonce-0001", nil},
			{window - time.Nanosecond, window, "alice", "nonce-0001", replay.ErrReplay},
		}},
		{"nonce reused by a later signature is refused", []step{
			{0, window, "alice", "nonce-0001", nil},
			{time.Minute, time.Minute + window, "alice", "nonce-0001", replay.ErrReplay},
		}},
		{"same nonce in another namespace is accepted", []step{
			{0, window, "alice", "nonce-0001", nil},
			{0, window, "bob", "nonce-0001", nil},
		}},
		{"scope/nonce boundary shift is not a replay", []step{
			{0, window, "alice", "x-nonce-0001", nil},
			{0, window, "alicex", "-nonce-0001", nil},
		}},
		{"nonce is forgotten once its signature expired", []step{
			{0, window, "alice", "nonce-0001", nil},
			{window, 2 * window, "alice", "nonce-0001", nil},
			{window, 2 * window, "alice", "nonce-0001", replay.ErrReplay},
		}},
		{"nonce expiring within a second is kept to the next whole second", []step{
			{0, window + time.Millisecond, "alice", "nonce-0001", nil},
			{window + 999*time.Millisecond, 2 * window, "alice", "nonce-0001", replay.ErrReplay},
			{window + time.Second, 2 * window, "alice", "nonce-0001", nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newStore(t, replay.Config{})
			for i, st := range tt.steps {
				clk.now.Store(t0.Add(st.at).UnixNano())
				err := s.CheckNonce(ctx, st.scope, st.nonce, t0.Add(st.until))
				if st.want == nil && err != nil || !errors.Is(err, st.want) {
					t.Fatalf("step %d: CheckNonce = %v, want %v", i, err, st.want)
				}
			}
		})
	}
}

func TestUntilInThePastIsStillRemembered(t *testing.T) {
	s, clk := newStore(t, replay.Config{})
	ctx := context.Background()
	if err := s.CheckNonce(ctx, "alice", "nonce-0001", t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second - time.Nanosecond)
	if err := s.CheckNonce(ctx, "alice", "nonce-0001", t0.Add(-time.Hour)); !errors.Is(err, replay.ErrReplay) {
		t.Fatalf("second check within a second = %v, want ErrReplay", err)
	}
	clk.Advance(time.Nanosecond)
	if err := s.CheckNonce(ctx, "alice", "nonce-0001", t0); err != nil {
		t.Fatalf("after a second: %v", err)
	}
}

func TestFullStoreRefusesWithoutEvicting(t *testing.T) {
	const maxBytes = 4096
	s, clk := newStore(t, replay.Config{MaxBytes: maxBytes})
	ctx := context.Background()
	until := t0.Add(time.Minute)
	accepted := 0
	for ; ; accepted++ {
		err := s.CheckNonce(ctx, "flood", fmt.Sprintf("nonce-%04d", accepted), until)
		if errors.Is(err, replay.ErrFull) {
			break
		}
		if err != nil {
			t.Fatalf("nonce %d: %v", accepted, err)
		}
	}
	if accepted < maxBytes/replay.Bytes || accepted > maxBytes/64*5 {
		t.Fatalf("%d nonces fit in %d bytes, want %d to %d", accepted, maxBytes, maxBytes/replay.Bytes, maxBytes/64*5)
	}
	// No live nonce was evicted to make room.
	for i := range accepted {
		if err := s.CheckNonce(ctx, "flood", fmt.Sprintf("nonce-%04d", i), until); !errors.Is(err, replay.ErrReplay) {
			t.Fatalf("nonce %d after full: %v, want ErrReplay", i, err)
		}
	}
	if got := s.Len(); got != accepted {
		t.Fatalf("Len = %d, want %d", got, accepted)
	}
	// Once the flood expires, its room is free again, with no sweep.
	clk.Advance(time.Minute)
	if got := s.Len(); got != 0 {
		t.Fatalf("Len after expiry = %d, want 0", got)
	}
	for i := range maxBytes / replay.Bytes {
		if err := s.CheckNonce(ctx, "victim", fmt.Sprintf("nonce-%04d", i), clk.Now().Add(time.Minute)); err != nil {
			t.Fatalf("victim nonce %d after expiry: %v", i, err)
		}
	}
}

// TestNoReplayPassesWhileTheTableMovesNonces checks a store against a
// model through growth, relocations, expiry and full: a nonce the store
// accepted is refused as a replay until its time has passed, and a nonce it
// refused as full was not recorded.
func TestNoReplayPassesWhileTheTableMovesNonces(t *testing.T) {
	for _, maxBytes := range []int64{64, 1024, 64 << 10, 1 << 20} {
		t.Run(fmt.Sprint(maxBytes), func(t *testing.T) {
			s, clk := newStore(t, replay.Config{MaxBytes: maxBytes})
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(maxBytes), 2))
			live := map[string]time.Time{} // nonce -> until
			full := 0
			for i := range 20_000 {
				if i%100 == 0 {
					clk.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
				}
				nonce := fmt.Sprintf("n-%d", rng.IntN(30_000)) // some reused, replays
				until := clk.Now().Add(time.Duration(1+rng.IntN(120)) * time.Second)
				known, ok := live[nonce]
				isLive := ok && clk.Now().Before(known)
				// Kept to the next whole second: either answer is right
				// until then.
				mayBeLive := ok && clk.Now().Before(known.Add(time.Second-1).Truncate(time.Second))
				err := s.CheckNonce(ctx, "ns", nonce, until)
				switch {
				case mayBeLive && !isLive && errors.Is(err, replay.ErrReplay):
				case isLive && !errors.Is(err, replay.ErrReplay):
					t.Fatalf("check %d: live nonce %s (until %v, now %v) = %v: a replay passed", i, nonce, known, clk.Now(), err)
				case isLive:
				case errors.Is(err, replay.ErrFull):
					full++
				case err != nil:
					t.Fatalf("check %d: fresh nonce %s = %v", i, nonce, err)
				default:
					live[nonce] = until
				}
			}
			if maxBytes <= 1024 && full == 0 {
				t.Fatal("the store never filled")
			}
			t.Logf("%d refused as full", full)
		})
	}
}

func TestConcurrentChecksAcceptExactlyOnce(t *testing.T) {
	s, _ := newStore(t, replay.Config{})
	ctx := context.Background()
	const workers, nonces = 8, 200
	var accepted [nonces]atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range nonces {
				err := s.CheckNonce(ctx, "alice", fmt.Sprintf("nonce-%04d", i), t0.Add(time.Minute))
				switch {
				case err == nil:
					accepted[i].Add(1)
				case !errors.Is(err, replay.ErrReplay):
					t.Errorf("nonce %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	for i := range accepted {
		if n := accepted[i].Load(); n != 1 {
			t.Fatalf("nonce %d accepted %d times, want 1", i, n)
		}
	}
}

func TestNewRejectsTooSmallConfig(t *testing.T) {
	for _, cfg := range []replay.Config{{MaxBytes: -1}, {MaxBytes: 63}} {
		if _, err := replay.New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded, want error", cfg)
		}
	}
}

func TestReplayIsTheHTTPSigSentinel(t *testing.T) {
	s, _ := newStore(t, replay.Config{})
	ctx := context.Background()
	s.CheckNonce(ctx, "alice", "nonce-0001", t0.Add(time.Minute))
	err := s.CheckNonce(ctx, "alice", "nonce-0001", t0.Add(time.Minute))
	if !errors.Is(err, httpsig.ErrReplayDetected) {
		t.Fatalf("CheckNonce = %v, want httpsig.ErrReplayDetected", err)
	}
}

// TestFullStoreKeepsMakingProgress fills a small store from many goroutines
// whose nonces land on every shard, and keeps checking past full: every
// check must return (ErrFull or nil), never wait on another full-store
// caller. A store that takes other shards' locks while holding its own
// deadlocks here.
func TestFullStoreKeepsMakingProgress(t *testing.T) {
	s, clk := newStore(t, replay.Config{MaxBytes: 2 << 20}) // two shards
	ctx := context.Background()
	const workers, checks = 16, 12_000
	var full atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range checks {
					if i%2000 == 0 && w == 0 {
						clk.Advance(30 * time.Second) // some nonces expire while others fill
					}
					err := s.CheckNonce(ctx, fmt.Sprintf("ns-%d", w), fmt.Sprintf("nonce-%d", i), clk.Now().Add(time.Hour))
					switch {
					case errors.Is(err, replay.ErrFull):
						full.Add(1)
					case err != nil:
						t.Errorf("worker %d check %d: %v", w, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("checks on a full store made no progress for 20 s (deadlock); %d ErrFull so far", full.Load())
	}
	if full.Load() == 0 {
		t.Fatal("the store never filled: the test did not exercise the full path")
	}
}
