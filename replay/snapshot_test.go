package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/replay"
)

// snapshotOf records n nonces ("nonce-0" …) in a new store of maxBytes,
// each kept window from t0, closes it and returns its snapshot.
func snapshotOf(t testing.TB, maxBytes int64, n int, window time.Duration) []byte {
	t.Helper()
	s, _ := newStore(t, replay.Config{MaxBytes: maxBytes})
	for i := range n {
		if err := s.CheckNonce(context.Background(), "ns-"+strconv.Itoa(i%7), "nonce-"+strconv.Itoa(i), t0.Add(window)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestClosedStoreRecordsNothing(t *testing.T) {
	s, _ := newStore(t, replay.Config{})
	s.Close()
	s.Close()
	if err := s.CheckNonce(context.Background(), "alice", "nonce-0001", t0.Add(time.Minute)); !errors.Is(err, replay.ErrClosed) {
		t.Fatalf("CheckNonce after Close: %v, want ErrClosed", err)
	}
}

// TestSnapshotKeepsNoncesAcrossStores: what one store accepted, a store
// loaded from its snapshot refuses as a replay, whatever the second
// store's size (and so its number of shards) is.
func TestSnapshotKeepsNoncesAcrossStores(t *testing.T) {
	const n = 5000
	for _, sizes := range []struct {
		name     string
		from, to int64
	}{
		{"same size", 64 << 20, 64 << 20},
		{"fewer shards", 64 << 20, 2 << 20},
		{"more shards", 2 << 20, 64 << 20},
		{"one shard to 32", 1 << 20, 256 << 20},
	} {
		t.Run(sizes.name, func(t *testing.T) {
			snap := snapshotOf(t, sizes.from, n, 5*time.Minute)
			s, clk := newStore(t, replay.Config{MaxBytes: sizes.to})
			clk.Advance(time.Minute)
			if got, err := s.ReadFrom(bytes.NewReader(snap)); err != nil || got != int64(len(snap)) {
				t.Fatalf("ReadFrom: %d, %v; want %d, nil", got, err, len(snap))
			}
			ctx := context.Background()
			for i := range n {
				err := s.CheckNonce(ctx, "ns-"+strconv.Itoa(i%7), "nonce-"+strconv.Itoa(i), clk.Now().Add(5*time.Minute))
				if !errors.Is(err, replay.ErrReplay) {
					t.Fatalf("replay of nonce %d after the load: %v", i, err)
				}
			}
			if err := s.CheckNonce(ctx, "ns-0", "fresh-nonce", clk.Now().Add(5*time.Minute)); err != nil {
				t.Fatalf("a fresh nonce after the load: %v", err)
			}
		})
	}
}

func TestSnapshotDropsExpiredNonces(t *testing.T) {
	snap := snapshotOf(t, 0, 100, time.Minute)
	s, clk := newStore(t, replay.Config{})
	clk.Advance(time.Minute + time.Second)
	if _, err := s.ReadFrom(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("%d nonces loaded, all of them expired", n)
	}
	if err := s.CheckNonce(context.Background(), "ns-0", "nonce-0", clk.Now().Add(time.Minute)); err != nil {
		t.Fatalf("an expired nonce used again: %v", err)
	}
}

// TestDamagedSnapshotIsRefused: a snapshot cut short, altered, extended
// or too large is refused, and the store is left empty, with its own
// key, so its owner can tell it holds nothing rather than part.
func TestDamagedSnapshotIsRefused(t *testing.T) {
	snap := snapshotOf(t, 0, 50, 5*time.Minute)
	flip := func(i int) []byte { b := bytes.Clone(snap); b[i] ^= 1; return b }
	tests := []struct {
		name     string
		data     []byte
		maxBytes int64
	}{
		{"empty file", nil, 0},
		{"cut in the header", snap[:10], 0},
		{"cut in the entries", snap[:len(snap)/2], 0},
		{"checksum missing", snap[:len(snap)-32], 0},
		{"magic altered", flip(0), 0},
		{"fingerprint key altered", flip(30), 0},
		{"shard count altered", flip(50), 0},
		{"an entry altered", flip(len(snap) - 40), 0},
		{"checksum altered", flip(len(snap) - 1), 0},
		{"bytes appended", append(bytes.Clone(snap), 0), 0},
		{"more nonces than the store holds", snapshotOf(t, 1<<20, 20_000, 5*time.Minute), 4 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newStore(t, replay.Config{MaxBytes: tt.maxBytes})
			if _, err := s.ReadFrom(bytes.NewReader(tt.data)); err == nil {
				t.Fatal("a damaged snapshot was loaded")
			}
			if n := s.Len(); n != 0 {
				t.Fatalf("%d nonces left in the store after a refused load", n)
			}
			// Its own key: the snapshot's nonces are not refused.
			if err := s.CheckNonce(context.Background(), "ns-0", "nonce-0", clk.Now().Add(time.Minute)); err != nil {
				t.Fatalf("after a refused load: %v", err)
			}
		})
	}
}

func TestReadFromNeedsAnUnusedStore(t *testing.T) {
	snap := snapshotOf(t, 0, 10, 5*time.Minute)
	used, _ := newStore(t, replay.Config{})
	if err := used.CheckNonce(context.Background(), "alice", "nonce-0001", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := used.ReadFrom(bytes.NewReader(snap)); err == nil {
		t.Fatal("loaded into a store that holds nonces")
	}
	closed, _ := newStore(t, replay.Config{})
	closed.Close()
	if _, err := closed.ReadFrom(bytes.NewReader(snap)); err == nil {
		t.Fatal("loaded into a closed store")
	}
}

// FuzzReadFrom: no input makes ReadFrom panic, and a refused one leaves
// the store empty.
func FuzzReadFrom(f *testing.F) {
	f.Add(snapshotOf(f, 0, 20, 5*time.Minute))
	f.Add(snapshotOf(f, 1<<20, 3, 5*time.Minute))
	f.Add([]byte("idn-replay-snapshot-v1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _ := newStore(t, replay.Config{MaxBytes: 1 << 20})
		if _, err := s.ReadFrom(bytes.NewReader(data)); err != nil && s.Len() != 0 {
			t.Fatalf("refused (%v) but %d nonces kept", err, s.Len())
		}
	})
}

// TestCloseDuringChecksLosesNoAcceptedNonce: checks running while the
// store is closed either fail with ErrClosed or are in the snapshot
// written after Close.
func TestCloseDuringChecksLosesNoAcceptedNonce(t *testing.T) {
	s, clk := newStore(t, replay.Config{})
	const workers = 8
	accepted := make([][]string, workers)
	var total atomic.Int64
	busy := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				nonce := fmt.Sprintf("w%d-%d", w, i)
				err := s.CheckNonce(context.Background(), "alice", nonce, clk.Now().Add(time.Minute))
				if errors.Is(err, replay.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("%s: %v", nonce, err)
					return
				}
				accepted[w] = append(accepted[w], nonce)
				if total.Add(1) == 20_000 {
					once.Do(func() { close(busy) })
				}
			}
		})
	}
	<-busy
	s.Close()
	wg.Wait()
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	next, _ := newStore(t, replay.Config{})
	if _, err := next.ReadFrom(&buf); err != nil {
		t.Fatal(err)
	}
	for _, nonces := range accepted {
		for _, nonce := range nonces {
			if err := next.CheckNonce(context.Background(), "alice", nonce, clk.Now().Add(time.Minute)); !errors.Is(err, replay.ErrReplay) {
				t.Fatalf("%s, accepted before Close, is missing from the snapshot: %v", nonce, err)
			}
		}
	}
}

// BenchmarkSnapshot measures what a clean stop and the next start cost
// with 1,000,000 live nonces: WriteTo, then ReadFrom into a new store
// (B/nonce is the snapshot's size over the nonces).
func BenchmarkSnapshot(b *testing.B) {
	const n = 1_000_000
	s, _ := newStore(b, replay.Config{})
	fill(b, s, n, func(int) time.Time { return t0.Add(benchWindow) })
	s.Close()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		start := time.Now()
		if _, err := s.WriteTo(&buf); err != nil {
			b.Fatal(err)
		}
		write := time.Since(start)
		next, _ := newStore(b, replay.Config{})
		start = time.Now()
		if _, err := next.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(write.Milliseconds()), "write-ms")
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "read-ms")
		b.ReportMetric(float64(buf.Len())/n, "B/nonce")
	}
}
