package fleet_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkFleet sends signed orders to one replica directly and to the
// two behind HAProxy, both on Redis, from 8×GOMAXPROCS callers. It
// reports each order's p50 and p99 besides ns/op. On one machine the
// replicas share its cores, so the second replica adds no CPU: the
// difference is HAProxy's hop.
func BenchmarkFleet(b *testing.B) {
	f := startFleet(b, 0)
	for _, target := range []struct{ name, addr string }{
		{"one-replica", f.replica["a"]},
		{"two-behind-haproxy", f.lb},
	} {
		b.Run(target.name, func(b *testing.B) {
			var mu sync.Mutex
			var latencies []time.Duration
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
				var mine []time.Duration
				for pb.Next() {
					o := f.sign()
					start := time.Now()
					if status, code := send(client, target.addr, o); status != 200 {
						b.Errorf("%d %s", status, code)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				latencies = append(latencies, mine...)
				mu.Unlock()
			})
			slices.Sort(latencies)
			if n := len(latencies); n > 0 {
				b.ReportMetric(float64(latencies[n/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(latencies[n*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
