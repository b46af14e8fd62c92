package replay_test

import (
	"context"
	"errors"
	"fmt"
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
		{"nonce is forgotten after expiry plus one generation", []step{
			{0, window, "alice", "nonce-0001", nil},
			{window + replay.DefaultGranularity, 2*window + replay.DefaultGranularity, "alice", "nonce-0001", nil},
			{window + replay.DefaultGranularity, 2*window + replay.DefaultGranularity, "alice", "nonce-0001", replay.ErrReplay},
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
	s, clk := newStore(t, replay.Config{Granularity: time.Second})
	ctx := context.Background()
	if err := s.CheckNonce(ctx, "alice", "nonce-0001", t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckNonce(ctx, "alice", "nonce-0001", t0.Add(-time.Hour)); !errors.Is(err, replay.ErrReplay) {
		t.Fatalf("second check = %v, want ErrReplay", err)
	}
	clk.Advance(time.Second)
	if err := s.CheckNonce(ctx, "alice", "nonce-0001", t0); err != nil {
		t.Fatalf("after one generation: %v", err)
	}
}

func TestFullStoreRefusesWithoutEvicting(t *testing.T) {
	s, clk := newStore(t, replay.Config{MaxEntries: 100, Granularity: time.Second})
	ctx := context.Background()
	until := t0.Add(time.Minute)
	for i := range 100 {
		if err := s.CheckNonce(ctx, "flood", fmt.Sprintf("nonce-%04d", i), until); err != nil {
			t.Fatalf("nonce %d: %v", i, err)
		}
	}
	if err := s.CheckNonce(ctx, "victim", "nonce-new", until); !errors.Is(err, replay.ErrFull) {
		t.Fatalf("check on full store = %v, want ErrFull", err)
	}
	// No live nonce was evicted to make room.
	for i := range 100 {
		if err := s.CheckNonce(ctx, "flood", fmt.Sprintf("nonce-%04d", i), until); !errors.Is(err, replay.ErrReplay) {
			t.Fatalf("nonce %d after full: %v, want ErrReplay", i, err)
		}
	}
	if got := s.Len(); got != 100 {
		t.Fatalf("Len = %d, want 100", got)
	}
	// Once the flood expires, space is reclaimed, whatever shard it sat in.
	clk.Advance(time.Minute)
	if err := s.CheckNonce(ctx, "victim", "nonce-new", clk.Now().Add(time.Minute)); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if got := s.Len(); got != 1 {
		t.Fatalf("Len after expiry = %d, want 1", got)
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

func TestNewRejectsNegativeConfig(t *testing.T) {
	for _, cfg := range []replay.Config{{MaxEntries: -1}, {Granularity: -time.Second}} {
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

// TestFloodOnFullStoreDoesNotDeadlock: many callers finding the store full
// at once, each in its own shard, must all get their answer; a check that
// sweeps the other shards while holding its own lock would wait forever on
// a caller doing the same the other way round.
func TestFloodOnFullStoreDoesNotDeadlock(t *testing.T) {
	s, _ := newStore(t, replay.Config{MaxEntries: 64, Granularity: time.Second})
	ctx := context.Background()
	until := t0.Add(time.Minute)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 2000 {
				err := s.CheckNonce(ctx, "flood", fmt.Sprintf("w%02d-nonce-%05d", w, i), until)
				if err != nil && !errors.Is(err, replay.ErrFull) {
					t.Errorf("check: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := s.Len(); got != 64 {
		t.Fatalf("Len = %d, want 64", got)
	}
}
