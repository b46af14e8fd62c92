package pool_test

import (
	"crypto/rand"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/pool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type session struct{ slot pool.Slot }

func (s *session) Slot() *pool.Slot { return &s.slot }

func newSession(namespace, key string) *session {
	return &session{slot: pool.Slot{ID: rand.Text(), Owner: pool.Owner{Namespace: namespace, Key: key}}}
}

func newTable(l pool.Limits) (*pool.Table[*session], prometheus.Gauge, prometheus.Counter) {
	size := prometheus.NewGauge(prometheus.GaugeOpts{Name: "size"})
	evictions := prometheus.NewCounter(prometheus.CounterOpts{Name: "evictions"})
	return pool.NewTable[*session](l, size, evictions), size, evictions
}

func TestNewLimits(t *testing.T) {
	t.Parallel()
	if got := pool.NewLimits(0, 0, 0); got != (pool.Limits{Total: 1000, PerKey: 32, PerNamespace: 128}) {
		t.Errorf("defaults = %+v", got)
	}
	if got := pool.NewLimits(4, 100, 10); got != (pool.Limits{Total: 4, PerKey: 4, PerNamespace: 4}) {
		t.Errorf("shares are not capped by the one above: %+v", got)
	}
}

func TestTableEvictsTheOwnersLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	tbl, size, evictions := newTable(pool.Limits{Total: 3, PerKey: 2, PerNamespace: 3})
	a1, a2, other := newSession("n", "a"), newSession("n", "a"), newSession("m", "b")
	for _, s := range []*session{a1, a2, other} {
		if ev, ok := tbl.Add(s); !ok || len(ev) != 0 {
			t.Fatalf("Add = %v, %v", ev, ok)
		}
	}
	tbl.Touch(a1) // a2 is now a's least recently used
	a3 := newSession("n", "a")
	ev, ok := tbl.Add(a3)
	if !ok || len(ev) != 1 || ev[0] != a2 {
		t.Fatalf("a flooding key evicted %v (ok %v), want its own a2", ev, ok)
	}
	if tbl.Lookup(a2.slot.ID) != nil || tbl.Lookup(other.slot.ID) != other || tbl.Remove(a2) {
		t.Fatal("the evicted session is still held, or another caller's is gone")
	}
	if testutil.ToFloat64(size) != 3 || testutil.ToFloat64(evictions) != 1 {
		t.Errorf("size %v, evictions %v", testutil.ToFloat64(size), testutil.ToFloat64(evictions))
	}
}

func TestFullTableRefusesOnlyANamespaceWithout(t *testing.T) {
	t.Parallel()
	tbl, _, _ := newTable(pool.Limits{Total: 2, PerKey: 2, PerNamespace: 2})
	held := []*session{newSession("n", "a"), newSession("n", "b")}
	for _, s := range held {
		tbl.Add(s)
	}
	if ev, ok := tbl.Add(newSession("flood", "x")); ok || len(ev) != 0 {
		t.Fatalf("a namespace without sessions took a place in a full pool: %v, %v", ev, ok)
	}
	if ev, ok := tbl.Add(newSession("n", "c")); !ok || len(ev) != 1 {
		t.Fatalf("a namespace holding sessions was refused: %v, %v", ev, ok)
	}
	if n := len(tbl.All()); n != 2 {
		t.Errorf("the table holds %d", n)
	}
}
