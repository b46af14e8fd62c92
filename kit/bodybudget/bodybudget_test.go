package bodybudget

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBudgetNeverGrantsPastMax(t *testing.T) {
	t.Parallel()
	b := &Budget{Max: 1000}
	// held counts the reservations granted and not yet given back (Used
	// may briefly read higher while a refused Take backs out).
	var held, peak, refused atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if !b.Take(100) {
					refused.Add(1)
					continue
				}
				h := held.Add(100)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				runtime.Gosched()
				held.Add(-100)
				b.Give(100)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > b.Max {
		t.Fatalf("reservations held at once reached %d, past Max %d", p, b.Max)
	}
	if refused.Load() == 0 {
		t.Log("no Take was refused: the run never reached Max")
	}
	if b.Used() != 0 {
		t.Fatalf("%d bytes still reserved after every Give", b.Used())
	}
	if b.Take(1001) || b.Used() != 0 {
		t.Fatalf("a take over Max reserved %d bytes", b.Used())
	}
}
