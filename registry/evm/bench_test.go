package evm_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
)

// BenchmarkOwnerApprove compares the owner's approve call (HTTP, SQLite)
// with registry writes disabled and in queue mode, whose workers write each
// approval to the simulated chain meanwhile. The two control planes take
// turns, so both see the same load on the machine; it reports each median
// and 90th percentile and the ratio of the medians, which should stay
// under 1.10: in queue mode the call only wakes the workers.
//
//	go test -run '^$' -bench OwnerApprove -benchtime 400x ./registry/evm
func BenchmarkOwnerApprove(b *testing.B) {
	c := newChain(b)
	contract := c.deploy()
	modes := []string{controlplane.RegistryDisabled, controlplane.RegistryQueue}
	planes := make([]*plane, len(modes))
	worlds := make([]world, len(modes))
	lat := make([][]time.Duration, len(modes))
	for i, mode := range modes {
		planes[i] = newPlane(b, c, sqliteStore(b), mode, contract, &clock{})
		worlds[i] = planes[i].seed(b.N)
		planes[i].run()
	}
	b.ResetTimer()
	for n := range b.N {
		for k := range planes {
			i := (n + k) % len(planes) // each goes first every other turn
			p := planes[i]
			start := time.Now()
			if status, _ := p.move(worlds[i], worlds[i].claims[n].ID, "approve"); status != 200 {
				b.Fatalf("approve: %d", status)
			}
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(modes))
	for i, mode := range modes {
		slices.Sort(lat[i])
		p50[i] = float64(lat[i][len(lat[i])/2].Microseconds())
		b.ReportMetric(p50[i], "p50-"+mode+"-µs")
		b.ReportMetric(float64(lat[i][len(lat[i])*9/10].Microseconds()), "p90-"+mode+"-µs")
	}
	b.ReportMetric(p50[1]/p50[0], "p50-ratio")
}

// BenchmarkQueueDrain measures how fast the queue writes b.N approvals
// (and the namespace's registration) to the simulated chain, from the
// workers' start to an empty backlog.
//
//	go test -run '^$' -bench QueueDrain -benchtime 300x ./registry/evm
func BenchmarkQueueDrain(b *testing.B) {
	c := newChain(b)
	p := newPlane(b, c, sqliteStore(b), controlplane.RegistryQueue, c.deploy(), &clock{})
	w := p.seed(b.N)
	for _, cl := range w.claims {
		if status, _ := p.move(w, cl.ID, "approve"); status != 200 {
			b.Fatalf("approve: %d", status)
		}
	}
	b.ResetTimer()
	start := time.Now()
	p.run()
	for {
		q, err := p.store.RegistryBacklog(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if q.Owed == 0 {
			break
		}
		if q.Retrying > 0 || q.GivenUp > 0 {
			b.Fatalf("writes failed: %+v", q)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N+1)/elapsed.Seconds(), "writes/s")
}
