package claimcache_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
)

// generatedSource delivers n synthetic approved claims without holding them:
// claim i is for namespace "agent-<i>" with a key derived from i.
type generatedSource struct{ n int }

func benchKey(i int) ed25519.PublicKey {
	sum := sha256.Sum256(binary.LittleEndian.AppendUint64(nil, uint64(i)))
	return sum[:]
}

func (g generatedSource) ApprovedClaims(_ context.Context, service, _ string, add func(claimcache.Claim) error) (string, error) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range g.n {
		err := add(claimcache.Claim{
			ID:         "clm_" + strconv.FormatUint(uint64(i)*2654435761+1e15, 36), // 26 chars, like clm_ + random
			Namespace:  "agent-" + strconv.Itoa(i),
			PublicKey:  "ed25519:" + base64.StdEncoding.EncodeToString(benchKey(i)),
			Service:    service,
			ApprovedAt: at.Add(time.Duration(i) * time.Second),
		})
		if err != nil {
			return "", err
		}
	}
	return "v1", nil
}

const benchClaims = 1_000_000

func loadedCache(b *testing.B, n int) *claimcache.Cache {
	b.Helper()
	c, err := claimcache.New(claimcache.Config{Source: generatedSource{n}, Services: []string{"github"}, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Refresh(context.Background(), "github"); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkSnapshotMemory1M builds a snapshot of 1,000,000 approved claims
// and reports the heap it retains per claim (B/claim).
func BenchmarkSnapshotMemory1M(b *testing.B) {
	for b.Loop() {
		before := heapAlloc()
		c := loadedCache(b, benchClaims)
		after := heapAlloc()
		if st := c.Status("github"); st.Claims != benchClaims {
			b.Fatalf("Status = %+v", st)
		}
		b.ReportMetric(float64(after-before)/benchClaims, "B/claim")
		b.ReportMetric(float64(after-before)/(1<<20), "heap-MB")
		runtime.KeepAlive(c)
	}
}

// BenchmarkLookup1M looks up random tuples in a snapshot of 1,000,000
// approved claims: hits (approved callers) and misses (unknown callers; the
// early-refresh request they make is a no-op without Run).
func BenchmarkLookup1M(b *testing.B) {
	c := loadedCache(b, benchClaims)
	const probes = 1 << 16
	namespaces := make([]string, probes)
	keys := make([]ed25519.PublicKey, probes)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range probes {
		n := r.IntN(benchClaims)
		namespaces[i], keys[i] = "agent-"+strconv.Itoa(n), benchKey(n)
	}
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := c.Lookup("github", namespaces[i%probes], keys[i%probes]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			// Right key, wrong namespace: never approved.
			if _, err := c.Lookup("github", "x"+namespaces[i%probes], keys[i%probes]); !errors.Is(err, claimcache.ErrNotApproved) {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("hit-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(probes)
			for pb.Next() {
				if _, err := c.Lookup("github", namespaces[i%probes], keys[i%probes]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
