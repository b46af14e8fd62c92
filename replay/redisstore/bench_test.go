package redisstore_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/replay"
	"github.com/idnhq/idn/replay/redisstore"
	"github.com/idnhq/idn/replay/redisstore/redistest"
)

// BenchmarkCheckNonce is the cost of recording a fresh nonce, in memory
// and in a local redis-server (one round trip over loopback): one caller
// at a time (serial), and many (parallel, GOMAXPROCS×8 callers, as a
// busy gateway's requests).
func BenchmarkCheckNonce(b *testing.B) {
	mem, err := replay.New(replay.Config{})
	if err != nil {
		b.Fatal(err)
	}
	stores := []struct {
		name  string
		store httpsig.NonceChecker
	}{
		{"memory", mem},
		{"redis", open(b, redisstore.Config{URL: redistest.Start(b).URL()})},
	}
	for _, s := range stores {
		var seq atomic.Int64
		until := time.Now().Add(330 * time.Second)
		b.Run(s.name+"/serial", func(b *testing.B) {
			for b.Loop() {
				if err := s.store.CheckNonce(b.Context(), "alice", strconv.FormatInt(seq.Add(1), 36), until); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.store.CheckNonce(b.Context(), "alice", strconv.FormatInt(seq.Add(1), 36), until); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
